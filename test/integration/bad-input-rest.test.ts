/**
 * Bad input over REST gets a 4xx with `{statusCode, code, message}`, never a
 * 500 and never a session: malformed or mistyped JSON, prototype-pollution
 * keys, absurdly nested JSON (zod's z.json() and JSON.stringify recurse, so
 * it used to end in a stack overflow and a 500), junk queries, ids and headers.
 */
import assert from 'node:assert/strict'
import { before, describe, it } from 'node:test'
import { type ErrorCode, errorTable } from '../../src/errors.js'
import { TOKEN_A, type TestClient, type TestGateway, gateway, suiteScope } from '../support/gateway.js'

const deep = (depth: number): string => `${'['.repeat(depth)}${']'.repeat(depth)}`

describe('bad REST input', () => {
  let gw: TestGateway
  const scope = suiteScope()
  before(async () => { gw = await gateway(scope) })

  async function send (method: string, path: string, body?: string, headers: Record<string, string> = {}): Promise<{ status: number, body: any }> {
    const res = await fetch(gw.url + path, {
      method,
      headers: { authorization: `Bearer ${TOKEN_A}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      body
    })
    const text = await res.text()
    return { status: res.status, body: text === '' ? null : JSON.parse(text) }
  }

  function assertClientError (res: { status: number, body: any }, what: string): void {
    assert.ok(res.status >= 400 && res.status < 500, `${what}: ${res.status} ${JSON.stringify(res.body)}`)
    assert.deepEqual(Object.keys(res.body).sort(), ['code', 'message', 'statusCode'], what)
    assert.equal(res.body.statusCode, res.status, what)
    assert.equal(errorTable[res.body.code as ErrorCode]?.statusCode, res.status, `${what}: the table's status for ${res.body.code}`)
    assert.equal(typeof res.body.message, 'string')
  }

  it('refuses malformed, mistyped, polluting and deeply nested session bodies with a 4xx and creates nothing', async () => {
    const bodies: Array<[string, number]> = [
      ['not json', 400],
      ['{"model":', 400],
      ['[]', 400],
      ['"sonnet"', 400],
      ['42', 400],
      ['{"model":42}', 400],
      ['{"max_turns":-1}', 400],
      ['{"max_turns":1.5}', 400],
      ['{"max_turns":1e400}', 400],
      ['{"allowed_tools":"Bash"}', 400],
      ['{"include_partial_messages":"yes"}', 400],
      ['{"permission_mode":"root"}', 400],
      ['{"__proto__":{"isAdmin":true}}', 400],
      ['{"constructor":{"prototype":{"isAdmin":true}}}', 400],
      [`{"metadata":${deep(100)}}`, 400],
      [`{"metadata":${deep(100_000)}}`, 400],
      [`{"metadata":{"a":${'{"a":'.repeat(20_000)}1${'}'.repeat(20_000)}}}`, 400]
    ]
    for (const [body, status] of bodies) {
      const res = await send('POST', '/v1/sessions', body)
      assertClientError(res, body.slice(0, 60))
      assert.equal(res.status, status, body.slice(0, 60))
    }
    assert.equal(({} as any).isAdmin, undefined)
    const text = await send('POST', '/v1/sessions', 'model=sonnet', { 'content-type': 'text/plain' })
    assertClientError(text, 'text/plain body')
    const form = await send('POST', '/v1/sessions', 'model=sonnet', { 'content-type': 'application/x-www-form-urlencoded' })
    assertClientError(form, 'form body')
    assert.equal(form.body.code, 'unsupported_media_type')
    // Nesting that is merely deep-ish is fine.
    const fine = await send('POST', '/v1/sessions', `{"metadata":${deep(30)}}`)
    assert.equal(fine.status, 201)
    const list = await send('GET', '/v1/sessions')
    assert.equal(list.body.sessions.length, 1, 'only the valid body created a session')
    await send('DELETE', `/v1/sessions/${fine.body.id}`)
  })

  it('refuses junk answers to a pending permission (deep, mistyped) with a 4xx, leaving the prompt pending', async (t) => {
    const id = (await gw.createSession()).id as string
    const holder: TestClient = await gw.connect(id)
    t.after(() => holder.terminate())
    holder.sendUser('ask Bash touch x.txt')
    const prompt = await holder.waitFor((f) => f.type === 'control_request' && f.request?.subtype === 'can_use_tool')
    const path = `/v1/sessions/${id}/permissions/${prompt.request_id}`
    for (const body of [
      'not json',
      '{}',
      '{"behavior":"maybe"}',
      '{"subtype":"error"}',
      '{"subtype":"success","response":[]}',
      `{"behavior":"allow","updatedInput":{"command":${deep(100_000)}}}`,
      `{"subtype":"success","response":{"x":${deep(100)}}}`
    ]) {
      assertClientError(await send('POST', path, body), body.slice(0, 60))
    }
    const pending = await send('GET', `/v1/sessions/${id}/permissions`)
    assert.deepEqual(pending.body.requests.map((r: any) => r.request_id), [prompt.request_id])
    assert.ok(!gw.stdinText(id).includes('[[[['), 'nothing nested reached the CLI')
    const ok = await send('POST', path, '{"behavior":"deny","message":"no"}')
    assert.equal(ok.status, 200)
    await holder.waitFor((f) => f.type === 'result')
  })

  it('refuses junk queries, ids and headers with a 4xx (a malformed id is just a missing session)', async () => {
    const id = (await gw.createSession()).id as string
    for (const path of [
      '/v1/sessions?limit=abc',
      '/v1/sessions?limit=100000',
      '/v1/sessions?limit=0',
      `/v1/sessions?cursor=${'c'.repeat(600)}`,
      '/v1/sessions?unknown=1',
      `/v1/sessions/${id}/events?after=-1`,
      `/v1/sessions/${id}/events?limit=1e9`,
      `/v1/sessions/${id}/events?after=1&after=2`,
      `/v1/sessions/${id}/events/stream?after=x`,
      '/v1/sessions/not-a-uuid',
      '/v1/sessions/..%2F..%2Fetc%2Fpasswd',
      `/v1/sessions/${id}%00`,
      '/v1/sessions/%E0%A4%A'
    ]) {
      assertClientError(await send('GET', path), path)
    }
    assertClientError(await send('GET', `/v1/sessions/${id}/events/stream`, undefined, { 'last-event-id': 'abc' }), 'Last-Event-ID abc')
    assertClientError(await send('GET', `/v1/sessions/${id}/ws?role=admin`), 'ws role=admin')
    assertClientError(await send('GET', `/v1/sessions/${id}/ws?after=-5`), 'ws after=-5')
    assert.equal((await fetch(`${gw.url}/healthz`)).status, 200)
  })
})
