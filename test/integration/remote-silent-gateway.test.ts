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
import { startForwarder } from '../support/forwarder.js'
import { gateway } from '../support/gateway.js'
import { WAIT_MS, sdkInitialize, userLine } from '../support/remote.js'
import { startBridge } from '../support/remote-bridge.js'
import { within } from '../support/waiters.js'

test('a gateway connection that goes silent (no close) is dropped and resumed: the turn\'s lines all arrive, once', async (t) => {
  const gw = await gateway(t)
  const fwd = await startForwarder(gw.url)
  t.after(() => fwd.close())
  const { bridge, done, lines, until } = startBridge(t, fwd.url, { silence: { pingAfterMs: 200, deadAfterMs: 1_000 } })
  const results = (): number => lines.filter((l) => JSON.parse(l).type === 'result').length
  bridge.hostLine(sdkInitialize())
  bridge.hostLine(userLine('slow 8 150'))
  await until(() => lines.some((l) => JSON.parse(l).type === 'assistant'), 'the first assistant line')

  assert.equal(fwd.freeze(), 1, 'one WebSocket through the forwarder')
  await until(() => results() === 1, 'the turn\'s result over a new connection')

  const texts = lines.map((l) => JSON.parse(l)).filter((f) => f.type === 'assistant').map((f) => JSON.stringify(f.message.content))
  assert.equal(new Set(texts).size, texts.length, 'no assistant line twice')
  assert.equal(texts.length, 8)
  bridge.hostEnd()
  assert.equal(await within(done, WAIT_MS, 'the end'), 0)
})
