// Records transcripts of the REAL `claude` CLI, driven over stream-json stdio,
// against the local Messages API stand-in (test/support/mock-anthropic.ts).
//
//   npm run record -- [--out DIR] [--keep] [--list] [scenario...]
//
// For each scenario it writes <out>/<name>.stdout.ndjson (CLI stdout, byte for
// byte), <name>.stdin.ndjson (what the host wrote), <name>.session.jsonl
// ({"t_ms","dir","raw"} per line; dir is stdin/stdout/stderr/stdin-eof/exit/driver)
// and regenerates <out>/INDEX.md from every transcript in <out>.
// Scratch paths are rewritten to /workspace/demo (cwd) and /home/user (HOME),
// as in the reference transcripts. Default out:
// test/fixtures/recorded/claude-code-<version>/
import { execFileSync } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import {
  claudeEnv,
  findToolResults,
  lastUserText,
  resolveClaudeBin,
  startMockAnthropic,
  type MockAnthropic,
  type RecordedRequest
} from '../test/support/mock-anthropic.js'
import {
  exitCodeOf,
  formatSequence,
  isCanUseTool,
  isResult,
  readSessionLog,
  sequenceTokens,
  spawnClaude,
  allowResponse,
  denyResponse,
  type CanUseToolRequest,
  type CliMessage,
  type CliProcess,
  type SessionEntry
} from '../test/support/cli-driver.js'

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const SCENARIO_DEADLINE_MS = 90_000
const WAIT_MS = 45_000

interface Workspace {
  root: string
  home: string
  cwd: string
  sessionId: string
}

interface Ctx {
  cli: CliProcess
  mock: MockAnthropic
  ws: Workspace
  /** Fail the scenario with a message (recorded as a driver note). */
  check(cond: unknown, message: string): void
}

interface Scenario {
  name: string
  description: string
  partial?: boolean
  /** Continue the session of this scenario with --resume (same HOME, cwd, session id). */
  resumeOf?: string
  /** Changes the CLI's environment (credentials, API address) from the offline default. */
  env?: (env: NodeJS.ProcessEnv) => NodeJS.ProcessEnv
  run(ctx: Ctx): Promise<void>
}

const BASH_PROMPT = 'RUN_BASH touch created-by-tool.txt && echo hello-from-tool'
const DENY_MESSAGE = 'User denied this in the browser'
// Not a retired model: 2.1.332 maps e.g. claude-opus-4-1-20250805 (and 'opus') to claude-opus-5-5.
const NEW_MODEL = 'claude-sonnet-4-5-20250929'

async function finishTurn(ctx: Ctx, from: number): Promise<CliMessage> {
  return ctx.cli.waitFor(isResult, { from, timeoutMs: WAIT_MS, what: 'result' })
}

/** Wait for a can_use_tool request at stdout line >= from; also returns the index after it. */
async function waitPermission(ctx: Ctx, from: number): Promise<{ req: CanUseToolRequest; next: number }> {
  const line = await ctx.cli.waitForLine((l) => l.msg !== undefined && isCanUseTool(l.msg), { from, timeoutMs: WAIT_MS, what: 'control_request can_use_tool' })
  return { req: line.msg as CanUseToolRequest, next: line.index + 1 }
}

const messageRequests = (mock: MockAnthropic): RecordedRequest[] => mock.messageRequests().filter((r) => r.stream)

const SCENARIOS: Scenario[] = [
  {
    name: 'text',
    description: 'initialize, one prompt, text answer, result; --session-id',
    async run(ctx) {
      await ctx.cli.initialize()
      const from = ctx.cli.mark()
      ctx.cli.sendUser('Say hello')
      const r = await finishTurn(ctx, from)
      ctx.check(r.subtype === 'success', `result subtype ${String(r.subtype)}`)
      ctx.check(r.result === 'Echo: Say hello', `result text ${JSON.stringify(r.result)}`)
      ctx.check(messageRequests(ctx.mock).some((q) => lastUserText(q.body) === 'Say hello'), 'stand-in did not see the prompt')
    }
  },
  {
    name: 'allow',
    description: 'Bash `touch created-by-tool.txt` asks can_use_tool; host allows with updatedInput + toolUseID; tool runs',
    async run(ctx) {
      await ctx.cli.initialize()
      const from = ctx.cli.mark()
      ctx.cli.sendUser(BASH_PROMPT)
      const { req } = await waitPermission(ctx, from)
      ctx.cli.send(allowResponse(req))
      const r = await finishTurn(ctx, from)
      ctx.check(r.subtype === 'success', `result subtype ${String(r.subtype)}`)
      ctx.check(existsSync(path.join(ctx.ws.cwd, 'created-by-tool.txt')), 'created-by-tool.txt was not created')
      const results = messageRequests(ctx.mock).flatMap((q) => findToolResults(q.body, { lastOnly: true }))
      ctx.check(results.some((t) => t.content.includes('hello-from-tool') && !t.isError), 'no successful tool_result reached the stand-in')
    }
  },
  {
    name: 'deny',
    description: 'same prompt; host denies with a message (+ toolUseID); the deny message comes back as tool_result',
    async run(ctx) {
      await ctx.cli.initialize()
      const from = ctx.cli.mark()
      ctx.cli.sendUser(BASH_PROMPT)
      const { req } = await waitPermission(ctx, from)
      ctx.cli.send(denyResponse(req, DENY_MESSAGE))
      const r = await finishTurn(ctx, from)
      ctx.check(r.subtype === 'success', `result subtype ${String(r.subtype)}`)
      ctx.check(!existsSync(path.join(ctx.ws.cwd, 'created-by-tool.txt')), 'file exists although denied')
      const results = messageRequests(ctx.mock).flatMap((q) => findToolResults(q.body, { lastOnly: true }))
      ctx.check(results.some((t) => t.content.includes(DENY_MESSAGE) && t.isError), 'deny message not seen as tool_result')
    }
  },
  {
    name: 'interrupt_pending_permission',
    description: 'host sends interrupt while can_use_tool is pending: control_cancel_request, interrupt success, result error_during_execution',
    async run(ctx) {
      await ctx.cli.initialize()
      const from = ctx.cli.mark()
      ctx.cli.sendUser(BASH_PROMPT)
      await waitPermission(ctx, from)
      await ctx.cli.request('interrupt', {}, { timeoutMs: WAIT_MS })
      const r = await finishTurn(ctx, from)
      ctx.check(r.subtype === 'error_during_execution', `result subtype ${String(r.subtype)}`)
      ctx.check(ctx.cli.messages().some((m) => m.type === 'control_cancel_request'), 'no control_cancel_request')
    }
  },
  {
    name: 'partial',
    description: '--include-partial-messages; a long answer streamed in 8 text deltas → stream_event frames',
    partial: true,
    async run(ctx) {
      await ctx.cli.initialize()
      const from = ctx.cli.mark()
      ctx.cli.sendUser('LONG_ANSWER 8')
      const r = await finishTurn(ctx, from)
      ctx.check(r.subtype === 'success', `result subtype ${String(r.subtype)}`)
      const deltas = ctx.cli.messages().filter((m) => m.type === 'stream_event' && (m.event as { type?: string } | undefined)?.type === 'content_block_delta')
      ctx.check(deltas.length === 8, `expected 8 content_block_delta stream events, got ${deltas.length}`)
    }
  },
  {
    name: 'set_model',
    description: `set_model ${NEW_MODEL} before the first prompt; the stand-in sees that model`,
    async run(ctx) {
      await ctx.cli.initialize()
      const resp = await ctx.cli.request('set_model', { model: NEW_MODEL })
      const answer = resp.response as { subtype?: string; response?: { model?: string } }
      ctx.check(answer.subtype === 'success', 'set_model not successful')
      ctx.check(answer.response?.model === NEW_MODEL, `set_model answered model ${String(answer.response?.model)}`)
      const from = ctx.cli.mark()
      ctx.cli.sendUser('Say hello')
      const r = await finishTurn(ctx, from)
      ctx.check(r.subtype === 'success', `result subtype ${String(r.subtype)}`)
      const models = messageRequests(ctx.mock).map((q) => (q.body as { model?: string }).model)
      ctx.check(models.length > 0 && models.every((m) => m === NEW_MODEL), `models sent: ${models.join(', ')}`)
    }
  },
  {
    name: 'resume',
    description: 'second run with --resume <id of the text session>; the request carries the earlier turn',
    resumeOf: 'text',
    async run(ctx) {
      await ctx.cli.initialize()
      const from = ctx.cli.mark()
      ctx.cli.sendUser('Say hello again')
      const r = await finishTurn(ctx, from)
      ctx.check(r.subtype === 'success', `result subtype ${String(r.subtype)}`)
      ctx.check(r.session_id === ctx.ws.sessionId, `session_id ${String(r.session_id)} != ${ctx.ws.sessionId}`)
      const q = messageRequests(ctx.mock).at(-1)
      const body = JSON.stringify((q?.body as { messages?: unknown } | undefined)?.messages ?? [])
      ctx.check(lastUserText(q?.body) === 'Say hello again', 'stand-in did not see the new prompt')
      ctx.check(body.includes('Say hello"') && body.includes('Echo: Say hello'), 'resumed request lacks the earlier turn')
    }
  },
  {
    name: 'two_tools',
    description: 'two Bash tool_uses in one message: asked one after the other; first allowed, second denied',
    async run(ctx) {
      await ctx.cli.initialize()
      const from = ctx.cli.mark()
      ctx.cli.sendUser('TWO_TOOLS')
      const { req: first, next } = await waitPermission(ctx, from)
      ctx.cli.send(allowResponse(first))
      const { req: second } = await waitPermission(ctx, next)
      ctx.check(second.request_id !== first.request_id, 'same request twice')
      ctx.cli.send(denyResponse(second, 'not this one'))
      const r = await finishTurn(ctx, from)
      ctx.check(r.subtype === 'success', `result subtype ${String(r.subtype)}`)
      ctx.check(existsSync(path.join(ctx.ws.cwd, 'one.txt')), 'one.txt missing')
      ctx.check(!existsSync(path.join(ctx.ws.cwd, 'two.txt')), 'two.txt exists although denied')
    }
  },
  {
    name: 'not_logged_in',
    description: 'no ANTHROPIC_API_KEY and no login: what a prompt gets (the gateway tells clients cli_not_authenticated)',
    env: ({ ANTHROPIC_API_KEY: _key, ...env }) => env,
    async run(ctx) {
      await ctx.cli.initialize()
      const from = ctx.cli.mark()
      ctx.cli.sendUser('Say hello')
      const r = await finishTurn(ctx, from)
      ctx.check(r.is_error === true, `result is_error ${String(r.is_error)}`)
      ctx.check(messageRequests(ctx.mock).length === 0, 'the CLI reached the API without credentials')
    }
  },
  {
    name: 'api_unreachable',
    description: 'ANTHROPIC_BASE_URL on a port nobody listens on: api_retry frames (the gateway tells clients api_unreachable); interrupted after 3',
    env: (env) => ({ ...env, ANTHROPIC_BASE_URL: 'http://127.0.0.1:9' }),
    async run(ctx) {
      await ctx.cli.initialize()
      const from = ctx.cli.mark()
      ctx.cli.sendUser('Say hello')
      let next = from
      for (let i = 0; i < 3; i++) {
        const line = await ctx.cli.waitForLine((l) => l.msg?.type === 'system' && l.msg.subtype === 'api_retry', { from: next, timeoutMs: 120_000, what: 'api_retry' })
        next = line.index + 1
      }
      await ctx.cli.request('interrupt', {}, { timeoutMs: WAIT_MS })
      const r = await finishTurn(ctx, from)
      ctx.check(r.type === 'result', 'no result after the interrupt')
    }
  }
]

// ---------------------------------------------------------------- plumbing

function parseArgs(argv: string[]): { out?: string; keep: boolean; list: boolean; names: string[] } {
  const res: { out?: string; keep: boolean; list: boolean; names: string[] } = { keep: false, list: false, names: [] }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!
    if (a === '--out') res.out = argv[++i]
    else if (a.startsWith('--out=')) res.out = a.slice('--out='.length)
    else if (a === '--keep') res.keep = true
    else if (a === '--list') res.list = true
    else if (a === '--') continue
    else if (a.startsWith('-')) throw new Error(`unknown option ${a}`)
    else res.names.push(a)
  }
  return res
}

function cliVersion(bin: string): string {
  const out = execFileSync(bin, ['--version'], { encoding: 'utf8', timeout: 30_000, env: { ...process.env, DISABLE_AUTOUPDATER: '1' } })
  const m = /(\d+\.\d+\.\d+)/.exec(out)
  if (!m?.[1]) throw new Error(`cannot parse claude --version output: ${out}`)
  return m[1]
}

function makeWorkspace(scratch: string, name: string): Workspace {
  const root = path.join(scratch, name)
  const home = path.join(root, 'home')
  const cwd = path.join(root, 'work')
  mkdirSync(home, { recursive: true })
  mkdirSync(cwd, { recursive: true })
  return { root, home: realpathSync(home), cwd: realpathSync(cwd), sessionId: randomUUID() }
}

/**
 * What the scratch folders are renamed to in a recording: the placeholders
 * the reference transcripts use, so recordings compare with them and name no
 * folder of the machine that made them. Never read or written as paths.
 */
const PLACEHOLDER_CWD = '/workspace/demo'
const PLACEHOLDER_HOME = '/home/user'

function rewriter(ws: Workspace): (s: string) => string {
  const slug = (p: string): string => p.replace(/[^a-zA-Z0-9]/g, '-')
  const pairs: Array<[string, string]> = [
    [ws.cwd, PLACEHOLDER_CWD],
    [slug(ws.cwd), slug(PLACEHOLDER_CWD)],
    [ws.home, PLACEHOLDER_HOME],
    [ws.root, '/scratch']
  ]
  return (s) => pairs.reduce((acc, [from, to]) => acc.split(from).join(to), s)
}

function describeRequest(r: RecordedRequest): string {
  const b = (r.body ?? {}) as { model?: string; messages?: unknown[] }
  const parts = [`api ${r.method} ${r.url}`, `kind=${r.kind}`]
  if (r.kind === 'messages') {
    parts.push(`stream=${r.stream}`, `model=${String(b.model)}`, `messages=${b.messages?.length ?? 0}`, `last_user=${JSON.stringify(lastUserText(r.body).slice(0, 80))}`)
    const tr = findToolResults(r.body, { lastOnly: true })
    if (tr.length) parts.push(`tool_results=${JSON.stringify(tr.map((t) => `${t.isError ? 'error:' : ''}${t.content.slice(0, 60)}`))}`)
    if (r.reply) parts.push(`reply=${r.reply.content.map((c) => (c.type === 'tool_use' ? `tool_use:${c.name}` : c.type)).join('+')}/${r.reply.stopReason}`)
  }
  return parts.join(' ')
}

interface RunOutcome {
  name: string
  ok: boolean
  errors: string[]
  exit: { code: number | null; signal: string | null } | undefined
  initMs?: number
  resultMs?: number
  totalMs: number
  cli: CliProcess
  ws: Workspace
}

async function runScenario(s: Scenario, bin: string, ws: Workspace): Promise<RunOutcome> {
  const errors: string[] = []
  // Every request the stand-in sees becomes a timed `driver` note in the transcript.
  let noteRequest: (r: RecordedRequest) => void = () => undefined
  const mock = await startMockAnthropic({ onRequest: (r) => noteRequest(r) })
  const started = Date.now()
  const cli = spawnClaude({
    bin,
    cwd: ws.cwd,
    env: (s.env ?? ((e: NodeJS.ProcessEnv) => e))(claudeEnv({ home: ws.home, baseUrl: mock.url })),
    ...(s.resumeOf ? { resume: ws.sessionId } : { sessionId: ws.sessionId }),
    includePartialMessages: s.partial === true,
    deadlineMs: SCENARIO_DEADLINE_MS
  })
  noteRequest = (r) => cli.note(describeRequest(r))
  const ctx: Ctx = {
    cli,
    mock,
    ws,
    check(cond, message) {
      if (!cond) {
        errors.push(message)
        cli.note(`CHECK FAILED: ${message}`)
      }
    }
  }
  try {
    await s.run(ctx)
  } catch (err) {
    errors.push(err instanceof Error ? err.message : String(err))
    cli.note(`ERROR: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`)
  } finally {
    // Always close stdin; the driver SIGKILLs the process group if it hangs.
    await cli.close(20_000)
    await mock.close()
  }
  const initLine = cli.lines.find((l) => l.msg?.type === 'control_response')
  const resultLine = cli.lines.find((l) => l.msg?.type === 'result')
  return {
    name: s.name,
    ok: errors.length === 0,
    errors,
    exit: cli.exitInfo,
    ...(initLine ? { initMs: initLine.t_ms } : {}),
    ...(resultLine ? { resultMs: resultLine.t_ms } : {}),
    totalMs: Date.now() - started,
    cli,
    ws
  }
}

function writeTranscript(outDir: string, o: RunOutcome): void {
  const rw = rewriter(o.ws)
  writeFileSync(path.join(outDir, `${o.name}.stdout.ndjson`), rw(o.cli.stdoutBytes().toString('utf8')))
  writeFileSync(path.join(outDir, `${o.name}.stdin.ndjson`), rw(o.cli.stdinBytes().toString('utf8')))
  const lines = o.cli.log.map((e: SessionEntry) => JSON.stringify({ t_ms: e.t_ms, dir: e.dir, raw: rw(e.raw) }))
  writeFileSync(path.join(outDir, `${o.name}.session.jsonl`), lines.join('\n') + (lines.length ? '\n' : ''))
}

function writeIndex(outDir: string, version: string): string {
  const names = readdirSync(outDir)
    .filter((f) => f.endsWith('.session.jsonl'))
    .map((f) => f.slice(0, -'.session.jsonl'.length))
    .sort()
  const byName = new Map(SCENARIOS.map((s) => [s.name, s]))
  const rows: string[] = []
  const apiRows: string[] = []
  for (const name of names) {
    const log = readSessionLog(path.join(outDir, `${name}.session.jsonl`))
    rows.push(`| ${name} | ${exitCodeOf(log) ?? '?'} | ${formatSequence(sequenceTokens(log))} |`)
    const api = log.filter((e) => e.dir === 'driver' && e.raw.startsWith('api '))
    const msgs = api.filter((e) => e.raw.includes('kind=messages'))
    const other = api.filter((e) => !e.raw.includes('kind=messages')).map((e) => e.raw.split(' ').slice(1, 3).join(' '))
    const resultEntry = log.find((e) => e.dir === 'stdout' && e.raw.includes('"type":"result"'))
    const initEntry = log.find((e) => e.dir === 'stdout' && e.raw.includes('"type":"control_response"'))
    apiRows.push(
      `| ${name} | ${msgs.length} (${msgs.filter((e) => e.raw.includes('stream=true')).length} streamed) | ${other.length ? other.join(', ') : '—'} | ${initEntry?.t_ms ?? '—'} | ${resultEntry?.t_ms ?? '—'} | ${byName.get(name)?.description ?? ''} |`
    )
  }
  const text = [
    `# Claude Code ${version}: recorded transcripts`,
    '',
    'Recorded by `npm run record` (scripts/record.ts): the real CLI driven over stream-json stdio',
    '(`--output-format stream-json --verbose --input-format stream-json --permission-prompt-tool stdio`,',
    'env `CLAUDE_CODE_ENTRYPOINT=sdk-ts`, `CLAUDE_CODE_SDK_READS_SESSION_STATE=1`) against the local',
    'Messages API stand-in test/support/mock-anthropic.ts, offline, with a scratch HOME and cwd',
    '(rewritten to /home/user and /workspace/demo). Notation as in the reference INDEX.md:',
    '`>` host→CLI, `<` CLI→host, `type/subtype`, `×N` repeats, `>EOF` stdin closed.',
    '',
    '| scenario | exit | sequence |',
    '|---|---|---|',
    ...rows,
    '',
    '## Requests seen by the stand-in, timing (ms since spawn)',
    '',
    '| scenario | POST /v1/messages | other requests | initialize answered | first result | what happens |',
    '|---|---|---|---|---|---|',
    ...apiRows,
    ''
  ].join('\n')
  writeFileSync(path.join(outDir, 'INDEX.md'), text)
  return text
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2))
  if (args.list) {
    for (const s of SCENARIOS) console.log(`${s.name.padEnd(30)} ${s.description}`)
    return
  }
  const unknown = args.names.filter((n) => !SCENARIOS.some((s) => s.name === n))
  if (unknown.length) throw new Error(`unknown scenario(s): ${unknown.join(', ')} (try --list)`)
  const wanted = args.names.length ? SCENARIOS.filter((s) => args.names.includes(s.name)) : SCENARIOS
  // Run dependencies (resume needs its base session) even when not asked for.
  const toRun: Scenario[] = []
  for (const s of wanted) {
    const dep = s.resumeOf ? SCENARIOS.find((x) => x.name === s.resumeOf) : undefined
    if (dep && !toRun.includes(dep)) toRun.push(dep)
    if (!toRun.includes(s)) toRun.push(s)
  }

  const bin = resolveClaudeBin(REPO_ROOT)
  const version = cliVersion(bin)
  const outDir = path.resolve(args.out ?? path.join(REPO_ROOT, 'test', 'fixtures', 'recorded', `claude-code-${version}`))
  mkdirSync(outDir, { recursive: true })
  const scratch = mkdtempSync(path.join(tmpdir(), 'claude-record-'))
  console.log(`claude ${version} at ${bin}\nout: ${outDir}\nscratch: ${scratch}`)

  const workspaces = new Map<string, Workspace>()
  const outcomes: RunOutcome[] = []
  try {
    for (const s of toRun) {
      const ws = s.resumeOf ? workspaces.get(s.resumeOf) : makeWorkspace(scratch, s.name)
      if (!ws) throw new Error(`${s.name}: base scenario ${s.resumeOf} did not run`)
      workspaces.set(s.name, ws)
      const o = await runScenario(s, bin, ws)
      outcomes.push(o)
      if (wanted.includes(s)) writeTranscript(outDir, o)
      const seq = formatSequence(sequenceTokens(o.cli.log))
      console.log(
        `${o.ok ? 'ok  ' : 'FAIL'} ${s.name.padEnd(30)} exit=${o.exit?.code ?? o.exit?.signal} init=${o.initMs ?? '-'}ms result=${o.resultMs ?? '-'}ms total=${o.totalMs}ms${wanted.includes(s) ? '' : ' (dependency, not written)'}`
      )
      console.log(`     ${seq}`)
      for (const e of o.errors) console.log(`     ! ${e.split('\n').join('\n       ')}`)
    }
  } finally {
    if (!args.keep) rmSync(scratch, { recursive: true, force: true })
  }
  writeIndex(outDir, version)
  console.log(`wrote ${path.join(outDir, 'INDEX.md')}`)
  if (outcomes.some((o) => !o.ok)) process.exitCode = 1
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.stack : err)
  process.exitCode = 1
})
