/**
 * `GET /v1/sessions/:id/events`: paging through a session's recorded frames
 * (after / limit / has_more / next_after), validation, tenant isolation, and
 * that history is byte-for-byte what a live client was sent.
 */
import assert from 'node:assert/strict'
import { before, describe, it } from 'node:test'
import { type TestClient, type TestGateway, TOKEN_B, gateway, suiteScope } from '../support/gateway.js'
import { readHistory, turn } from './resume-helpers.js'

describe('GET /v1/sessions/:id/events', () => {
  const scope = suiteScope()
  let gw: TestGateway
  let sessionId: string
  let live: TestClient
  let last: number

  before(async () => {
    gw = await gateway(scope)
    sessionId = (await gw.createSession()).id
    // after=0: this client gets everything from seq 1, including what came before it connected.
    live = await gw.connect(sessionId, 'after=0')
    last = await turn(gw, sessionId, live, 'burst 250')
    assert.ok(last > 250, `last seq ${last}`)
  })

  it('pages with after and limit; has_more and next_after lead to the next page', async () => {
    const first = await gw.request('GET', `/v1/sessions/${sessionId}/events?limit=100`)
    assert.equal(first.status, 200)
    assert.deepEqual(first.body.events.map((e: any) => e.seq), range(1, 100))
    assert.equal(first.body.has_more, true)
    assert.equal(first.body.next_after, 100)

    const second = await gw.request('GET', `/v1/sessions/${sessionId}/events?after=100&limit=100`)
    assert.deepEqual(second.body.events.map((e: any) => e.seq), range(101, 200))
    assert.equal(second.body.has_more, true)
    assert.equal(second.body.next_after, 200)

    const third = await gw.request('GET', `/v1/sessions/${sessionId}/events?after=200&limit=100`)
    assert.deepEqual(third.body.events.map((e: any) => e.seq), range(201, Math.min(300, last)))
    assert.equal(third.body.has_more, last > 300)

    // Exactly a page left: the page is full, but nothing comes after it.
    const tail = await gw.request('GET', `/v1/sessions/${sessionId}/events?after=${last - 10}&limit=10`)
    assert.deepEqual(tail.body.events.map((e: any) => e.seq), range(last - 9, last))
    assert.equal(tail.body.has_more, false)
    assert.equal(tail.body.next_after, last)

    const odd = await gw.request('GET', `/v1/sessions/${sessionId}/events?after=37&limit=7`)
    assert.deepEqual(odd.body.events.map((e: any) => e.seq), range(38, 44))
    assert.equal(odd.body.next_after, 44)
  })

  it('defaults to after=0 and limit=100, and allows limit=1000', async () => {
    const res = await gw.request('GET', `/v1/sessions/${sessionId}/events`)
    assert.equal(res.status, 200)
    assert.deepEqual(res.body.events.map((e: any) => e.seq), range(1, 100))
    assert.equal(res.body.has_more, true)

    const all = await gw.request('GET', `/v1/sessions/${sessionId}/events?limit=1000`)
    assert.deepEqual(all.body.events.map((e: any) => e.seq), range(1, last))
    assert.equal(all.body.has_more, false)
    assert.equal(all.body.next_after, last)
  })

  it('answers an empty page past the end', async () => {
    for (const from of [last, last + 1000]) {
      const res = await gw.request('GET', `/v1/sessions/${sessionId}/events?after=${from}`)
      assert.equal(res.status, 200)
      assert.deepEqual(res.body, { events: [], has_more: false, next_after: null })
    }
  })

  it('serves exactly the frames a live client received, as JSON', async () => {
    const res = await fetch(`${gw.url}/v1/sessions/${sessionId}/events?limit=1000`, { headers: { authorization: `Bearer ${'token-tenant-a-0123456789'}` } })
    assert.equal(res.status, 200)
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/)
    const body = JSON.parse(await res.text())
    assert.deepEqual(Object.keys(body), ['events', 'has_more', 'next_after'])
    assert.deepEqual(body.events, live.seqFrames)
    assert.ok(body.events.some((e: any) => e.type === 'assistant'))
    assert.ok(body.events.some((e: any) => e.type === 'gateway' && e.subtype === 'status'))

    // Paging in small steps gives the same sequence.
    assert.deepEqual(await readHistory(gw, sessionId, 33), live.seqFrames)
  })

  it('rejects invalid after and limit with 400', async () => {
    for (const query of ['limit=0', 'limit=1001', 'limit=-1', 'limit=abc', 'limit=1.5', 'after=-1', 'after=x', 'after=2.5', 'foo=1']) {
      const res = await gw.request('GET', `/v1/sessions/${sessionId}/events?${query}`)
      assert.equal(res.status, 400, `${query}: ${JSON.stringify(res.body)}`)
      assert.equal(res.body.code, 'bad_request', query)
    }
    const max = await gw.request('GET', `/v1/sessions/${sessionId}/events?limit=1`)
    assert.equal(max.status, 200)
    assert.equal(max.body.events.length, 1)
  })

  it('answers 404 for another tenant\'s session, an unknown id, and 401 without a token', async () => {
    const other = await gw.request('GET', `/v1/sessions/${sessionId}/events`, undefined, TOKEN_B)
    assert.equal(other.status, 404)
    assert.equal(other.body.code, 'session_not_found')
    const otherStream = await fetch(`${gw.url}/v1/sessions/${sessionId}/events/stream`, { headers: { authorization: `Bearer ${TOKEN_B}` } })
    assert.equal(otherStream.status, 404)
    assert.equal((await otherStream.json() as any).code, 'session_not_found')

    const unknown = await gw.request('GET', '/v1/sessions/00000000-0000-4000-8000-000000000000/events')
    assert.equal(unknown.status, 404)
    const notAnId = await gw.request('GET', '/v1/sessions/nope/events')
    assert.equal(notAnId.status, 404)

    const anonymous = await fetch(`${gw.url}/v1/sessions/${sessionId}/events`)
    assert.equal(anonymous.status, 401)
  })
})

function range (from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i)
}
