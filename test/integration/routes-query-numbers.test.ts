/**
 * Numbers in queries and Last-Event-ID are plain decimal digits. Number()
 * reads `0x10` as 16, `1e1` as 10 and an empty value as 0: `?after=` on a
 * WebSocket replayed the whole history (hello `resume: "ok"` from seq 0)
 * where the client named no resume point. Each is a 400 bad_request naming
 * the field, before any session is read.
 */
import assert from 'node:assert/strict'
import { before, describe, it } from 'node:test'
import { type TestGateway, TOKEN_A, gateway, suiteScope } from '../support/gateway.js'
import { raw, upgrade } from '../support/http.js'
import { SseReader } from '../support/sse-reader.js'

describe('numbers in queries', () => {
  let gw: TestGateway
  let id: string
  const auth = { authorization: `Bearer ${TOKEN_A}` }
  const scope = suiteScope()
  before(async () => {
    gw = await gateway(scope)
    id = (await gw.createSession()).id
    await gw.createSession()
  })

  function assertRefused (res: { status: number, body: any }, field: string, what: string): void {
    assert.equal(res.status, 400, `${what}: ${res.status} ${JSON.stringify(res.body)?.slice(0, 200)}`)
    assert.equal(res.body.code, 'bad_request', what)
    assert.ok(res.body.message.startsWith(`${field}: `) || res.body.message.startsWith(`${field[0]?.toUpperCase()}`), `${what}: ${res.body.message as string}`)
  }

  it('REST: limit and after refuse hex, exponent and empty values', async () => {
    for (const [path, field] of [
      ['/v1/sessions?limit=0x2', 'limit'],
      ['/v1/sessions?limit=1e1', 'limit'],
      [`/v1/sessions/${id}/events?after=0x2`, 'after'],
      [`/v1/sessions/${id}/events?limit=1e1`, 'limit'],
      [`/v1/sessions/${id}/events?after=`, 'after']
    ] as const) {
      assertRefused(await raw(gw, 'GET', path, auth), field, path)
    }
    // Plain digits still work.
    const page = await raw(gw, 'GET', `/v1/sessions/${id}/events?after=1&limit=2`, auth)
    assert.equal(page.status, 200)
    assert.ok(page.body.events.every((e: any) => e.seq > 1))
    assert.equal((await raw(gw, 'GET', '/v1/sessions?limit=2', auth)).body.sessions.length, 2)
  })

  it('event streams: ?after=0x1 and Last-Event-ID 0x2 are refused', async () => {
    for (const [query, headers, field] of [['?after=0x1', {}, 'after'], ['', { 'last-event-id': '0x2' }, 'Last-Event-ID']] as const) {
      // Opened as a stream: accepted, it would never end.
      const stream = await SseReader.open(`${gw.url}/v1/sessions/${id}/events/stream${query}`, headers)
      stream.close()
      assert.equal(stream.status, 400, `${query} ${JSON.stringify(headers)}: ${stream.status}`)
      assertRefused(await raw(gw, 'GET', `/v1/sessions/${id}/events/stream${query}`, { ...auth, ...headers }), field, `${query} ${JSON.stringify(headers)}`)
    }
  })

  it('WebSocket: ?after= (empty) and ?after=0x1 are refused before the upgrade', async () => {
    for (const query of ['after=', 'after=0x1', 'after=1e0']) {
      assertRefused(await upgrade(gw, `/v1/sessions/${id}/ws?${query}`, auth), 'after', query)
    }
    // Plain digits resume.
    const client = await gw.connect(id, 'after=0')
    const hello = await client.waitFor((f) => f.subtype === 'hello')
    assert.equal(hello.resume, 'ok')
    client.terminate()
  })
})
