/**
 * What an open WebSocket keeps alive: once upgraded, the connection no longer
 * holds its upgrade request (with it Fastify's request and reply, their
 * logger, the headers and the read buffer the upgrade came in), which would
 * otherwise cost several KiB per idle client for as long as it stays open.
 * The client keeps working, a socket error still ends it, and closing it
 * still gives back the tenant's connection slot (given back by the WebSocket
 * from the upgrade on).
 */
import assert from 'node:assert/strict'
import type { IncomingMessage } from 'node:http'
import type { Socket } from 'node:net'
import { describe, it } from 'node:test'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { isHello } from '../support/frames.js'
import { eventually } from '../support/gateway.js'
import { client, gateway } from '../support/sessions.js'

setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void

/** True once `ref`'s target has been collected (a few turns: what settles after the open may still hold it briefly). */
async function collected (ref: WeakRef<object>): Promise<boolean> {
  for (let i = 0; i < 20; i++) {
    await new Promise((resolve) => setImmediate(resolve))
    gc()
    if (ref.deref() === undefined) return true
  }
  return false
}

describe('WebSocket retention', () => {
  it('an open, idle WebSocket does not keep its upgrade request; it still works and gives its tenant slot back on close', async (t) => {
    const gw = await gateway(t, { env: { MAX_CONNECTIONS_PER_TENANT: '1' } })
    const session = await gw.createSession()
    const upgrades: Array<WeakRef<IncomingMessage>> = []
    gw.app.server.on('upgrade', (req: IncomingMessage) => { upgrades.push(new WeakRef(req)) })

    const ws = await client(gw, t, session.id, 'role=observer')
    assert.equal(upgrades.length, 1)
    assert.ok(await collected(upgrades[0] as WeakRef<IncomingMessage>), 'the upgrade request is still reachable from the open socket')

    // Still served: a bad frame is answered, not ignored.
    ws.send('{not json')
    await ws.waitFor((f) => f.type === 'gateway' && f.subtype === 'error')

    // A protocol error (an unmasked frame from a client) still ends the connection.
    const wsSocket = (ws.ws as unknown as { _socket: Socket })._socket
    wsSocket.write(Buffer.from([0x81, 0x02, 0x68, 0x69]))
    await ws.until(() => ws.closeCode !== null || undefined, 5000, 'the gateway closes on a protocol error')
    assert.equal(ws.closeCode, 1002)

    // Its slot (MAX_CONNECTIONS_PER_TENANT=1) is free again.
    const next = await eventually(async () => {
      try {
        return await gw.connect(session.id, 'role=observer')
      } catch {
        return undefined
      }
    }, 5000, 'a new WebSocket once the first closed')
    t.after(() => next.terminate())
    await next.waitFor(isHello)
  })
})
