/**
 * Tenant isolation: another tenant's session answers exactly like a missing
 * one (404 session_not_found, never 403, so its existence does not leak) on
 * every route, and nothing the other tenant does reaches it: not a DELETE,
 * not a permission answer, not a WebSocket, not a ticket.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { before, describe, it } from 'node:test'
import { isPrompt } from '../support/frames.js'
import { TOKEN_B, type TestClient, type TestGateway, gateway, suiteScope } from '../support/gateway.js'
import { upgradeStatus } from '../support/http.js'

const NOT_FOUND = { statusCode: 404, code: 'session_not_found', message: 'No such session' }

describe('tenant isolation', () => {
  const scope = suiteScope()
  let gw: TestGateway
  let id: string
  let pid: number
  let holder: TestClient
  let prompt: any

  before(async () => {
    gw = await gateway(scope)
    const created = await gw.createSession()
    id = created.id
    pid = created.pid
    holder = await gw.connect(id)
    holder.sendUser('ask Bash touch isolation.txt')
    prompt = await holder.waitFor(isPrompt)
  })

  it("answers 404 session_not_found, identical to a missing session's, on every route for another tenant's session", async () => {
    const missing = randomUUID()
    const calls: Array<[string, (s: string) => string, unknown?]> = [
      ['GET', (s) => `/v1/sessions/${s}`],
      ['DELETE', (s) => `/v1/sessions/${s}`],
      ['GET', (s) => `/v1/sessions/${s}/events`],
      ['GET', (s) => `/v1/sessions/${s}/events/stream`],
      ['GET', (s) => `/v1/sessions/${s}/permissions`],
      ['POST', (s) => `/v1/sessions/${s}/permissions/${prompt.request_id}`, { behavior: 'allow', updatedInput: { command: 'touch pwned.txt' } }],
      ['POST', (s) => `/v1/sessions/${s}/ws-ticket`]
    ]
    for (const [method, path, body] of calls) {
      const theirs = await gw.request(method, path(id), body, TOKEN_B)
      const nobody = await gw.request(method, path(missing), body, TOKEN_B)
      assert.equal(theirs.status, 404, `${method} ${path(id)}`)
      assert.deepEqual(theirs.body, NOT_FOUND, `${method} ${path(id)}`)
      assert.deepEqual(theirs, nobody, `${method}: same answer as for a session that does not exist`)
    }
    // Upper-case ids are the same session: still 404.
    assert.equal((await gw.request('GET', `/v1/sessions/${id.toUpperCase()}`, undefined, TOKEN_B)).status, 404)

    const ws = await upgradeStatus(`${gw.wsUrl}/v1/sessions/${id}/ws`, TOKEN_B)
    assert.equal(ws.status, 404)
    assert.deepEqual(ws.body, NOT_FOUND)
    const wsObserver = await upgradeStatus(`${gw.wsUrl}/v1/sessions/${id}/ws?role=observer&after=0`, TOKEN_B)
    assert.equal(wsObserver.status, 404)
  })

  it('leaves the session untouched: still running, prompt still pending, no client added, not listed for the other tenant', async () => {
    const mine = await gw.request('GET', `/v1/sessions/${id}`)
    assert.equal(mine.status, 200)
    assert.ok(['starting', 'running'].includes(mine.body.status), mine.body.status)
    assert.equal(mine.body.pid, pid, 'the CLI was not restarted or stopped')
    assert.equal(mine.body.clients, 1)
    const pending = await gw.request('GET', `/v1/sessions/${id}/permissions`)
    assert.deepEqual(pending.body.requests.map((r: any) => r.request_id), [prompt.request_id])
    assert.ok(!holder.frames.some((f) => f.subtype === 'permission_resolved'), 'no answer reached the session')
    assert.equal(holder.closeCode, null)

    const theirs = await gw.request('GET', '/v1/sessions', undefined, TOKEN_B)
    assert.equal(theirs.status, 200)
    assert.ok(!theirs.body.sessions.some((s: any) => s.id === id))

    // The owner can still answer it.
    const answer = await gw.request('POST', `/v1/sessions/${id}/permissions/${prompt.request_id}`, { behavior: 'deny', message: 'no' })
    assert.equal(answer.status, 200)
    await holder.waitFor((f) => f.type === 'result')
  })

  it("a ticket of mine does not open another tenant's session and theirs does not open mine", async () => {
    const theirId = (await gw.createSession({}, TOKEN_B)).id
    const mineTicket = (await gw.request('POST', `/v1/sessions/${id}/ws-ticket`)).body.ticket as string
    const theirTicket = (await gw.request('POST', `/v1/sessions/${theirId}/ws-ticket`, undefined, TOKEN_B)).body.ticket as string
    assert.equal((await upgradeStatus(`${gw.wsUrl}/v1/sessions/${theirId}/ws?ticket=${encodeURIComponent(mineTicket)}`)).status, 401)
    assert.equal((await upgradeStatus(`${gw.wsUrl}/v1/sessions/${id}/ws?ticket=${encodeURIComponent(theirTicket)}`)).status, 401)
    assert.equal((await gw.request('GET', `/v1/sessions/${id}`)).body.clients, 1)
    assert.equal((await gw.request('GET', `/v1/sessions/${theirId}`, undefined, TOKEN_B)).body.clients, 0)
  })
})
