/**
 * Authentication, over real HTTP and WebSockets: every /v1 route and the
 * WebSocket upgrade refuse a missing or wrong credential with 401 (also when
 * the path is percent-encoded or in absolute form); a token may come as a
 * `bearer.<token>` subprotocol entry, and the server then selects
 * `claude-gateway.v1`, never the token; single-use tickets are bound to one
 * session and die after WS_TICKET_TTL_MS; JWTs are verified with jose (HS256
 * secret, or an RS256 public key that cannot be abused as an HMAC secret).
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { before, describe, it } from 'node:test'
import { SignJWT, UnsecuredJWT, exportPKCS8, exportSPKI, generateKeyPair } from 'jose'
import { TOKEN_A, TOKEN_B, type TestGateway, TestClient, eventually, gateway, suiteScope } from '../support/gateway.js'
import { raw, upgrade } from '../support/http.js'

const JWT_SECRET = 'jwt-secret-for-tests-0123456789-abcdefghijklmnop'
const WRONG = 'token-nobody-has-0123456789'
const UNAUTHORIZED = { statusCode: 401, code: 'unauthorized', message: 'Missing or invalid credentials' }

async function jwt (claims: Record<string, unknown>, opts: { exp?: string | number | null, secret?: string } = {}): Promise<string> {
  const signer = new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setIssuedAt()
  if (opts.exp !== null) signer.setExpirationTime(opts.exp ?? '5m')
  return signer.sign(new TextEncoder().encode(opts.secret ?? JWT_SECRET))
}

describe('authentication', () => {
  const scope = suiteScope()
  let gw: TestGateway
  let mine: string
  let other: string

  before(async () => {
    gw = await gateway(scope, { env: { JWT_SECRET, WS_TICKET_TTL_MS: '1000' } })
    mine = (await gw.createSession()).id
    other = (await gw.createSession()).id
  })

  /** Every /v1 route, on a session that exists (so a 401 is not a 404 in disguise). */
  const routes = (): Array<[string, string, string?]> => [
    ['POST', '/v1/sessions', '{}'],
    ['GET', '/v1/sessions'],
    ['GET', `/v1/sessions/${mine}`],
    ['HEAD', `/v1/sessions/${mine}`],
    ['DELETE', `/v1/sessions/${mine}`],
    ['GET', `/v1/sessions/${mine}/events`],
    ['GET', `/v1/sessions/${mine}/events/stream`],
    ['GET', `/v1/sessions/${mine}/permissions`],
    ['POST', `/v1/sessions/${mine}/permissions/req-1`, '{"behavior":"allow"}'],
    ['POST', `/v1/sessions/${mine}/ws-ticket`],
    ['GET', `/v1/sessions/${mine}/ws`],
    ['GET', '/v1/no-such-route']
  ]

  it('answers 401 {statusCode, code, message} on every /v1 route without a token, with a wrong one, or a malformed header', async () => {
    const credentials: Array<Record<string, string>> = [
      {},
      { authorization: `Bearer ${WRONG}` },
      { authorization: TOKEN_A }, // no scheme
      { authorization: `Basic ${Buffer.from(`x:${TOKEN_A}`).toString('base64')}` },
      { authorization: `Bearer ${TOKEN_A} extra` },
      { authorization: 'Bearer ' },
      { authorization: `Bearer ${TOKEN_A.slice(0, -1)}` }
    ]
    for (const [method, path, body] of routes()) {
      for (const headers of credentials) {
        const res = await raw(gw, method, path, body === undefined ? headers : { ...headers, 'content-type': 'application/json' }, body)
        assert.equal(res.status, 401, `${method} ${path} with ${JSON.stringify(headers)}`)
        if (method !== 'HEAD') assert.deepEqual(res.body, UNAUTHORIZED, `${method} ${path}`)
      }
    }
    // Nothing was stopped by the refused DELETEs.
    const still = await gw.request('GET', `/v1/sessions/${mine}`)
    assert.ok(['starting', 'running'].includes(still.body.status), still.body.status)
  })

  it('cannot be sidestepped by a percent-encoded path or an absolute-form request target', async () => {
    const { port } = new URL(gw.url)
    const before = (await gw.request('GET', '/v1/sessions')).body.sessions.length
    const variants = [
      '/%761/sessions', // `v` encoded: routes to /v1/sessions
      '/%76%31/sessions',
      `/v1/sessions/${mine}/%65vents`,
      `http://127.0.0.1:${port}/v1/sessions`,
      `http://evil.example/v1/sessions/${mine}`
    ]
    for (const path of variants) {
      for (const method of ['GET', 'POST']) {
        const res = await raw(gw, method, path, { 'content-type': 'application/json' }, method === 'POST' ? '{}' : undefined)
        assert.ok([401, 404].includes(res.status), `${method} ${path} answered ${res.status} ${JSON.stringify(res.body)}`)
        assert.notEqual(res.body?.code, undefined)
      }
    }
    // The same tricks with a valid token still name the real routes (so the 401s above were not 404s by luck).
    const listed = await raw(gw, 'GET', '/%761/sessions', { authorization: `Bearer ${TOKEN_A}` })
    assert.equal(listed.status, 200)
    assert.equal(listed.body.sessions.length, before, 'no session was created without credentials')
  })

  it('refuses the WebSocket upgrade without a token, with a wrong one, and with a wrong subprotocol token (401 before any upgrade)', async () => {
    const path = `/v1/sessions/${mine}/ws`
    const attempts: Array<Record<string, string>> = [
      {},
      { authorization: `Bearer ${WRONG}` },
      { 'sec-websocket-protocol': `claude-gateway.v1, bearer.${WRONG}` },
      { 'sec-websocket-protocol': 'claude-gateway.v1' },
      { 'sec-websocket-protocol': `claude-gateway.v1, bearer.${TOKEN_A}x` }
    ]
    for (const extra of attempts) {
      const res = await upgrade(gw, path, extra)
      assert.equal(res.status, 401, JSON.stringify(extra))
      assert.deepEqual(res.body, UNAUTHORIZED)
    }
    await assert.rejects(TestClient.open(`${gw.wsUrl}${path}`, {}), (err: any) => err.statusCode === 401)
    await assert.rejects(TestClient.open(`${gw.wsUrl}${path}`, {}, ['claude-gateway.v1', `bearer.${WRONG}`]), (err: any) => err.statusCode === 401)
  })

  it('accepts the token as a bearer.<token> subprotocol entry and selects claude-gateway.v1, never echoing the token', async () => {
    const client = await TestClient.open(`${gw.wsUrl}/v1/sessions/${mine}/ws`, {}, ['claude-gateway.v1', `bearer.${TOKEN_A}`])
    try {
      assert.equal(client.ws.protocol, 'claude-gateway.v1')
      const hello = await client.waitFor((f) => f.subtype === 'hello')
      assert.equal(hello.session_id, mine)
    } finally {
      client.terminate()
    }
    // The raw 101: exactly our protocol name, nothing of the token anywhere in the headers.
    const up = await upgrade(gw, `/v1/sessions/${mine}/ws`, { 'sec-websocket-protocol': `bearer.${TOKEN_A}, claude-gateway.v1` })
    assert.equal(up.status, 101)
    assert.equal(up.headers['sec-websocket-protocol'], 'claude-gateway.v1')
    assert.ok(!JSON.stringify(up.headers).includes(TOKEN_A))
    // Offered without our protocol name: authenticated, but no protocol is selected (the token is still not echoed).
    const bare = await upgrade(gw, `/v1/sessions/${mine}/ws`, { 'sec-websocket-protocol': `bearer.${TOKEN_A}` })
    assert.equal(bare.status, 101)
    assert.equal(bare.headers['sec-websocket-protocol'], undefined)
    assert.ok(!JSON.stringify(bare.headers).includes(TOKEN_A))
    // Another tenant's subprotocol token does not open my session.
    const foreign = await upgrade(gw, `/v1/sessions/${mine}/ws`, { 'sec-websocket-protocol': `claude-gateway.v1, bearer.${TOKEN_B}` })
    assert.equal(foreign.status, 404)
  })

  it('a ticket opens its session once: the second use, another session, or a REST route get 401', async () => {
    const issued = await gw.request('POST', `/v1/sessions/${mine}/ws-ticket`)
    assert.equal(issued.status, 201)
    assert.equal(typeof issued.body.ticket, 'string')
    assert.ok(issued.body.ticket.length >= 24)
    assert.ok(Date.parse(issued.body.expires_at) > Date.now())
    const url = `${gw.wsUrl}/v1/sessions/${mine}/ws?ticket=${encodeURIComponent(issued.body.ticket)}`

    const first = await TestClient.open(url, {})
    try {
      const hello = await first.waitFor((f) => f.subtype === 'hello')
      assert.equal(hello.session_id, mine)
    } finally {
      first.terminate()
    }
    await assert.rejects(TestClient.open(url, {}), (err: any) => err.statusCode === 401)

    // Bound to its session: presenting it on another one (same tenant) fails, and spends it.
    const forMine = (await gw.request('POST', `/v1/sessions/${mine}/ws-ticket`)).body.ticket as string
    const wrong = await upgrade(gw, `/v1/sessions/${other}/ws?ticket=${encodeURIComponent(forMine)}`)
    assert.equal(wrong.status, 401)
    assert.deepEqual(wrong.body, UNAUTHORIZED)
    const spent = await upgrade(gw, `/v1/sessions/${mine}/ws?ticket=${encodeURIComponent(forMine)}`)
    assert.equal(spent.status, 401)

    // Only the WebSocket route takes tickets.
    const rest = (await gw.request('POST', `/v1/sessions/${mine}/ws-ticket`)).body.ticket as string
    for (const path of [`/v1/sessions/${mine}?ticket=${rest}`, `/v1/sessions?ticket=${rest}`, `/v1/sessions/${mine}/events?ticket=${rest}`]) {
      assert.equal((await raw(gw, 'GET', path)).status, 401, path)
    }
    // Made-up tickets.
    for (const t of ['', 'x', randomBytes(24).toString('base64url'), 'a'.repeat(200)]) {
      const res = await upgrade(gw, `/v1/sessions/${mine}/ws?ticket=${t}`)
      assert.ok([400, 401].includes(res.status), `ticket ${JSON.stringify(t)}: ${res.status}`)
    }
  })

  it('an expired ticket is refused', async () => {
    const issued = (await gw.request('POST', `/v1/sessions/${mine}/ws-ticket`)).body
    const expiresAt = Date.parse(issued.expires_at)
    await eventually(() => Date.now() > expiresAt + 5, 5000, 'the ticket to expire')
    const res = await upgrade(gw, `/v1/sessions/${mine}/ws?ticket=${encodeURIComponent(issued.ticket)}`)
    assert.equal(res.status, 401)
    assert.deepEqual(res.body, UNAUTHORIZED)
  })

  it("another tenant cannot get a ticket for my session (404), and needs credentials to ask", async () => {
    const res = await gw.request('POST', `/v1/sessions/${mine}/ws-ticket`, undefined, TOKEN_B)
    assert.equal(res.status, 404)
    assert.equal(res.body.code, 'session_not_found')
    const none = await raw(gw, 'POST', `/v1/sessions/${mine}/ws-ticket`)
    assert.equal(none.status, 401)
  })

  it('accepts an HS256 JWT whose tenant claim names the tenant, also as a subprotocol entry', async () => {
    const token = await jwt({ tenant: 'tenant-a', sub: 'alice' }, { exp: '23h' })
    const created = await raw(gw, 'POST', '/v1/sessions', { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, '{}')
    assert.equal(created.status, 201)
    // Same tenant as TOKEN_A: visible with the static token, invisible to tenant B.
    assert.equal((await gw.request('GET', `/v1/sessions/${created.body.id}`)).status, 200)
    assert.equal((await gw.request('GET', `/v1/sessions/${created.body.id}`, undefined, TOKEN_B)).status, 404)
    const client = await TestClient.open(`${gw.wsUrl}/v1/sessions/${created.body.id}/ws`, {}, ['claude-gateway.v1', `bearer.${token}`])
    try {
      assert.equal(client.ws.protocol, 'claude-gateway.v1')
      await client.waitFor((f) => f.subtype === 'hello')
    } finally {
      client.terminate()
    }
    await gw.request('DELETE', `/v1/sessions/${created.body.id}`)
  })

  it('refuses expired, wrongly signed, unsigned (alg none), exp-less and tenant-less JWTs, and tenants naming a parent folder', async () => {
    const key = new TextEncoder().encode(JWT_SECRET)
    const bad: Record<string, string> = {
      expired: await jwt({ tenant: 'tenant-a' }, { exp: Math.floor(Date.now() / 1000) - 60 }),
      'wrong key': await jwt({ tenant: 'tenant-a' }, { secret: 'another-secret-of-sufficient-length-0123456789' }),
      'alg none': new UnsecuredJWT({ tenant: 'tenant-a' }).setExpirationTime('5m').encode(),
      'missing exp': await jwt({ tenant: 'tenant-a' }, { exp: null }),
      'no tenant claim': await jwt({ sub: 'alice' }),
      'tenant not a string': await jwt({ tenant: ['tenant-a'] }),
      'tenant with a slash': await jwt({ tenant: 'tenant-a/../tenant-b' }),
      'tenant ..': await jwt({ tenant: '..' }),
      'tenant .': await jwt({ tenant: '.' }),
      'lives longer than JWT_MAX_TTL_SECONDS (default one day)': await jwt({ tenant: 'tenant-a' }, { exp: '25h' }),
      'no iat and a year to live': await new SignJWT({ tenant: 'tenant-a' }).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('365d').sign(key),
      'not yet valid': await new SignJWT({ tenant: 'tenant-a' }).setProtectedHeader({ alg: 'HS256' }).setNotBefore('10m').setExpirationTime('20m').sign(key),
      // A valid signature over a payload changed afterwards.
      tampered: await (async () => {
        const [h, , s] = (await jwt({ tenant: 'tenant-b' })).split('.')
        const p = Buffer.from(JSON.stringify({ tenant: 'tenant-a', exp: Math.floor(Date.now() / 1000) + 300 })).toString('base64url')
        return `${h}.${p}.${s}`
      })()
    }
    for (const [what, token] of Object.entries(bad)) {
      const res = await raw(gw, 'GET', '/v1/sessions', { authorization: `Bearer ${token}` })
      assert.equal(res.status, 401, what)
      assert.deepEqual(res.body, UNAUTHORIZED, what)
      const created = await raw(gw, 'POST', '/v1/sessions', { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, '{}')
      assert.equal(created.status, 401, `${what} (create)`)
    }
  })
})

describe('JWT with a public key', () => {
  it('accepts RS256 signed by the private key, and refuses HS256 tokens keyed with the public PEM (algorithm confusion)', async (t) => {
    const { publicKey, privateKey } = await generateKeyPair('RS256', { extractable: true })
    const pem = await exportSPKI(publicKey)
    assert.ok((await exportPKCS8(privateKey)).includes('PRIVATE KEY'))
    const gw = await gateway(t, { env: { JWT_PUBLIC_KEY: pem } })

    const good = await new SignJWT({ tenant: 'tenant-a' }).setProtectedHeader({ alg: 'RS256' }).setExpirationTime('5m').sign(privateKey)
    assert.equal((await raw(gw, 'GET', '/v1/sessions', { authorization: `Bearer ${good}` })).status, 200)

    const confused = await new SignJWT({ tenant: 'tenant-a' }).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('5m').sign(new TextEncoder().encode(pem))
    const res = await raw(gw, 'GET', '/v1/sessions', { authorization: `Bearer ${confused}` })
    assert.equal(res.status, 401)
    assert.deepEqual(res.body, UNAUTHORIZED)

    const other = await generateKeyPair('RS256')
    const foreign = await new SignJWT({ tenant: 'tenant-a' }).setProtectedHeader({ alg: 'RS256' }).setExpirationTime('5m').sign(other.privateKey)
    assert.equal((await raw(gw, 'GET', '/v1/sessions', { authorization: `Bearer ${foreign}` })).status, 401)
    // Static tokens still work alongside.
    assert.equal((await gw.request('GET', '/v1/sessions')).status, 200)
  })
})
