/**
 * A gateway whose WebSocket never comes back (the REST calls still pass: a
 * proxy that drops upgrades, a gateway refusing them) must neither keep
 * claude-remote waiting for ever nor be left running a CLI nobody will end:
 * control requests the host wrote meanwhile and is waiting on at stdin EOF
 * get an error answer within a bound (a host that sends no SIGTERM, a
 * script, would otherwise wait for ever), and when claude-remote gives the
 * gateway up it stops the session as any other end does. The bridge runs
 * in-process (its bounds passed in, short) against a real gateway behind a
 * gate that keeps WebSocket upgrades waiting.
 */
import assert from 'node:assert/strict'
import { type TestContext, test } from 'node:test'
import { parseRemoteArgs } from '../../src/remote/argv.js'
import { RemoteBridge } from '../../src/remote/bridge.js'
import { GatewayApi } from '../../src/remote/gateway-api.js'
import { readRemoteEnv } from '../../src/remote/remote-env.js'
import { TOKEN_A, type TestGateway, eventually, gateway } from '../support/gateway.js'
import { SDK_ARGS, WAIT_MS, sdkInitialize, startGate, userLine } from '../support/remote.js'
import { Waiters, within } from '../support/waiters.js'

/** A bridge through a gate that has run one turn; its WebSocket then held for good. */
async function cutOffAfterOneTurn (t: TestContext, bounds: { requestsAtEndMs?: number, giveUpMs?: number, silence?: { pingAfterMs: number, deadAfterMs: number } }): Promise<{ gw: TestGateway, bridge: RemoteBridge, done: Promise<number>, frames: () => any[], stderr: () => string[], lastSeen: () => string, sessionId: string }> {
  const gw = await gateway(t)
  const gate = await startGate(gw.url)
  t.after(() => gate.close())
  const env = readRemoteEnv({ CLAUDE_REMOTE_URL: gate.url, CLAUDE_REMOTE_TOKEN: TOKEN_A })
  const lines: string[] = []
  const debug: string[] = []
  const warned: string[] = []
  const arrivals = new Waiters()
  const bridge = new RemoteBridge({
    api: new GatewayApi(env),
    env,
    args: parseRemoteArgs(SDK_ARGS),
    io: { writeOut: (line) => { lines.push(line); arrivals.wake() }, warn: (m) => { warned.push(m); debug.push(m); arrivals.wake() }, debug: (m) => { debug.push(m); arrivals.wake() } },
    random: () => 1,
    ...bounds
  })
  const done = bridge.run()
  t.after(() => bridge.terminate(143))
  const lastSeen = (): string => `${lines.length} lines; ${debug.slice(-5).join(' | ')}`
  const frames = (): any[] => lines.map((l) => JSON.parse(l))
  bridge.hostLine(sdkInitialize())
  bridge.hostLine(userLine('echo first'))
  await arrivals.until(() => frames().some((f) => f.type === 'result'), WAIT_MS, 'the first turn\'s result', lastSeen)
  const sessionId = String(frames().find((f) => f.type === 'result').session_id)
  assert.equal(gate.holdWebSockets(), 1)
  await arrivals.until(() => debug.some((m) => /connection closed/.test(m)), WAIT_MS, 'the connection closed', lastSeen)
  return { gw, bridge, done, frames, stderr: () => warned, lastSeen, sessionId }
}

async function stopped (gw: TestGateway, sessionId: string): Promise<void> {
  await eventually(async () => (await gw.request('GET', `/v1/sessions/${sessionId}`)).body.status === 'stopped', WAIT_MS, 'the session stopped')
}

test('stdin EOF with control requests queued and the gateway never reachable again: each gets an error answer within the bound, the session is stopped, exit 1', async (t) => {
  const { gw, bridge, done, frames, lastSeen, sessionId } = await cutOffAfterOneTurn(t, { requestsAtEndMs: 1_000 })
  bridge.hostLine(JSON.stringify({ type: 'control_request', request_id: 'model-1', request: { subtype: 'set_model', model: 'claude-later' } }))
  bridge.hostEnd()

  assert.equal(await within(done, WAIT_MS, 'the end'), 1, lastSeen())
  const answers = frames().filter((f) => f.type === 'control_response' && f.response.request_id === 'model-1')
  assert.equal(answers.length, 1, lastSeen())
  assert.equal(answers[0].response.subtype, 'error')
  assert.equal(answers[0].response.error_code, 'request_timeout')
  // Never reached the CLI, and the CLI was stopped rather than left running.
  assert.equal(gw.stdinLines(sessionId).some((l) => l.request_id === 'model-1'), false)
  await stopped(gw, sessionId)
})

test('the gateway\'s WebSocket gone for longer than the give-up bound: claude-remote says so, stops the session (not left running), exit 1', async (t) => {
  const { gw, done, stderr, lastSeen, sessionId } = await cutOffAfterOneTurn(t, { giveUpMs: 1_500, silence: { pingAfterMs: 200, deadAfterMs: 500 } })
  assert.equal(await within(done, WAIT_MS, 'the give-up'), 1, lastSeen())
  assert.ok(stderr().some((m) => /giving up/.test(m)), lastSeen())
  await stopped(gw, sessionId)
})
