// buildCliArgs (src/cli/cli-args.ts): the fixed table from session options to CLI flags.
// A client never passes raw flags; these tests pin the table and show that no option
// value can become a flag of its own in the CLI's argv.
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { MAX_ARG_STRLEN, baseArgs, buildCliArgs, promptToolArgs } from '../../src/cli/cli-args.js'
import { GatewayError } from '../../src/errors.js'
import { ARG_VALUE_MAX_BYTES, type SessionOptions, sessionOptions } from '../../src/protocol/session-options.js'

/** The documented table: option → the one flag it produces (value joined with `=`). */
const TABLE = {
  model: '--model',
  permission_mode: '--permission-mode',
  allowed_tools: '--allowedTools',
  disallowed_tools: '--disallowedTools',
  append_system_prompt: '--append-system-prompt',
  max_turns: '--max-turns',
  include_partial_messages: '--include-partial-messages'
} as const
const FLAG_TO_OPTION = new Map(Object.entries(TABLE).map(([k, v]) => [v as string, k]))

const BASE = ['--output-format', 'stream-json', '--verbose', '--input-format', 'stream-json', '--permission-prompt-tool', 'stdio']

/** Splits argv into base flags, the session flag pair, the option flags and the trailing extras. */
function sections (args: string[], extra: readonly string[]): { base: string[], session: string[], options: string[], extra: string[] } {
  return {
    base: args.slice(0, BASE.length),
    session: args.slice(BASE.length, BASE.length + 2),
    options: args.slice(BASE.length + 2, args.length - extra.length),
    extra: args.slice(args.length - extra.length)
  }
}

/** Reads the option flags back: flag name → its value (undefined for the boolean flag). Fails on anything else. */
function decode (optionArgs: string[]): Map<string, string | undefined> {
  const seen = new Map<string, string | undefined>()
  for (const arg of optionArgs) {
    const eq = arg.indexOf('=')
    const name = eq === -1 ? arg : arg.slice(0, eq)
    assert.ok(FLAG_TO_OPTION.has(name), `argv entry ${JSON.stringify(arg)} is not a flag of the table`)
    assert.ok(!seen.has(name), `flag ${name} appears twice`)
    if (name === '--include-partial-messages') assert.equal(eq, -1, 'the boolean flag takes no value')
    else assert.notEqual(eq, -1, `${name} must carry its value after '='`)
    seen.set(name, eq === -1 ? undefined : arg.slice(eq + 1))
  }
  return seen
}

describe('buildCliArgs', () => {
  const id = randomUUID()

  it('gives a new session the base flags and --session-id, nothing else', () => {
    const args = buildCliArgs({ sessionId: id, resume: false, options: {}, extra: [] })
    assert.deepEqual(args, [...BASE, '--session-id', id])
    assert.deepEqual([...baseArgs, ...promptToolArgs], BASE)
  })

  it('maps json_schema to one --json-schema=<JSON> flag, permission_prompt_tool "none" to no prompt tool, and entrypoint to no flag', () => {
    const schema = { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'] }
    const args = buildCliArgs({ sessionId: id, resume: false, options: { json_schema: schema, permission_prompt_tool: 'none', entrypoint: 'sdk-ts' }, extra: [] })
    assert.deepEqual(args, [...baseArgs, '--session-id', id, `--json-schema=${JSON.stringify(schema)}`])
    const stdio = buildCliArgs({ sessionId: id, resume: false, options: { permission_prompt_tool: 'stdio' }, extra: [] })
    assert.deepEqual(stdio, [...BASE, '--session-id', id])
    assert.equal(sessionOptions.safeParse({ entrypoint: 'evil' }).success, false)
    assert.equal(sessionOptions.safeParse({ permission_prompt_tool: 'mcp__x__y' }).success, false)
    assert.equal(sessionOptions.safeParse({ json_schema: 'not an object' }).success, false)
    assert.equal(sessionOptions.safeParse({ json_schema: { big: 'x'.repeat(ARG_VALUE_MAX_BYTES) } }).success, false)
  })

  it('uses --resume instead of --session-id once the conversation is stored', () => {
    const args = buildCliArgs({ sessionId: id, resume: true, options: { model: 'sonnet' }, extra: [] })
    assert.deepEqual(args.slice(0, BASE.length + 2), [...BASE, '--resume', id])
    assert.ok(!args.includes('--session-id'))
  })

  it('maps each option to exactly its flag of the table', () => {
    const cases: Array<[SessionOptions, string[]]> = [
      [{ model: 'claude-opus-4-1[1m]' }, ['--model=claude-opus-4-1[1m]']],
      [{ permission_mode: 'acceptEdits' }, ['--permission-mode=acceptEdits']],
      [{ allowed_tools: ['Bash(git log:*)', 'Read'] }, ['--allowedTools=Bash(git log:*),Read']],
      [{ allowed_tools: [] }, []],
      [{ disallowed_tools: ['WebFetch', 'mcp__srv__tool'] }, ['--disallowedTools=WebFetch,mcp__srv__tool']],
      [{ disallowed_tools: [] }, []],
      [{ append_system_prompt: 'Be brief.\nAnswer in French.' }, ['--append-system-prompt=Be brief.\nAnswer in French.']],
      [{ max_turns: 7 }, ['--max-turns=7']],
      [{ include_partial_messages: true }, ['--include-partial-messages']],
      [{ include_partial_messages: false }, []],
      [{ cwd: 'project/sub' }, []],
      [{ metadata: { owner: 'me', tags: ['a'] } }, []]
    ]
    for (const [options, expected] of cases) {
      const args = buildCliArgs({ sessionId: id, resume: false, options, extra: [] })
      assert.deepEqual(sections(args, []).options, expected, `options ${JSON.stringify(options)}`)
      assert.deepEqual(args.slice(0, BASE.length + 2), [...BASE, '--session-id', id])
    }
  })

  it('maps all options together, one flag each', () => {
    const options: SessionOptions = {
      model: 'sonnet',
      permission_mode: 'plan',
      allowed_tools: ['Read'],
      disallowed_tools: ['Bash'],
      append_system_prompt: 'hi',
      max_turns: 3,
      include_partial_messages: true,
      cwd: 'x',
      metadata: 1
    }
    const args = buildCliArgs({ sessionId: id, resume: false, options, extra: [] })
    const decoded = decode(sections(args, []).options)
    assert.deepEqual(Object.fromEntries(decoded), {
      '--model': 'sonnet',
      '--permission-mode': 'plan',
      '--allowedTools': 'Read',
      '--disallowedTools': 'Bash',
      '--append-system-prompt': 'hi',
      '--max-turns': '3',
      '--include-partial-messages': undefined
    })
  })

  it('appends the operator extras last, unchanged', () => {
    const extra = ['--mcp-config', '/etc/mcp.json', '--dangerously-skip-permissions']
    const args = buildCliArgs({ sessionId: id, resume: false, options: { model: 'opus', max_turns: 2 }, extra })
    assert.deepEqual(args.slice(-extra.length), extra)
    assert.deepEqual(sections(args, extra).options, ['--model=opus', '--max-turns=2'])
  })

  it('property: no client option value yields an argv entry outside the table', () => {
    const hostile = fc.constantFrom(
      '--dangerously-skip-permissions', '-p', '--model', '--resume', 'x --dangerously-skip-permissions',
      '--permission-mode=bypassPermissions', 'Bash(rm -rf /)', '-', '--', 'a\nb', ' --verbose'
    )
    const text = fc.oneof(hostile, fc.string(), fc.string({ unit: 'grapheme' }))
    const raw = fc.record({
      model: text,
      permission_mode: fc.oneof(fc.constantFrom('default', 'acceptEdits', 'bypassPermissions', 'plan', 'dontAsk', 'auto'), text),
      allowed_tools: fc.array(text, { maxLength: 5 }),
      disallowed_tools: fc.array(text, { maxLength: 5 }),
      append_system_prompt: text,
      max_turns: fc.oneof(fc.integer({ min: 1, max: 10_000 }), fc.integer()),
      include_partial_messages: fc.boolean(),
      cwd: text,
      metadata: fc.jsonValue()
    }, { requiredKeys: [] })
    const extra = ['--fake-extra', 'value']

    let validated = 0
    fc.assert(fc.property(raw, fc.boolean(), (candidate, resume) => {
      // What a client can reach: only options that pass the POST body schema.
      const parsed = sessionOptions.safeParse(candidate)
      const inputs: SessionOptions[] = [candidate as SessionOptions]
      if (parsed.success) { inputs.push(parsed.data); validated++ }
      for (const options of inputs) {
        const args = buildCliArgs({ sessionId: id, resume, options, extra })
        const part = sections(args, extra)
        assert.deepEqual(part.base, BASE)
        assert.deepEqual(part.session, [resume ? '--resume' : '--session-id', id])
        assert.deepEqual(part.extra, extra)
        const decoded = decode(part.options)
        // Each value comes back exactly as given: nothing was split off into another entry.
        const back = (flag: string): string | undefined => decoded.get(flag)
        const has = (flag: string): boolean => decoded.has(flag)
        if (options.model !== undefined) assert.equal(back('--model'), options.model)
        else assert.ok(!has('--model'))
        if (options.permission_mode !== undefined) assert.equal(back('--permission-mode'), options.permission_mode)
        else assert.ok(!has('--permission-mode'))
        if (options.append_system_prompt !== undefined) assert.equal(back('--append-system-prompt'), options.append_system_prompt)
        else assert.ok(!has('--append-system-prompt'))
        if (options.max_turns !== undefined) assert.equal(back('--max-turns'), String(options.max_turns))
        else assert.ok(!has('--max-turns'))
        for (const [key, flag] of [['allowed_tools', '--allowedTools'], ['disallowed_tools', '--disallowedTools']] as const) {
          const list = options[key]
          if (list !== undefined && list.length > 0) assert.equal(back(flag), list.join(','))
          else assert.ok(!has(flag))
        }
        assert.equal(has('--include-partial-messages'), options.include_partial_messages === true)
        // No entry between the session flags and the extras is anything but a table flag.
        assert.ok(!part.options.includes('--dangerously-skip-permissions'))
      }
    }), { numRuns: 500 })
    assert.ok(validated > 0, 'some generated options must pass validation')
  })
})

describe('argument sizes (Linux MAX_ARG_STRLEN, bytes not characters)', () => {
  const bytes = (arg: string): number => Buffer.byteLength(arg) + 1

  it('the request schema refuses free text that would not fit one argument, counted in UTF-8 bytes', () => {
    const wide = sessionOptions.safeParse({ append_system_prompt: '日'.repeat(100_000) })
    assert.equal(wide.success, false, '100 000 characters are 300 000 bytes')
    assert.match(String(wide.error?.issues[0]?.message), /bytes/)
    assert.deepEqual(wide.error?.issues[0]?.path, ['append_system_prompt'])
    // The largest accepted value still fits once the flag is in front; one character more is refused.
    for (const ch of ['p', 'é', '日', '😀']) {
      const text = ch.repeat(Math.floor(ARG_VALUE_MAX_BYTES / Buffer.byteLength(ch)))
      assert.equal(sessionOptions.safeParse({ append_system_prompt: text }).success, true, ch)
      assert.equal(sessionOptions.safeParse({ append_system_prompt: text + ch }).success, false, ch)
      const args = buildCliArgs({ sessionId: randomUUID(), resume: false, options: { append_system_prompt: text }, extra: [] })
      const flag = args.find((a) => a.startsWith('--append-system-prompt=')) as string
      assert.ok(bytes(flag) <= MAX_ARG_STRLEN, `${ch}: ${bytes(flag)} bytes`)
    }
  })

  it('buildCliArgs refuses (400) an argument exec would refuse, from stored options or CLAUDE_ARGS_EXTRA, never handing it to spawn', () => {
    const id = randomUUID()
    for (const input of [
      { options: { append_system_prompt: '日'.repeat(50_000) }, extra: [] },
      { options: {}, extra: ['--x=' + 'a'.repeat(MAX_ARG_STRLEN)] }
    ]) {
      assert.throws(() => buildCliArgs({ sessionId: id, resume: false, ...input }), (err: unknown) => err instanceof GatewayError && err.statusCode === 400 && /bytes/.test(err.message))
    }
    const edge = 'a'.repeat(MAX_ARG_STRLEN - 1 - '--append-system-prompt='.length)
    assert.ok(buildCliArgs({ sessionId: id, resume: false, options: { append_system_prompt: edge }, extra: [] }).includes(`--append-system-prompt=${edge}`))
    assert.throws(() => buildCliArgs({ sessionId: id, resume: false, options: { append_system_prompt: edge + 'a' }, extra: [] }), GatewayError)
  })
})
