/**
 * Limits on connections, so one client or tenant cannot take the server from
 * the others: the auth-failure lockout keys on the real client behind a
 * trusted proxy (TRUST_PROXY), a request that trickles its headers or body is
 * ended (REQUEST_TIMEOUT_MS, HEADERS_TIMEOUT_MS) while WebSockets and event
 * streams live on, past MAX_CONNECTIONS new sockets are dropped while open
 * ones keep working, and MAX_CONNECTIONS_PER_TENANT bounds one tenant's
 * WebSockets and streams without touching another tenant.
 */
import assert from 'node:assert/strict'
import { type Socket, connect } from 'node:net'
import { describe, it } from 'node:test'
import { isResult } from '../support/frames.js'
import { TOKEN_A, TOKEN_B, type TestClient, type TestGateway, eventually } from '../support/gateway.js'
import { raw, upgradeStatus } from '../support/http.js'
import { client, gateway } from '../support/sessions.js'

const WRONG = 'wrong-token-guessed-0123456789'

/** GET /v1/sessions from the test's own 127.0.0.1, as a proxy would forward it for `client`. */
async function forwarded (gw: TestGateway, clientAddress: string, token: string): Promise<number> {
  return (await raw(gw, 'GET', '/v1/sessions', { authorization: `Bearer ${token}`, 'x-forwarded-for': clientAddress })).status
}

describe('auth-failure lockout behind a proxy (TRUST_PROXY)', () => {
  it('keys on the forwarded client: 30 bad tokens lock that client out, another client of the same proxy is unaffected', async (t) => {
    const gw = await gateway(t, { env: { AUTH_FAILURES_PER_MINUTE: '30', TRUST_PROXY: '127.0.0.1' } })
    for (let i = 0; i < 30; i++) assert.equal(await forwarded(gw, '203.0.113.7', WRONG), 401)
    assert.equal(await forwarded(gw, '203.0.113.7', WRONG), 429)
    assert.equal(await forwarded(gw, '203.0.113.7', TOKEN_A), 429, 'the guesser stays locked out, a right guess included')
    assert.equal(await forwarded(gw, '198.51.100.9', WRONG), 401, 'another client is not locked out')
    assert.equal(await forwarded(gw, '198.51.100.9', TOKEN_A), 200)
    assert.equal(await forwarded(gw, '203.0.113.7, 198.51.100.9', TOKEN_B), 200, 'the address the trusted proxy saw decides, not one the client wrote before it')
  })

  it('ignores X-Forwarded-For without TRUST_PROXY: every forwarded "client" is the proxy itself', async (t) => {
    const gw = await gateway(t, { env: { AUTH_FAILURES_PER_MINUTE: '30' } })
    for (let i = 0; i < 30; i++) assert.equal(await forwarded(gw, `203.0.113.${i}`, WRONG), 401)
    assert.equal(await forwarded(gw, '198.51.100.9', TOKEN_A), 429, 'a spoofed header does not escape the lockout')
  })
})

/** A raw TCP connection to the gateway that records what it receives and when it closes. */
class RawConnection {
  readonly socket: Socket
  text = ''
  closed = false
  readonly openedAt = Date.now()
  closedAt = 0

  constructor (gw: TestGateway) {
    this.socket = connect(Number(new URL(gw.url).port), '127.0.0.1')
    this.socket.setEncoding('utf8')
    this.socket.on('data', (chunk: string) => { this.text += chunk })
    this.socket.on('error', () => {}) // a reset is one way of being refused
    this.socket.on('close', () => { this.closed = true; this.closedAt = Date.now() })
  }

  ready (): Promise<void> {
    return new Promise((resolve, reject) => {
      this.socket.once('connect', resolve)
      this.socket.once('error', reject)
    })
  }

  /** Writes `chunks` one per `tick()` until the server closes the connection or they run out. */
  async trickle (chunks: string[], tick: () => Promise<void>): Promise<void> {
    for (const chunk of chunks) {
      if (this.closed) return
      this.socket.write(chunk)
      await tick()
    }
  }
}

describe('request timeouts', () => {
  it('ends a request that trickles its body or its headers within the timeout, and never cuts an open WebSocket or event stream', async (t) => {
    const gw = await gateway(t, { env: { REQUEST_TIMEOUT_MS: '1000', HEADERS_TIMEOUT_MS: '600', KEEPALIVE_INTERVAL_MS: '200' } })
    const id = (await gw.createSession()).id
    const ws = await client(gw, t, id, 'after=0')
    const stream = new AbortController()
    t.after(() => stream.abort())
    const sse = await fetch(`${gw.url}/v1/sessions/${id}/events/stream`, { headers: { authorization: `Bearer ${TOKEN_A}` }, signal: stream.signal })
    assert.equal(sse.status, 200)
    const reader = (sse.body as ReadableStream<Uint8Array>).getReader()

    // The attack's pace: a chunk per keep_alive the gateway sends the WebSocket client (every 200 ms),
    // so the trickle follows the gateway's own clock, however busy the machine. Ended, the trickled
    // connection stops waiting.
    const tick = (c: RawConnection) => async (): Promise<void> => {
      const from = ws.frames.length
      await ws.until(() => c.closed || ws.frames.slice(from).some((f) => f.type === 'keep_alive'), 5000, 'a keep_alive')
    }

    // A body of 100 bytes sent a byte a keep_alive would take 20 s.
    const body = new RawConnection(gw)
    t.after(() => body.socket.destroy())
    await body.ready()
    body.socket.write(`POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TOKEN_A}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n`)
    const trickling = body.trickle(Array.from({ length: 100 }, () => ' '), tick(body))
    await eventually(() => body.closed, 5000, 'the server to end the trickled body')
    await trickling
    assert.ok(body.closedAt - body.openedAt < 4000, `ended after ${body.closedAt - body.openedAt} ms`)
    assert.match(body.text, /^HTTP\/1\.1 408 /, 'answered 408 Request Timeout')

    // Headers trickled a byte at a time.
    const headers = new RawConnection(gw)
    t.after(() => headers.socket.destroy())
    await headers.ready()
    const trickledHeaders = headers.trickle([...`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ${'a'.repeat(200)}\r\n\r\n`], tick(headers))
    await eventually(() => headers.closed, 5000, 'the server to end the trickled headers')
    await trickledHeaders
    assert.ok(headers.closedAt - headers.openedAt < 4000, `ended after ${headers.closedAt - headers.openedAt} ms`)

    assert.equal((await gw.request('GET', '/v1/sessions')).status, 200, 'the gateway serves others meanwhile')

    // Both long-lived connections are now well past REQUEST_TIMEOUT_MS and still carry traffic.
    const from = ws.frames.length
    ws.sendUser('still here?')
    await ws.waitFor(isResult, 10_000, from)
    assert.equal(ws.closeCode, null)
    let seen = ''
    while (!seen.includes('still here?')) {
      const chunk = await reader.read()
      assert.equal(chunk.done, false, 'the event stream was not ended')
      seen += new TextDecoder().decode(chunk.value)
    }
  })
})

describe('MAX_CONNECTIONS', () => {
  it('drops new connections past the cap while the open ones keep working', async (t) => {
    const gw = await gateway(t, { env: { MAX_CONNECTIONS: '3' } })
    const ask = async (c: RawConnection): Promise<void> => {
      const before = c.text.length
      c.socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n')
      await eventually(() => c.text.slice(before).includes('{"status":"ok"}') || c.closed, 5000, 'a health answer')
      assert.match(c.text.slice(before), /^HTTP\/1\.1 200 /)
    }
    const open: RawConnection[] = []
    t.after(() => { for (const c of open) c.socket.destroy() })
    for (let i = 0; i < 3; i++) {
      const c = new RawConnection(gw)
      open.push(c)
      await c.ready()
      await ask(c)
    }
    const refused = new RawConnection(gw)
    open.push(refused)
    refused.socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n')
    await eventually(() => refused.closed, 5000, 'the fourth connection to be dropped')
    assert.equal(refused.text, '', 'no answer on a dropped connection')

    for (const c of open.slice(0, 3)) await ask(c) // keep-alive connections still served

    open[0]!.socket.destroy()
    await eventually(async () => {
      const next = new RawConnection(gw)
      open.push(next)
      next.socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n')
      await eventually(() => next.closed || next.text.includes('{"status":"ok"}'), 5000, 'an answer or a drop')
      return next.text.startsWith('HTTP/1.1 200 ')
    }, 5000, 'a freed place to be taken again')
  })
})

describe('MAX_CONNECTIONS_PER_TENANT', () => {
  it('refuses a tenant past its WebSockets + event streams across sessions with 429 tenant_connection_limit; another tenant is unaffected', async (t) => {
    const gw = await gateway(t, { env: { MAX_CONNECTIONS_PER_TENANT: '2' } })
    const [s1, s2, s3] = [await gw.createSession(), await gw.createSession(), await gw.createSession()]
    const ws = await client(gw, t, s1.id)
    const stream = new AbortController()
    t.after(() => stream.abort())
    const sse = await fetch(`${gw.url}/v1/sessions/${s2.id}/events/stream`, { headers: { authorization: `Bearer ${TOKEN_A}` }, signal: stream.signal })
    assert.equal(sse.status, 200)

    const refused = await upgradeStatus(`${gw.wsUrl}/v1/sessions/${s3.id}/ws`, TOKEN_A)
    assert.equal(refused.status, 429)
    assert.deepEqual(Object.keys(refused.body).sort(), ['code', 'message', 'statusCode'])
    assert.equal(refused.body.code, 'tenant_connection_limit')
    const refusedStream = await fetch(`${gw.url}/v1/sessions/${s3.id}/events/stream`, { headers: { authorization: `Bearer ${TOKEN_A}` } })
    assert.equal(refusedStream.status, 429)
    assert.equal((await refusedStream.json()).code, 'tenant_connection_limit')
    assert.equal((await gw.request('GET', `/v1/sessions/${s3.id}`)).body.clients, 0)

    const other = await gw.createSession({}, TOKEN_B)
    assert.equal((await upgradeStatus(`${gw.wsUrl}/v1/sessions/${other.id}/ws`, TOKEN_B)).status, 101, 'tenant B has its own budget')
    assert.equal(await upgradeStatus(`${gw.wsUrl}/v1/sessions/${other.id}/ws`, TOKEN_B).then((r) => r.status), 101)

    // Closing a connection (a WebSocket, then a stream) gives its place back.
    const connectWhenFree = (what: string): Promise<TestClient> => eventually(async () => {
      try {
        const c = await gw.connect(s3.id, 'role=observer')
        t.after(() => c.terminate())
        return c
      } catch {
        return false
      }
    }, 5000, what)
    ws.terminate()
    await connectWhenFree('the WebSocket place to be free again')
    assert.equal((await upgradeStatus(`${gw.wsUrl}/v1/sessions/${s3.id}/ws`, TOKEN_A)).status, 429, 'full again')
    stream.abort()
    await connectWhenFree('the stream place to be free again')
  })
})
