/**
 * A gateway that goes silent without closing the connection (its host
 * powered off, a NAT or proxy that dropped the flow: no FIN, no RST) must
 * not leave claude-remote waiting for ever: it notices the silence, drops
 * that socket and resumes by seq on a new one. The bridge runs in-process
 * (its silence bounds passed in, short) against a real gateway through a
 * TCP forwarder that can freeze its open connections.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { parseRemoteArgs } from '../../src/remote/argv.js'
import { RemoteBridge } from '../../src/remote/bridge.js'
import { GatewayApi } from '../../src/remote/gateway-api.js'
import { readRemoteEnv } from '../../src/remote/remote-env.js'
import { startForwarder } from '../support/forwarder.js'
import { TOKEN_A, gateway } from '../support/gateway.js'
import { SDK_ARGS, WAIT_MS, sdkInitialize, userLine } from '../support/remote.js'
import { Waiters, within } from '../support/waiters.js'

test('a gateway connection that goes silent (no close) is dropped and resumed: the turn\'s lines all arrive, once', async (t) => {
  const gw = await gateway(t)
  const fwd = await startForwarder(gw.url)
  t.after(() => fwd.close())
  const env = readRemoteEnv({ CLAUDE_REMOTE_URL: fwd.url, CLAUDE_REMOTE_TOKEN: TOKEN_A })
  const lines: string[] = []
  const debug: string[] = []
  const arrivals = new Waiters()
  const bridge = new RemoteBridge({
    api: new GatewayApi(env),
    env,
    args: parseRemoteArgs(SDK_ARGS),
    io: { writeOut: (line) => { lines.push(line); arrivals.wake() }, warn: (m) => { debug.push(m); arrivals.wake() }, debug: (m) => { debug.push(m); arrivals.wake() } },
    silence: { pingAfterMs: 200, deadAfterMs: 1_000 }
  })
  const done = bridge.run()
  t.after(() => bridge.terminate(143))
  const lastSeen = (): string => `${lines.length} lines; ${debug.slice(-5).join(' | ')}`
  const results = (): number => lines.filter((l) => JSON.parse(l).type === 'result').length
  bridge.hostLine(sdkInitialize())
  bridge.hostLine(userLine('slow 8 150'))
  await arrivals.until(() => lines.some((l) => JSON.parse(l).type === 'assistant'), WAIT_MS, 'the first assistant line', lastSeen)

  assert.equal(fwd.freeze(), 1, 'one WebSocket through the forwarder')
  await arrivals.until(() => results() === 1, WAIT_MS, 'the turn\'s result over a new connection', lastSeen)

  const texts = lines.map((l) => JSON.parse(l)).filter((f) => f.type === 'assistant').map((f) => JSON.stringify(f.message.content))
  assert.equal(new Set(texts).size, texts.length, 'no assistant line twice')
  assert.equal(texts.length, 8)
  bridge.hostEnd()
  assert.equal(await within(done, WAIT_MS, 'the end'), 0)
})
