// Conformance of the real Agent SDK, continued: control requests on a live
// query (setModel, setPermissionMode, supportedCommands, mcpServerStatus),
// `resume`, and a connection dropped mid-turn (remote only: the direct run
// is the reference). Same scheme as sdk-conformance.test.ts.
import assert from 'node:assert/strict'
import { after } from 'node:test'
import { createSdkMcpServer, tool } from '@anthropic-ai/claude-agent-sdk'
import { z } from 'zod'
import { WAIT_MS } from '../support/e2e.js'
import { type Deferred, allUserTexts, deferred, lastUserText, longTextReply } from '../support/mock-anthropic.js'
import { conformanceCase } from '../support/sdk-cases.js'
import { within } from '../support/waiters.js'
import { type Mode, SdkWorld, allowAll, isInit } from '../support/sdk-harness.js'

const world = new SdkWorld()
after(() => world.close())

const HOLD_PROMPT = 'HOLD_STREAM_FOR_A_DROP'
const HELD_LINES = 12
/** The hold of the current HOLD_PROMPT turn: the stand-in pauses after its first text delta. */
let hold: Deferred<void> = deferred()
const mockReady = world.mock().then((mock) => {
  mock.setHandler((body, ctx) => lastUserText(body) === HOLD_PROMPT
    ? { ...longTextReply(HELD_LINES, 'Held line'), hold: hold.promise }
    : ctx.fallback(body))
  return mock
})

conformanceCase(world, 'setModel, setPermissionMode, supportedCommands and mcpServerStatus resolve', async (mode: Mode) => {
  const mock = await mockReady
  const server = createSdkMcpServer({
    name: 'conf',
    version: '1.0.0',
    tools: [tool('noop', 'Does nothing', { x: z.string() }, async () => ({ content: [{ type: 'text', text: 'ok' }] }))]
  })
  const run = await world.start(mode, { canUseTool: allowAll, mcpServers: { conf: server } })
  const commands = await within(run.q.supportedCommands(), WAIT_MS, 'supportedCommands()')
  assert.ok(Array.isArray(commands) && commands.length > 0, `slash commands: ${JSON.stringify(commands)}`)
  const status = await within(run.q.mcpServerStatus(), WAIT_MS, 'mcpServerStatus()')
  assert.deepEqual(status.map((s) => [s.name, s.status]), [['conf', 'connected']])
  await within(run.q.setPermissionMode('acceptEdits'), WAIT_MS, 'setPermissionMode()')
  await within(run.q.setModel('claude-conformance-model-1'), WAIT_MS, 'setModel()')
  const mark = mock.requests.length
  run.send('Which model answers?')
  await run.result()
  await run.finish({ ok: true })
  const init = run.messages.find(isInit) as { model?: string, permissionMode?: string }
  assert.equal(init.permissionMode, 'acceptEdits', 'the new permission mode holds for the turn')
  const turn = mock.requests.slice(mark).find((r) => r.stream && lastUserText(r.body).endsWith('Which model answers?'))
  assert.equal((turn?.body as { model?: string } | undefined)?.model, 'claude-conformance-model-1', 'the turn went to the new model')
  return {
    runs: [run],
    extra: { commands: commands.map((c) => c.name).sort(), status: status.map((s) => ({ name: s.name, status: s.status })) }
  }
})

conformanceCase(world, 'resume: the earlier turns are in the next API request', async (mode: Mode) => {
  const mock = await mockReady
  const first = await world.start(mode, { canUseTool: allowAll })
  first.send('Remember the word apricot')
  await first.result()
  await first.finish({ ok: true })
  const sessionId = first.sessionId
  assert.ok(sessionId, first.describe())

  const mark = mock.requests.length
  const second = await world.start(mode, { canUseTool: allowAll, resume: sessionId })
  second.send('Which word did I ask you to remember?')
  const result = await second.result()
  await second.finish({ ok: true })
  assert.equal(result.subtype, 'success', second.describe())
  assert.equal(second.sessionId, sessionId, 'the same conversation')
  const request = mock.requests.slice(mark).find((r) => r.stream)
  const users = allUserTexts(request?.body)
  assert.ok(users.some((t) => t.includes('Remember the word apricot')), `earlier prompt in the request: ${JSON.stringify(users)}`)
  assert.ok(JSON.stringify(request?.body).includes('Echo: Remember the word apricot'), 'earlier answer in the request')
  return { runs: [first, second] }
})

conformanceCase(world, 'the connection dropped mid-turn recovers with no lost message', async (mode: Mode) => {
  const mock = await mockReady
  hold = deferred()
  const mark = mock.requests.length
  const run = await world.start(mode, { canUseTool: allowAll, includePartialMessages: true })
  run.send(HOLD_PROMPT)
  await mock.waitForRequest((r) => r.seq > mark && r.stream && lastUserText(r.body) === HOLD_PROMPT, WAIT_MS)
  // Mid-turn for the SDK too: the first streamed delta has reached query().
  await run.waitFor((m) => m.type === 'stream_event' && m.event.type === 'content_block_delta')
  if (mode === 'remote') {
    const e = await world.gateway()
    const sockets = [...e.gw.app.websocketServer.clients]
    assert.ok(sockets.length > 0, 'claude-remote holds a WebSocket to the gateway')
    const reconnected = new Promise<void>((resolve) => e.gw.app.websocketServer.once('connection', () => resolve()))
    for (const ws of sockets) ws.terminate()
    hold.resolve()
    await within(reconnected, WAIT_MS, 'claude-remote to connect again')
  } else {
    hold.resolve()
  }
  const result = await run.result()
  await run.finish({ ok: true })
  assert.equal(result.subtype, 'success', run.describe())
  const text = run.messages.flatMap((m) => m.type === 'stream_event' && m.event.type === 'content_block_delta' && m.event.delta.type === 'text_delta' ? [m.event.delta.text] : []).join('')
  const full = Array.from({ length: HELD_LINES }, (_, i) => `Held line ${i + 1} of a long streamed answer.\n`).join('')
  assert.equal(text, full, 'every streamed delta arrived, once, in order')
  return { runs: [run] }
})
