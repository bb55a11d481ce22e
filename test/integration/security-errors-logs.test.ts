/**
 * What leaks out: an internal error answers `{statusCode: 500, code:
 * 'internal', message: 'Internal error'}` with no stack, path or error text
 * (those go to the log, for the operator); and no credential (header token,
 * subprotocol token, JWT, a wrong token someone tried) ever appears in the
 * log, even at level trace.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { describe, it } from 'node:test'
import { SignJWT } from 'jose'
import pino from 'pino'
import WebSocket from 'ws'
import { MemoryStore } from '../../src/store/memory.js'
import type { SessionRecord } from '../../src/store/store.js'
import { TOKEN_A, TOKEN_B, TestClient, gateway } from '../support/gateway.js'

const STORE_UNAVAILABLE = { statusCode: 503, code: 'store_unavailable', message: 'The event store is unavailable' }
const JWT_SECRET = 'jwt-secret-for-log-test-0123456789-abcdef'

/** A pino logger at level trace writing into an array. */
function capture (): { logger: pino.Logger, text: () => string } {
  const lines: string[] = []
  const logger = pino({ level: 'trace' }, { write: (line: string) => { lines.push(line) } })
  return { logger, text: () => lines.join('') }
}

/** A store whose session lookups fail with an error full of internals. */
class ExplodingStore extends MemoryStore {
  override async getSession (id: string): Promise<SessionRecord | null> {
    throw new Error(`store exploded reading /srv/gateway/internal/${id} (password=hunter2)`)
  }
}

function refusedUpgrade (url: string, headers: Record<string, string>): Promise<{ status: number, text: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers })
    ws.on('error', reject)
    ws.once('open', () => { resolve({ status: 101, text: '' }); ws.terminate() })
    ws.once('unexpected-response', (_req, res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => { text += c })
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, text }); ws.terminate() })
    })
  })
}

describe('internal errors', () => {
  it('a failing store is answered exactly {statusCode: 503, code: store_unavailable, message}, with the details only in the log', async (t) => {
    const logs = capture()
    const store = new ExplodingStore({ retention: { maxEventsPerSession: 1000, ttlSecondsAfterEnd: 60 } })
    const gw = await gateway(t, { parts: { store, logger: logs.logger } })
    t.after(() => store.close())
    const id = randomUUID() // not loaded: every lookup goes to the store

    const auth = { authorization: `Bearer ${TOKEN_A}` }
    for (const [method, path] of [
      ['GET', `/v1/sessions/${id}`],
      ['DELETE', `/v1/sessions/${id}`],
      ['GET', `/v1/sessions/${id}/events`],
      ['GET', `/v1/sessions/${id}/events/stream`],
      ['GET', `/v1/sessions/${id}/permissions`],
      ['POST', `/v1/sessions/${id}/ws-ticket`]
    ]) {
      const res = await fetch(gw.url + path, { method, headers: auth })
      const text = await res.text()
      assert.equal(res.status, 503, `${method} ${path}`)
      assert.deepEqual(JSON.parse(text), STORE_UNAVAILABLE, `${method} ${path}`)
    }
    const up = await refusedUpgrade(`${gw.wsUrl}/v1/sessions/${id}/ws`, auth)
    assert.equal(up.status, 503)
    assert.deepEqual(JSON.parse(up.text), STORE_UNAVAILABLE)
    for (const leak of ['exploded', 'hunter2', '/srv/', 'at ', '.ts', 'stack', 'Error']) assert.ok(!up.text.includes(leak), leak)

    assert.match(logs.text(), /store exploded/, 'the operator sees the cause in the log')
    // The gateway itself is fine.
    assert.equal((await fetch(`${gw.url}/healthz`)).status, 200)
  })
})

describe('credentials in logs', () => {
  it('never logs a token: header, subprotocol, JWT, or a wrong one, at level trace', async (t) => {
    const logs = capture()
    const gw = await gateway(t, { parts: { logger: logs.logger }, env: { JWT_SECRET } })
    const jwt = await new SignJWT({ tenant: 'tenant-a' }).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('5m').sign(new TextEncoder().encode(JWT_SECRET))
    const wrong = 'wrong-token-that-someone-tried-0123456789'

    const a = await gw.createSession()
    const b = await gw.createSession({}, TOKEN_B)
    await gw.request('GET', '/v1/sessions')
    await gw.request('GET', '/v1/sessions', undefined, wrong)
    await gw.request('GET', `/v1/sessions/${a.id}`, undefined, jwt)
    await gw.request('GET', `/v1/sessions/${randomUUID()}`) // 404
    await fetch(`${gw.url}/v1/sessions`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN_A}`, 'content-type': 'application/json' }, body: '{not json' }) // 400

    const viaHeader = await TestClient.open(`${gw.wsUrl}/v1/sessions/${a.id}/ws`, { authorization: `Bearer ${TOKEN_A}` })
    t.after(() => viaHeader.terminate())
    const viaProtocol = await TestClient.open(`${gw.wsUrl}/v1/sessions/${b.id}/ws`, {}, ['claude-gateway.v1', `bearer.${TOKEN_B}`])
    t.after(() => viaProtocol.terminate())
    const viaJwtProtocol = await TestClient.open(`${gw.wsUrl}/v1/sessions/${a.id}/ws?role=observer`, {}, ['claude-gateway.v1', `bearer.${jwt}`])
    t.after(() => viaJwtProtocol.terminate())
    await assert.rejects(TestClient.open(`${gw.wsUrl}/v1/sessions/${a.id}/ws`, {}, ['claude-gateway.v1', `bearer.${wrong}`]))
    await assert.rejects(TestClient.open(`${gw.wsUrl}/v1/sessions/${a.id}/ws`, { authorization: `Bearer ${wrong}` }))

    viaHeader.sendUser('hello')
    await viaHeader.waitFor((f) => f.type === 'result')
    viaHeader.send('not json')
    await viaHeader.waitFor((f) => f.subtype === 'error')
    await gw.request('DELETE', `/v1/sessions/${b.id}`, undefined, TOKEN_B)

    const text = logs.text()
    assert.match(text, /incoming request/, 'requests were logged')
    assert.ok(text.length > 1000)
    const secrets: Array<[string, string]> = [['TOKEN_A', TOKEN_A], ['TOKEN_B', TOKEN_B], ['JWT', jwt], ['JWT signature', jwt.split('.')[2] as string], ['wrong token', wrong], ['JWT_SECRET', JWT_SECRET]]
    for (const [what, secret] of secrets) {
      assert.ok(!text.includes(secret), `${what} appears in the log`)
    }
  })
})

describe('credentials in URLs', () => {
  it('logs `?token=` and `?ticket=` values as [REDACTED], whether the credential was right, wrong or redeemed', async (t) => {
    const logs = capture()
    const gw = await gateway(t, { parts: { logger: logs.logger } })
    const id = (await gw.createSession()).id
    const wrongTicket = 'not-a-ticket-but-secret-looking-0123456789'

    // A client that wrongly sends its token in the query (refused: only headers carry tokens).
    const inQuery = await fetch(`${gw.url}/v1/sessions?token=${TOKEN_A}`)
    assert.equal(inQuery.status, 401)
    await fetch(`${gw.url}/v1/sessions?limit=5&token=${TOKEN_B}&cursor=x`, { headers: { authorization: `Bearer ${TOKEN_A}` } })

    const { ticket } = (await gw.request('POST', `/v1/sessions/${id}/ws-ticket`)).body as { ticket: string }
    const viaTicket = await TestClient.open(`${gw.wsUrl}/v1/sessions/${id}/ws?role=observer&ticket=${encodeURIComponent(ticket)}`, {})
    t.after(() => viaTicket.terminate())
    await viaTicket.waitFor((f) => f.subtype === 'hello')
    await assert.rejects(TestClient.open(`${gw.wsUrl}/v1/sessions/${id}/ws?ticket=${wrongTicket}`, {}))

    const text = logs.text()
    assert.match(text, /token=\[REDACTED\]/)
    assert.match(text, /ticket=\[REDACTED\]/)
    assert.match(text, /role=observer&ticket=\[REDACTED\]/, 'the rest of the URL is kept')
    for (const [what, secret] of [['TOKEN_A', TOKEN_A], ['TOKEN_B', TOKEN_B], ['ticket', ticket], ['wrong ticket', wrongTicket]]) {
      assert.ok(!text.includes(secret as string), `${what} appears in the log`)
    }
  })
})
