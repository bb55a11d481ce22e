// REST surface of the gateway core, over real HTTP with the fake CLI as child process:
// create / list / get / delete, validation errors, tenant isolation, authentication,
// and MAX_SESSIONS.
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { connect } from 'node:net'
import { describe, it } from 'node:test'
import { TOKEN_A, TOKEN_B, type TestGateway, TestClient, fakeCliPids, processAlive } from '../support/gateway.js'
import { gateway } from '../support/sessions.js'

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

async function rawFetch (gw: TestGateway, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<{ status: number, body: any }> {
  const res = await fetch(gw.url + path, { method, headers, body })
  const text = await res.text()
  return { status: res.status, body: text === '' ? null : JSON.parse(text) }
}

/**
 * Sends a WebSocket upgrade request over a raw socket and resolves with the HTTP status
 * once the server has closed the connection. Rejects if the server keeps it open: a
 * refused upgrade must not leave sockets behind (they pile up and stall shutdown).
 */
function refusedUpgrade (gw: TestGateway, path: string, headers: Record<string, string> = {}): Promise<number> {
  const { port } = new URL(gw.url)
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1')
    let text = ''
    const timer = setTimeout(() => {
      socket.destroy()
      reject(new Error(`server kept the socket of a refused upgrade open; got: ${text.slice(0, 200)}`))
    }, 5000)
    socket.setEncoding('utf8')
    socket.on('data', (d: string) => { text += d })
    socket.on('error', () => {})
    socket.on('close', () => {
      clearTimeout(timer)
      const status = /^HTTP\/1\.1 (\d{3})/.exec(text)
      if (status === null) reject(new Error(`no HTTP answer: ${text.slice(0, 200)}`))
      else resolve(Number(status[1]))
    })
    const extra = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')
    socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
      `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${Buffer.from(randomUUID().slice(0, 16)).toString('base64')}\r\n${extra}\r\n`)
  })
}

describe('REST sessions', () => {
  it('POST /v1/sessions answers 201 with id, status and created_at, and GET returns the same session', async (t) => {
    const gw = await gateway(t)
    const before = Date.now()
    const res = await gw.request('POST', '/v1/sessions', { model: 'sonnet', metadata: { ticket: 42 } })
    const after = Date.now()
    assert.equal(res.status, 201)
    assert.match(res.body.id, UUID_RE)
    assert.ok(['starting', 'running'].includes(res.body.status), `status ${res.body.status}`)
    const created = Date.parse(res.body.created_at)
    assert.ok(created >= before - 5 && created <= after + 5, `created_at ${res.body.created_at} is not the time of the request`)
    assert.deepEqual(res.body.metadata, { ticket: 42 })
    assert.equal(typeof res.body.pid, 'number')
    assert.ok(processAlive(res.body.pid))

    const one = await gw.request('GET', `/v1/sessions/${res.body.id}`)
    assert.equal(one.status, 200)
    assert.equal(one.body.id, res.body.id)
    assert.equal(one.body.created_at, res.body.created_at)
    assert.equal(one.body.pid, res.body.pid)
    assert.deepEqual(one.body.metadata, { ticket: 42 })
    assert.equal(one.body.options.model, 'sonnet')
    // Upper-case ids name the same session.
    assert.equal((await gw.request('GET', `/v1/sessions/${String(res.body.id).toUpperCase()}`)).body.id, res.body.id)
  })

  it('refuses an unknown body field or a cwd outside the workspace with 400 bad_request, starting nothing', async (t) => {
    const gw = await gateway(t)
    assert.deepEqual(await fakeCliPids(), [])
    const unknown = await gw.request('POST', '/v1/sessions', { model: 'sonnet', bogus_field: true })
    assert.equal(unknown.status, 400)
    assert.deepEqual(Object.keys(unknown.body).sort(), ['code', 'message', 'statusCode'])
    assert.equal(unknown.body.statusCode, 400)
    assert.equal(unknown.body.code, 'bad_request')
    assert.match(unknown.body.message, /bogus_field/)

    for (const cwd of ['../x', 'a/../../x', '/etc']) {
      const res = await gw.request('POST', '/v1/sessions', { cwd })
      assert.equal(res.status, 400, `cwd ${cwd}`)
      assert.equal(res.body.statusCode, 400)
      assert.equal(res.body.code, 'bad_request')
      assert.equal(typeof res.body.message, 'string')
    }
    const wrongType = await gw.request('POST', '/v1/sessions', { max_turns: 'many' })
    assert.equal(wrongType.status, 400)
    assert.equal(wrongType.body.code, 'bad_request')
    assert.match(wrongType.body.message, /max_turns/)

    const list = await gw.request('GET', '/v1/sessions')
    assert.deepEqual(list.body.sessions, [])
    assert.deepEqual(await fakeCliPids(), [], 'no CLI was started for a refused request')
  })

  it('lists a tenant\'s sessions newest first, page by page with limit and cursor', async (t) => {
    const gw = await gateway(t)
    const created: any[] = []
    for (let i = 0; i < 3; i++) created.push(await gw.createSession({ metadata: { n: i } }))
    // Another tenant's session never shows up in this list.
    await gw.createSession({}, TOKEN_B)

    // Newest first: by created_at descending (the id orders sessions created in the same millisecond).
    const expected = [...created]
      .sort((a, b) => Date.parse(b.created_at) - Date.parse(a.created_at) || (a.id < b.id ? 1 : -1))
      .map((s) => s.id)
    const full = await gw.request('GET', '/v1/sessions')
    assert.equal(full.status, 200)
    assert.deepEqual(full.body.sessions.map((s: any) => s.id), expected)
    assert.equal(full.body.next_cursor, null)
    // Where the clock moved between creations, the later one is listed first.
    const listed = full.body.sessions.map((s: any) => Date.parse(s.created_at))
    for (let i = 1; i < listed.length; i++) assert.ok(listed[i - 1] >= listed[i])
    if (Date.parse(created[2].created_at) > Date.parse(created[0].created_at)) {
      assert.ok(expected.indexOf(created[2].id) < expected.indexOf(created[0].id))
    }

    const paged: string[] = []
    let cursor: string | null = null
    for (let page = 0; page < 5; page++) {
      const query: string = cursor === null ? '?limit=1' : `?limit=1&cursor=${encodeURIComponent(cursor)}`
      const res = await gw.request('GET', `/v1/sessions${query}`)
      assert.equal(res.status, 200)
      assert.equal(res.body.sessions.length, 1)
      paged.push(res.body.sessions[0].id)
      cursor = res.body.next_cursor
      if (cursor === null) break
    }
    assert.deepEqual(paged, expected)

    const two = await gw.request('GET', '/v1/sessions?limit=2')
    assert.deepEqual(two.body.sessions.map((s: any) => s.id), expected.slice(0, 2))
    const rest = await gw.request('GET', `/v1/sessions?limit=2&cursor=${encodeURIComponent(two.body.next_cursor)}`)
    assert.deepEqual(rest.body.sessions.map((s: any) => s.id), expected.slice(2))
    assert.equal(rest.body.next_cursor, null)

    assert.equal((await gw.request('GET', '/v1/sessions?limit=0')).status, 400)
    assert.equal((await gw.request('GET', '/v1/sessions?limit=abc')).status, 400)
  })

  it('answers another tenant 404 on GET, DELETE and the WebSocket, and leaves the session alone', async (t) => {
    const gw = await gateway(t)
    const s = await gw.createSession()
    const missing = await gw.request('GET', `/v1/sessions/${randomUUID()}`)
    assert.equal(missing.status, 404)

    const get = await gw.request('GET', `/v1/sessions/${s.id}`, undefined, TOKEN_B)
    assert.equal(get.status, 404)
    assert.deepEqual(get.body, missing.body, 'another tenant\'s session looks exactly like a missing one')
    assert.equal(get.body.code, 'session_not_found')

    const del = await gw.request('DELETE', `/v1/sessions/${s.id}`, undefined, TOKEN_B)
    assert.equal(del.status, 404)
    assert.deepEqual(del.body, missing.body)

    await assert.rejects(gw.connect(s.id, '', TOKEN_B), (err: any) => err.statusCode === 404)
    assert.equal(await refusedUpgrade(gw, `/v1/sessions/${s.id}/ws`, { authorization: `Bearer ${TOKEN_B}` }), 404)
    assert.deepEqual((await gw.request('GET', '/v1/sessions', undefined, TOKEN_B)).body.sessions, [])

    const mine = await gw.request('GET', `/v1/sessions/${s.id}`)
    assert.equal(mine.status, 200)
    assert.ok(!['stopping', 'stopped', 'exited'].includes(mine.body.status), `status ${mine.body.status}`)
    assert.equal(mine.body.pid, s.pid)
    assert.ok(processAlive(s.pid), 'the DELETE of another tenant did not stop the CLI')
  })

  it('answers 401 without a valid token, on REST and on the WebSocket upgrade', async (t) => {
    const gw = await gateway(t)
    const s = await gw.createSession()
    const running = await fakeCliPids()
    assert.deepEqual(running, [s.pid])
    const cases: Array<[string, string, Record<string, string>]> = [
      ['GET', '/v1/sessions', {}],
      ['GET', `/v1/sessions/${s.id}`, {}],
      ['DELETE', `/v1/sessions/${s.id}`, {}],
      ['GET', '/v1/sessions', { authorization: 'Bearer not-a-configured-token-000' }],
      ['GET', '/v1/sessions', { authorization: TOKEN_A }],
      ['GET', '/v1/sessions', { authorization: `Basic ${TOKEN_A}` }]
    ]
    for (const [method, path, headers] of cases) {
      const res = await rawFetch(gw, method, path, headers)
      assert.equal(res.status, 401, `${method} ${path} ${JSON.stringify(headers)}`)
      assert.equal(res.body.code, 'unauthorized')
      assert.equal(res.body.statusCode, 401)
    }
    const post = await rawFetch(gw, 'POST', '/v1/sessions', { 'content-type': 'application/json' }, '{}')
    assert.equal(post.status, 401)
    assert.deepEqual(await fakeCliPids(), running, 'an unauthenticated POST starts no CLI')

    await assert.rejects(TestClient.open(`${gw.wsUrl}/v1/sessions/${s.id}/ws`, {}), (err: any) => err.statusCode === 401)
    await assert.rejects(TestClient.open(`${gw.wsUrl}/v1/sessions/${s.id}/ws`, { authorization: 'Bearer wrong-token-000000000' }), (err: any) => err.statusCode === 401)
    assert.equal(await refusedUpgrade(gw, `/v1/sessions/${s.id}/ws`), 401)
    assert.equal(await refusedUpgrade(gw, `/v1/sessions/${s.id}/ws`, { authorization: 'Bearer wrong-token-000000000' }), 401)
    assert.ok(processAlive(s.pid))
    assert.equal((await gw.request('GET', `/v1/sessions/${s.id}`)).body.status !== 'stopped', true)
  })

  it('with MAX_SESSIONS=1 refuses a second session with 503 too_many_sessions until the first is stopped', async (t) => {
    const gw = await gateway(t, { env: { MAX_SESSIONS: '1' } })
    const first = await gw.createSession()
    const second = await gw.request('POST', '/v1/sessions', {})
    assert.equal(second.status, 503)
    assert.equal(second.body.statusCode, 503)
    assert.equal(second.body.code, 'too_many_sessions')
    assert.deepEqual(await fakeCliPids(), [first.pid], 'the refused session started no CLI')
    assert.equal((await gw.request('GET', '/v1/sessions')).body.sessions.length, 1)

    const del = await gw.request('DELETE', `/v1/sessions/${first.id}`)
    assert.equal(del.status, 200)
    const third = await gw.request('POST', '/v1/sessions', {})
    assert.equal(third.status, 201, JSON.stringify(third.body))
  })
})
