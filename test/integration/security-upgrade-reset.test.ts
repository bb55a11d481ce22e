/**
 * A client that sends a WebSocket upgrade and resets its socket at once (RST
 * before the gateway handles the request: `request.ip` is then undefined)
 * is handled like any other gone client: no 500 and no error in the
 * operator's log for each one (before, the per-address upgrade limit's key,
 * `normalizeIP(request.ip)`, threw a TypeError: "request failed" at level
 * error with its stack, an answer 500), and the address it came from still
 * upgrades afterwards.
 */
import assert from 'node:assert/strict'
import { connect } from 'node:net'
import { it } from 'node:test'
import pino from 'pino'
import { TOKEN_A, gateway } from '../support/gateway.js'
import { upgrade } from '../support/http.js'
import { Waiters } from '../support/waiters.js'

const RESETS = 10

/** Sends an upgrade request for `path` and resets the connection once the bytes are with the kernel. */
function upgradeThenReset (port: number, path: string): Promise<void> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write([
        `GET ${path} HTTP/1.1`, `Host: 127.0.0.1:${port}`, 'Connection: Upgrade', 'Upgrade: websocket',
        'Sec-WebSocket-Version: 13', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', `Authorization: Bearer ${TOKEN_A}`, '', ''
      ].join('\r\n'), () => { socket.resetAndDestroy(); resolve() })
    })
    socket.on('error', () => {}) // its own reset
  })
}

it('an upgrade whose socket was reset before it is handled is no 500 and no error log', async (t) => {
  const logs: Array<{ level: number, msg: string, res?: { statusCode: number }, err?: { message: string } }> = []
  const arrived = new Waiters()
  const logger = pino({ level: 'info' }, { write: (line: string) => { logs.push(JSON.parse(line)); arrived.wake() } })
  const gw = await gateway(t, { parts: { logger } })
  const port = Number(new URL(gw.url).port)
  // A session nobody has: each request then ends with an answer (404, logged "request completed")
  // once past the upgrade limits, which is what the test waits on.
  const path = '/v1/sessions/no-such-session/ws'
  for (let i = 0; i < RESETS; i++) await upgradeThenReset(port, path)
  const completed = await arrived.until(() => {
    const done = logs.filter((l) => l.msg === 'request completed')
    return done.length >= RESETS && done
  }, 10_000, `${RESETS} requests completed`, () => JSON.stringify(logs.at(-1)))
  const errors = logs.filter((l) => l.level >= 50).map((l) => `${l.msg}: ${l.err?.message ?? ''}`)
  assert.deepEqual({ statuses: [...new Set(completed.map((l) => l.res?.statusCode))], errors }, { statuses: [404], errors: [] })
  // The address is not locked out by them.
  const { id } = await gw.createSession()
  assert.equal((await upgrade(gw, `/v1/sessions/${id}/ws`, { authorization: `Bearer ${TOKEN_A}` })).status, 101)
})
