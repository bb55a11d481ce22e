/**
 * Lines the host writes while claude-remote has no connection wait for the
 * next one. If stdin then ends with no turn running, those lines are still
 * the host's: the CLI reads every line before its EOF and answers each
 * control request before it exits, and an SDK waiting on `setModel()` or
 * `setPermissionMode()` waits for that answer. The end must come after
 * them, not instead of them.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { parseRemoteArgs } from '../../src/remote/argv.js'
import { RemoteBridge } from '../../src/remote/bridge.js'
import { GatewayApi } from '../../src/remote/gateway-api.js'
import { readRemoteEnv } from '../../src/remote/remote-env.js'
import { TOKEN_A, gateway } from '../support/gateway.js'
import { SDK_ARGS, WAIT_MS, sdkInitialize, startGate, userLine } from '../support/remote.js'
import { Waiters, within } from '../support/waiters.js'

test('stdin EOF while disconnected, no turn running: the control requests written meanwhile reach the CLI and are answered before the end, exit 0', async (t) => {
  const gw = await gateway(t)
  const gate = await startGate(gw.url)
  t.after(() => gate.close())
  const env = readRemoteEnv({ CLAUDE_REMOTE_URL: gate.url, CLAUDE_REMOTE_TOKEN: TOKEN_A })
  const lines: string[] = []
  const debug: string[] = []
  const arrivals = new Waiters()
  const bridge = new RemoteBridge({
    api: new GatewayApi(env),
    env,
    args: parseRemoteArgs(SDK_ARGS),
    io: { writeOut: (line) => { lines.push(line); arrivals.wake() }, warn: (m) => { debug.push(m); arrivals.wake() }, debug: (m) => { debug.push(m); arrivals.wake() } },
    random: () => 1
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
  bridge.hostLine(JSON.stringify({ type: 'control_request', request_id: 'model-1', request: { subtype: 'set_model', model: 'claude-later' } }))
  bridge.hostLine(JSON.stringify({ type: 'control_request', request_id: 'mode-1', request: { subtype: 'set_permission_mode', mode: 'plan' } }))
  bridge.hostEnd()
  gate.release()

  assert.equal(await within(done, WAIT_MS, 'the end'), 0, lastSeen())
  const answers = frames().filter((f) => f.type === 'control_response' && ['model-1', 'mode-1'].includes(f.response.request_id))
  assert.deepEqual(answers.map((f) => [f.response.request_id, f.response.subtype]), [['model-1', 'success'], ['mode-1', 'success']], lastSeen())
  const atCli = gw.stdinLines(sessionId).filter((l) => l.type === 'control_request' && ['model-1', 'mode-1'].includes(l.request_id))
  assert.equal(atCli.length, 2)
})
