/**
 * One gateway restart cuts off every claude-remote at once; if each waits
 * the same backoff they all come back in the same instant (and again after
 * each doubling). The wait is drawn from an injected random source, so the
 * spread is checked exactly, without measuring time: bridges with different
 * draws must wait different delays, each within its backoff step.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { parseRemoteArgs } from '../../src/remote/argv.js'
import { RemoteBridge } from '../../src/remote/bridge.js'
import { GatewayApi } from '../../src/remote/gateway-api.js'
import { readRemoteEnv } from '../../src/remote/remote-env.js'
import { TOKEN_A, gateway } from '../support/gateway.js'
import { SDK_ARGS, WAIT_MS, sdkInitialize } from '../support/remote.js'
import { Waiters, within } from '../support/waiters.js'

const DRAWS = [0, 0.5, 0.9]

test('claude-remotes cut off together reconnect after different (jittered) delays, each within its backoff step', async (t) => {
  const gw = await gateway(t)
  const env = readRemoteEnv({ CLAUDE_REMOTE_URL: gw.url, CLAUDE_REMOTE_TOKEN: TOKEN_A })
  const arrivals = new Waiters()
  const bridges = DRAWS.map((draw) => {
    const debug: string[] = []
    const bridge = new RemoteBridge({
      api: new GatewayApi(env),
      env,
      args: parseRemoteArgs(SDK_ARGS),
      io: { writeOut: () => { arrivals.wake() }, warn: (m) => { debug.push(m); arrivals.wake() }, debug: (m) => { debug.push(m); arrivals.wake() } },
      random: () => draw
    })
    const done = bridge.run()
    t.after(() => bridge.terminate(143))
    bridge.hostLine(sdkInitialize())
    return { bridge, debug, done }
  })
  const lastSeen = (): string => bridges.map((b) => b.debug.slice(-3).join(' | ')).join(' || ')
  const count = (debug: string[], prefix: string): number => debug.filter((m) => m.startsWith(prefix)).length
  const delays = (debug: string[]): number[] => debug.flatMap((m) => /^reconnecting in (\d+) ms/.exec(m)?.[1] ?? []).map(Number)

  for (let round = 1; round <= 2; round++) {
    await arrivals.until(() => bridges.every((b) => count(b.debug, 'attached') === round), WAIT_MS, `every bridge attached (${round})`, lastSeen)
    // A gateway restart, as the clients see it: every connection gone at once.
    for (const ws of gw.app.websocketServer.clients) ws.terminate()
    await arrivals.until(() => bridges.every((b) => delays(b.debug).length === round), WAIT_MS, `every bridge's reconnect delay (${round})`, lastSeen)
  }
  const waits = bridges.map((b) => delays(b.debug))
  // Each cut is a first retry (the hello in between started the steps again): its step is 100 ms.
  for (const round of [0, 1]) {
    assert.equal(new Set(waits.map((w) => w[round])).size, DRAWS.length, `reconnect delays differ: ${JSON.stringify(waits)}`)
  }
  // Full jitter: a draw r waits (1 − r) of the step.
  assert.deepEqual(waits, DRAWS.map((r) => [Math.round(100 * (1 - r)), Math.round(100 * (1 - r))]))
  await arrivals.until(() => bridges.every((b) => count(b.debug, 'attached') === 3), WAIT_MS, 'every bridge attached again', lastSeen)
  for (const b of bridges) {
    b.bridge.hostEnd()
    assert.equal(await within(b.done, WAIT_MS, 'the end'), 0)
  }
})
