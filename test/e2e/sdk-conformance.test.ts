// Conformance of the real Agent SDK (@anthropic-ai/claude-agent-sdk, pinned
// beside the CLI): turns, permissions, hooks, SDK MCP tools, system prompt and
// structured output. Each case runs with the CLI spawned directly by the SDK,
// then through claude-remote → gateway (Redis store, real sandboxed CLI); the
// messages query() yields must be the same apart from ids, paths and timings.
import assert from 'node:assert/strict'
import { after } from 'node:test'
import { type CanUseTool, type HookInput, createSdkMcpServer, tool } from '@anthropic-ai/claude-agent-sdk'
import { z } from 'zod'
import { WAIT_MS } from '../support/e2e.js'
import { deferred, findToolResults, type RecordedRequest } from '../support/mock-anthropic.js'
import { conformanceCase } from '../support/sdk-cases.js'
import { within } from '../support/waiters.js'
import { type Mode, type SdkRun, SdkWorld, allowAll, isResult } from '../support/sdk-harness.js'

const world = new SdkWorld()
after(() => world.close())

/** Streaming Messages requests that arrive from now on. */
async function requestsFromNow (): Promise<() => RecordedRequest[]> {
  const mock = await world.mock()
  const mark = mock.requests.length
  return () => mock.requests.slice(mark).filter((r) => r.kind === 'messages' && r.stream)
}

/** One prompt, one result, stdin closed: the run's messages. */
async function oneTurn (run: SdkRun, prompt: string): Promise<SdkRun> {
  run.send(prompt)
  await run.result()
  await run.finish({ ok: true })
  return run
}

conformanceCase(world, 'a text turn', async (mode: Mode) => {
  const run = await world.start(mode, { canUseTool: allowAll })
  await oneTurn(run, 'Say hello to the conformance suite')
  const result = await run.result()
  assert.equal(result.subtype, 'success', run.describe())
  assert.equal((result as { result?: string }).result, 'Echo: Say hello to the conformance suite')
  return { runs: [run] }
})

conformanceCase(world, 'a text turn without canUseTool (no prompt tool: the CLI denies by itself)', async (mode: Mode) => {
  const run = await world.start(mode)
  await oneTurn(run, 'Say hello without a permission callback')
  assert.equal((await run.result() as { result?: string }).result, 'Echo: Say hello without a permission callback')
  return { runs: [run] }
})

conformanceCase(world, 'canUseTool allow with updatedInput: the updated command runs', async (mode: Mode) => {
  const asked: Array<{ name: string, input: Record<string, unknown> }> = []
  const canUseTool: CanUseTool = async (name, input) => {
    asked.push({ name, input })
    return { behavior: 'allow', updatedInput: { ...input, command: 'touch updated-by-sdk.txt && echo updated-ran' } }
  }
  const run = await world.start(mode, { canUseTool })
  await oneTurn(run, 'RUN_BASH touch asked-for.txt && echo asked-ran')
  assert.deepEqual(asked.map((a) => [a.name, a.input.command]), [['Bash', 'touch asked-for.txt && echo asked-ran']])
  const result = await run.result()
  assert.equal((result as { result?: string }).result, 'Tool finished: updated-ran', run.describe())
  assert.ok(await world.fileInRun(run, 'updated-by-sdk.txt'), 'the file the updated command creates exists')
  assert.equal(await world.fileInRun(run, 'asked-for.txt'), undefined, 'the original command did not run')
  return { runs: [run] }
})

conformanceCase(world, 'canUseTool deny: nothing runs, the message reaches the model', async (mode: Mode) => {
  const message = 'Denied by the SDK conformance test'
  const requests = await requestsFromNow()
  const run = await world.start(mode, { canUseTool: async () => ({ behavior: 'deny', message }) })
  await oneTurn(run, 'RUN_BASH touch denied-by-sdk.txt')
  assert.equal(await world.fileInRun(run, 'denied-by-sdk.txt'), undefined, 'the denied command did not run')
  const denied = requests().flatMap((r) => findToolResults(r.body)).find((t) => t.isError)
  assert.ok(denied?.content.includes(message), `the deny message as an error tool_result: ${JSON.stringify(denied)}`)
  return { runs: [run] }
})

conformanceCase(world, 'interrupt while canUseTool waits: its signal aborts, the turn ends', async (mode: Mode) => {
  const called = deferred<AbortSignal>()
  const aborted = deferred()
  const canUseTool: CanUseTool = (_name, _input, { signal }) => {
    called.resolve(signal)
    return new Promise((resolve) => {
      signal.addEventListener('abort', () => {
        aborted.resolve()
        resolve({ behavior: 'deny', message: 'aborted' })
      }, { once: true })
    })
  }
  const run = await world.start(mode, { canUseTool })
  run.send('RUN_BASH touch never-made.txt')
  const signal = await within(called.promise, WAIT_MS, 'canUseTool to be called')
  assert.equal(signal.aborted, false)
  await run.q.interrupt()
  await within(aborted.promise, WAIT_MS, 'the canUseTool signal to abort')
  const result = await run.result()
  assert.equal(result.subtype, 'error_during_execution', run.describe())
  await run.finish()
  // The CLI exits 1 after an error result, and query() reports it.
  assert.match(String(run.error), /error result/)
  assert.equal(await world.fileInRun(run, 'never-made.txt'), undefined)
  return { runs: [run] }
})

conformanceCase(world, 'a PreToolUse hook is called on the SDK side and its decision holds', async (mode: Mode) => {
  const hookCalls: HookInput[] = []
  const asked: string[] = []
  const run = await world.start(mode, {
    canUseTool: async (name, input) => { asked.push(name); return { behavior: 'allow', updatedInput: input } },
    hooks: {
      PreToolUse: [{
        matcher: 'Bash',
        hooks: [async (input) => {
          hookCalls.push(input)
          return { hookSpecificOutput: { hookEventName: 'PreToolUse', permissionDecision: 'allow', permissionDecisionReason: 'allowed by the conformance hook' } }
        }]
      }]
    }
  })
  await oneTurn(run, 'RUN_BASH touch hooked.txt && echo hooked-ran')
  assert.equal(hookCalls.length, 1, `hook calls: ${JSON.stringify(hookCalls)}`)
  const call = hookCalls[0] as { hook_event_name?: string, tool_name?: string, tool_input?: { command?: string } }
  assert.equal(call.hook_event_name, 'PreToolUse')
  assert.equal(call.tool_name, 'Bash')
  assert.equal(call.tool_input?.command, 'touch hooked.txt && echo hooked-ran')
  assert.deepEqual(asked, [], 'the hook allowed: canUseTool was not asked')
  assert.equal((await run.result() as { result?: string }).result, 'Tool finished: hooked-ran')
  assert.ok(await world.fileInRun(run, 'hooked.txt'))
  return { runs: [run] }
})

conformanceCase(world, 'an SDK MCP server tool (createSdkMcpServer) called by the model', async (mode: Mode) => {
  const calls: Array<{ a: number, b: number }> = []
  const server = createSdkMcpServer({
    name: 'conf',
    version: '1.0.0',
    tools: [tool('add', 'Add two numbers', { a: z.number(), b: z.number() }, async (args) => {
      calls.push(args)
      return { content: [{ type: 'text', text: `sum=${args.a + args.b}` }] }
    })]
  })
  const run = await world.start(mode, { canUseTool: allowAll, mcpServers: { conf: server }, allowedTools: ['mcp__conf__add'] })
  await oneTurn(run, 'MCP_TOOL conf add {"a":2,"b":3}')
  assert.deepEqual(calls, [{ a: 2, b: 3 }], 'the in-process tool ran once with the model\'s input')
  assert.equal((await run.result() as { result?: string }).result, 'Tool finished: sum=5', run.describe())
  return { runs: [run] }
})

conformanceCase(world, 'systemPrompt and outputFormat (jsonSchema) reach the API', async (mode: Mode) => {
  const systemPrompt = 'You are the conformance bot. MARKER-SYSTEM-PROMPT-12'
  const schema = { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'] }
  const requests = await requestsFromNow()
  const run = await world.start(mode, { canUseTool: allowAll, systemPrompt, outputFormat: { type: 'json_schema', schema } })
  await oneTurn(run, 'STRUCTURED {"answer":"forty-two"}')
  const first = requests()[0]
  assert.ok(first, 'a Messages request')
  const body = first.body as { system?: Array<{ text?: string }>, tools?: Array<{ name: string, input_schema?: unknown }> }
  const system = (body.system ?? []).map((b) => b.text ?? '')
  assert.ok(system.includes(systemPrompt), `the system prompt as a block of its own: ${JSON.stringify(system)}`)
  // The CLI's default prompt is many kilobytes; a replaced one is the billing header, one SDK line and ours.
  assert.ok(system.join('').length < 2000, `the default system prompt was replaced: ${system.join('').length} chars`)
  const structured = (body.tools ?? []).find((t) => t.name === 'StructuredOutput')
  assert.deepEqual(structured?.input_schema, schema, 'the schema reached the API as the StructuredOutput tool')
  const result = await run.result() as { subtype: string, structured_output?: unknown }
  assert.equal(result.subtype, 'success', run.describe())
  assert.deepEqual(result.structured_output, { answer: 'forty-two' })
  assert.ok(run.messages.some(isResult))
  return { runs: [run] }
})
