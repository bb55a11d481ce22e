/**
 * Browser-facing guards, checked before authentication: the Origin allowlist
 * (cross-site WebSocket hijacking and cross-origin REST), CORS preflights,
 * and the Host allowlist while bound to loopback (DNS rebinding: a page on
 * evil.example resolved to 127.0.0.1 still sends `Host: evil.example`).
 */
import assert from 'node:assert/strict'
import { before, describe, it } from 'node:test'
import { TOKEN_A, type TestGateway, gateway, suiteScope } from '../support/gateway.js'
import { raw, upgrade } from '../support/http.js'

const LISTED = 'https://app.example'
const EVIL = 'https://evil.example'

const auth = { authorization: `Bearer ${TOKEN_A}` }

describe('Origin and CORS', () => {
  const scope = suiteScope()
  let gw: TestGateway
  let id: string
  before(async () => {
    gw = await gateway(scope, { env: { ALLOWED_ORIGINS: `${LISTED}, https://other-app.example` } })
    id = (await gw.createSession()).id
  })

  it('refuses a WebSocket upgrade from an unlisted Origin with 403 forbidden_origin, even with a valid token', async () => {
    for (const origin of [EVIL, 'null', `${LISTED}.evil.example`, 'https://APP.example', `${LISTED}:443`, 'http://app.example']) {
      const res = await upgrade(gw, `/v1/sessions/${id}/ws`, { ...auth, origin })
      assert.equal(res.status, 403, origin)
      assert.deepEqual(res.body, { statusCode: 403, code: 'forbidden_origin', message: 'Origin not allowed' })
    }
    const session = await gw.request('GET', `/v1/sessions/${id}`)
    assert.equal(session.body.clients, 0, 'no refused client was attached')
  })

  it('lets a listed Origin upgrade', async () => {
    const res = await upgrade(gw, `/v1/sessions/${id}/ws`, { ...auth, origin: LISTED })
    assert.equal(res.status, 101)
  })

  it('answers a CORS preflight from a listed Origin with Access-Control-Allow-Origin, and from another with 403', async () => {
    const preflight = { 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' }
    const ok = await raw(gw, 'OPTIONS', '/v1/sessions', { origin: LISTED, ...preflight })
    assert.ok(ok.status === 204 || ok.status === 200, `status ${ok.status} ${JSON.stringify(ok.body)}`)
    assert.equal(ok.headers['access-control-allow-origin'], LISTED)
    assert.match(String(ok.headers['access-control-allow-headers']), /authorization/i)
    assert.match(String(ok.headers['access-control-allow-methods']), /POST/)

    const perSession = await raw(gw, 'OPTIONS', `/v1/sessions/${id}`, { origin: LISTED, 'access-control-request-method': 'DELETE' })
    assert.equal(perSession.headers['access-control-allow-origin'], LISTED)

    const evil = await raw(gw, 'OPTIONS', '/v1/sessions', { origin: EVIL, ...preflight })
    assert.equal(evil.status, 403)
    assert.equal(evil.body.code, 'forbidden_origin')
    assert.equal(evil.headers['access-control-allow-origin'], undefined)
  })

  it('adds Access-Control-Allow-Origin to REST answers for a listed Origin, and refuses other Origins with 403 whatever the token', async () => {
    const ok = await raw(gw, 'GET', '/v1/sessions', { ...auth, origin: LISTED })
    assert.equal(ok.status, 200)
    assert.equal(ok.headers['access-control-allow-origin'], LISTED)

    const created = await raw(gw, 'POST', '/v1/sessions', { ...auth, origin: EVIL, 'content-type': 'application/json' }, '{}')
    assert.equal(created.status, 403)
    assert.equal(created.body.code, 'forbidden_origin')
    const deleted = await raw(gw, 'DELETE', `/v1/sessions/${id}`, { ...auth, origin: EVIL })
    assert.equal(deleted.status, 403)
    assert.ok(['starting', 'running'].includes((await gw.request('GET', `/v1/sessions/${id}`)).body.status), 'the session survived')
    // Without an Origin (not a browser page) the token decides.
    assert.equal((await raw(gw, 'GET', '/v1/sessions', auth)).status, 200)
  })
})

describe('Origin with no allowlist', () => {
  it('refuses every browser Origin but the gateway\'s own (its console) when ALLOWED_ORIGINS is empty', async (t) => {
    const gw = await gateway(t)
    const id = (await gw.createSession()).id
    const { port } = new URL(gw.url)
    for (const foreign of [`http://127.0.0.1:${Number(port) + 1}`, 'http://localhost', `http://localhost:${port}`, 'null', `http://127.0.0.1:${port}/`]) {
      assert.equal((await upgrade(gw, `/v1/sessions/${id}/ws`, { ...auth, origin: foreign })).status, 403, `upgrade from ${foreign}`)
      assert.equal((await raw(gw, 'GET', '/v1/sessions', { ...auth, origin: foreign })).status, 403, `REST from ${foreign}`)
    }
    assert.equal((await raw(gw, 'OPTIONS', '/v1/sessions', { origin: 'http://localhost', 'access-control-request-method': 'GET' })).status, 403)
    // The page the gateway serves calls it from its own origin (Host 127.0.0.1:<port>); its token still decides.
    assert.equal((await upgrade(gw, `/v1/sessions/${id}/ws`, { ...auth, origin: `http://127.0.0.1:${port}` })).status, 101)
    assert.equal((await raw(gw, 'GET', '/v1/sessions', { ...auth, origin: `http://127.0.0.1:${port}` })).status, 200)
    assert.equal((await raw(gw, 'GET', '/v1/sessions', { origin: `http://127.0.0.1:${port}` })).status, 401)
  })
})

describe('Host allowlist on loopback', () => {
  const scope = suiteScope()
  let gw: TestGateway
  let id: string
  before(async () => {
    gw = await gateway(scope, { env: { ALLOWED_HOSTS: 'gateway.internal' } })
    id = (await gw.createSession()).id
  })

  it('refuses a foreign Host with 403 forbidden_host on REST, health and the WebSocket upgrade, before authentication', async () => {
    const expected = { statusCode: 403, code: 'forbidden_host', message: 'Host header not allowed' }
    for (const host of ['evil.example', 'evil.example:80', `evil.example:${new URL(gw.url).port}`, '127.0.0.1.evil.example', 'localhost.', '[::2]', 'LOCALHOST.evil.example']) {
      for (const [method, path] of [['GET', '/v1/sessions'], ['GET', '/healthz'], ['DELETE', `/v1/sessions/${id}`]] as const) {
        const res = await raw(gw, method, path, { ...auth, host })
        assert.equal(res.status, 403, `${method} ${path} Host: ${host}`)
        assert.deepEqual(res.body, expected)
      }
      const up = await upgrade(gw, `/v1/sessions/${id}/ws`, { ...auth, host })
      assert.equal(up.status, 403, `upgrade Host: ${host}`)
      assert.deepEqual(up.body, expected)
    }
    assert.ok(['starting', 'running'].includes((await gw.request('GET', `/v1/sessions/${id}`)).body.status))
  })

  it('accepts loopback names with or without a port, case-insensitively, and ALLOWED_HOSTS entries', async () => {
    const { port } = new URL(gw.url)
    for (const host of ['127.0.0.1', `127.0.0.1:${port}`, `localhost:${port}`, 'LocalHost', `[::1]:${port}`, 'gateway.internal', `GATEWAY.internal:${port}`]) {
      const res = await raw(gw, 'GET', '/v1/sessions', { ...auth, host })
      assert.equal(res.status, 200, `Host: ${host}`)
    }
    assert.equal((await upgrade(gw, `/v1/sessions/${id}/ws`, { ...auth, host: `localhost:${port}` })).status, 101)
  })
})

describe('Host allowlist on any loopback address', () => {
  it('stays on when HOST is another address of 127.0.0.0/8 or ::1, and accepts that address as Host', async (t) => {
    for (const bind of ['127.0.0.2', '127.10.20.30', '::1']) {
      const gw = await gateway(t, { env: { HOST: bind } })
      const { port } = new URL(gw.url)
      const refused = await raw(gw, 'GET', '/v1/sessions', { ...auth, host: 'evil.example' })
      assert.equal(refused.status, 403, `HOST=${bind}`)
      assert.equal(refused.body.code, 'forbidden_host')
      const literal = bind.includes(':') ? `[${bind}]:${port}` : `${bind}:${port}`
      for (const host of [literal, `127.0.0.1:${port}`, `localhost:${port}`]) {
        assert.equal((await raw(gw, 'GET', '/v1/sessions', { ...auth, host })).status, 200, `HOST=${bind} Host: ${host}`)
      }
    }
  })
})
