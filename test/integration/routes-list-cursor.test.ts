/**
 * GET /v1/sessions pages with `cursor`: every session exactly once across
 * pages, and a cursor the listing did not hand to this caller (junk such as
 * the text `null` a client builds from a null next_cursor, or another
 * tenant's) is a 400 bad_request, not silently the first page again (a
 * client following next_cursor would then loop forever).
 */
import assert from 'node:assert/strict'
import { before, describe, it } from 'node:test'
import { TOKEN_A, TOKEN_B, type TestGateway, gateway, suiteScope } from '../support/gateway.js'

describe('GET /v1/sessions cursor', () => {
  let gw: TestGateway
  const scope = suiteScope()
  const mine: string[] = []
  before(async () => {
    gw = await gateway(scope)
    for (let i = 0; i < 3; i++) mine.push((await gw.createSession()).id)
    for (let i = 0; i < 2; i++) await gw.createSession({}, TOKEN_B)
  })

  it('walks every session of the caller exactly once, newest first, one per page', async () => {
    const seen: string[] = []
    let cursor: string | null = null
    do {
      const res = await gw.request('GET', `/v1/sessions?limit=1${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`)
      assert.equal(res.status, 200, JSON.stringify(res.body))
      seen.push(...res.body.sessions.map((s: any) => s.id))
      cursor = res.body.next_cursor
    } while (cursor !== null && seen.length < 10)
    assert.deepEqual(seen, [...mine].reverse())
  })

  it('refuses a cursor that is not one (cursor=null, junk) with 400 bad_request naming cursor', async () => {
    for (const junk of ['null', 'abc', 'undefined', '%20']) {
      const res = await gw.request('GET', `/v1/sessions?limit=1&cursor=${junk}`)
      assert.equal(res.status, 400, `cursor=${junk}: ${res.status} ${JSON.stringify(res.body).slice(0, 200)}`)
      assert.equal(res.body.code, 'bad_request')
      assert.match(res.body.message, /^cursor: /)
    }
  })

  it('refuses another tenant\'s cursor with 400 bad_request', async () => {
    const theirs = await gw.request('GET', '/v1/sessions?limit=1', undefined, TOKEN_B)
    assert.equal(typeof theirs.body.next_cursor, 'string')
    const res = await gw.request('GET', `/v1/sessions?limit=1&cursor=${encodeURIComponent(theirs.body.next_cursor as string)}`, undefined, TOKEN_A)
    assert.equal(res.status, 400, `${res.status} ${JSON.stringify(res.body).slice(0, 200)}`)
    assert.equal(res.body.code, 'bad_request')
    // Theirs still works for them.
    const again = await gw.request('GET', `/v1/sessions?limit=1&cursor=${encodeURIComponent(theirs.body.next_cursor as string)}`, undefined, TOKEN_B)
    assert.equal(again.status, 200)
    assert.equal(again.body.sessions.length, 1)
  })
})
