/**
 * claude-remote's argv: the forms Agent SDK 0.3.332 passes (captured from its
 * ProcessTransport: `--flag=value`, `--mcp-config <json>` as two arguments)
 * map to gateway session options; flags without a mapping are refused.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { UsageError, parseRemoteArgs, splitRules } from '../../src/remote/argv.js'
import { withoutSeq } from '../../src/remote/frames.js'

const BASE = ['--output-format', 'stream-json', '--verbose', '--input-format', 'stream-json']

test('the SDK\'s argv maps to session options, initialize fields and a thinking-tokens request', () => {
  const args = parseRemoteArgs([...BASE, '--max-thinking-tokens=100', '--max-turns=3', '--model=claude-x', '--permission-prompt-tool=stdio',
    '--allowedTools=Read,Bash(git log:*)', '--disallowedTools=Bash', '--permission-mode=acceptEdits', '--include-partial-messages',
    '--json-schema={"type":"object"}', '--setting-sources=user,project,local', '--system-prompt', 'You are terse'])
  assert.deepEqual(args.options, { max_turns: 3, model: 'claude-x', allowed_tools: ['Read', 'Bash(git log:*)'], disallowed_tools: ['Bash'], permission_mode: 'acceptEdits', include_partial_messages: true, json_schema: { type: 'object' }, permission_prompt_tool: 'stdio' })
  assert.deepEqual(args.initFields, { jsonSchema: { type: 'object' }, systemPrompt: ['You are terse'] })
  assert.equal(args.maxThinkingTokens, 100)
  assert.equal(args.promptTool, true)
  assert.equal(parseRemoteArgs([...BASE, '--resume=abc-123']).resume, 'abc-123')
  assert.equal(parseRemoteArgs([...BASE, '--permission-prompt-tool', 'stdio']).promptTool, true)
  // Without the flag (an SDK host without canUseTool) the gateway's CLI gets none either, and denies what needs a prompt.
  assert.equal(parseRemoteArgs(BASE).options.permission_prompt_tool, 'none')
})

test('flags without a gateway mapping, and unknown ones, are refused by name', () => {
  for (const [extra, name] of [
    [['--continue'], '--continue'], [['--fork-session'], '--fork-session'], [['--session-id=x'], '--session-id'],
    [['--mcp-config', '{"mcpServers":{}}'], '--mcp-config'], [['--setting-sources='], '--setting-sources'],
    [['--thinking=adaptive'], '--thinking'], [['--add-dir=/tmp'], '--add-dir'], [['--permission-prompt-tool=mcp__x__y'], '--permission-prompt-tool'],
    [['--no-such-flag'], '--no-such-flag'], [['a prompt'], 'unexpected argument']
  ] as Array<[string[], string]>) {
    assert.throws(() => parseRemoteArgs([...BASE, ...extra]), (err: unknown) => err instanceof UsageError && err.message.includes(name), extra.join(' '))
  }
  assert.throws(() => parseRemoteArgs(['--verbose']), /--output-format is required/)
})

test('rule lists split on commas outside parentheses', () => {
  assert.deepEqual(splitRules('Read,Bash(git log:*, x),Write Edit'), ['Read', 'Bash(git log:*, x)', 'Write', 'Edit'])
})

test('seq comes off without re-serialising the CLI\'s line', () => {
  const cli = '{"type":"assistant","message":{"content":[{"type":"text","text":"a\\u2028b  é"}]}}'
  const framed = '{"seq":12,' + cli.slice(1)
  assert.equal(withoutSeq(framed, JSON.parse(framed)), cli)
  assert.equal(withoutSeq('{"seq":3}', { seq: 3 }), '{}')
  assert.equal(withoutSeq('{"type":"x","seq":4}', { type: 'x', seq: 4 }), '{"type":"x"}')
  assert.equal(withoutSeq(cli, JSON.parse(cli)), cli)
})
