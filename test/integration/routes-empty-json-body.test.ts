/**
 * POST /v1/sessions and POST /v1/sessions/:id/ws-ticket take no body: an
 * empty one sent with `content-type: application/json` (what many HTTP
 * clients send for a POST without data) is "no body", the same as `{}`, not
 * a 400. A body that is there must still be JSON.
 */
import assert from 'node:assert/strict'
import { before, describe, it } from 'node:test'
import { TOKEN_A, type TestGateway, gateway, suiteScope } from '../support/gateway.js'
import { raw } from '../support/http.js'

describe('an empty application/json body', () => {
  let gw: TestGateway
  const scope = suiteScope()
  const headers = { authorization: `Bearer ${TOKEN_A}`, 'content-type': 'application/json' }
  before(async () => { gw = await gateway(scope) })

  it('creates a session with default options', async () => {
    const res = await raw(gw, 'POST', '/v1/sessions', headers, '')
    assert.equal(res.status, 201, JSON.stringify(res.body))
    assert.deepEqual(res.body.options, {})
    const listed = await gw.request('GET', '/v1/sessions')
    assert.deepEqual(listed.body.sessions.map((s: any) => s.id), [res.body.id])
  })

  it('issues a ws ticket', async () => {
    const id = (await gw.createSession()).id as string
    const res = await raw(gw, 'POST', `/v1/sessions/${id}/ws-ticket`, headers, '')
    assert.equal(res.status, 201, JSON.stringify(res.body))
    assert.equal(typeof res.body.ticket, 'string')
  })

  it('still refuses a body that is not JSON, or a prototype key', async () => {
    for (const body of ['{', ' ', '{"__proto__":{"x":1}}']) {
      const res = await raw(gw, 'POST', '/v1/sessions', headers, body)
      assert.deepEqual([res.status, res.body.code], [400, 'bad_request'], JSON.stringify(body))
    }
  })
})
