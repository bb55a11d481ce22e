/**
 * The web console as the gateway serves it (src/routes/console.ts), built by
 * scripts/build-console.mjs into a folder of the test's own: `/` and the
 * assets index.html names answer without credentials, with the strict
 * Content-Security-Policy and cache headers, and nothing else of the folder is
 * served; the page's own origin passes the Origin check for the API and the
 * WebSocket (browser auth by subprotocol) while other origins stay refused;
 * and a gateway whose console was not built says so at `/` with 503.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { before, describe, it } from 'node:test'
import WebSocket from 'ws'
import { buildConsole } from '../../scripts/build-console.mjs'
import { TOKEN_A, type TestGateway, gateway, suiteScope } from '../support/gateway.js'

/** Status of a WebSocket upgrade with browser-style auth (subprotocols) from `origin`: 101 when it opens. */
function browserUpgrade (url: string, origin: string, protocols: string[]): Promise<{ status: number, protocol: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols, { origin })
    ws.once('open', () => { resolve({ status: 101, protocol: ws.protocol }); ws.terminate() })
    ws.once('unexpected-response', (_req, res) => { resolve({ status: res.statusCode ?? 0, protocol: '' }); res.resume(); ws.terminate() })
    ws.once('error', reject)
  })
}

function csp (res: Response): Map<string, string> {
  const header = res.headers.get('content-security-policy') ?? ''
  return new Map(header.split(';').map((d) => d.trim()).filter((d) => d !== '').map((d) => {
    const [name, ...values] = d.split(/\s+/)
    return [name as string, values.join(' ')]
  }))
}

describe('web console: built', () => {
  const scope = suiteScope()
  let gw: TestGateway
  let dir: string
  let html: string
  let assets: string[]
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'cgw-console-'))
    scope.after(() => rmSync(dir, { recursive: true, force: true }))
    await buildConsole({ outDir: dir })
    // Something that must never be served, next to the build.
    writeFileSync(join(dir, 'secret.txt'), 'not for the web')
    writeFileSync(join(dir, '.env'), 'TOKEN=x')
    gw = await gateway(scope, { parts: { consoleDir: dir } })
    const res = await fetch(`${gw.url}/`)
    html = await res.text()
    assets = [...html.matchAll(/(?:src|href)="(\/console\/[^"]+)"/g)].map((m) => m[1] as string)
  })

  it('serves index.html at / without credentials, with a strict CSP and revalidation', async () => {
    const res = await fetch(`${gw.url}/`)
    assert.equal(res.status, 200)
    assert.match(res.headers.get('content-type') ?? '', /^text\/html/)
    assert.equal(res.headers.get('cache-control'), 'no-cache')
    assert.ok(res.headers.get('etag') !== null, 'an ETag to revalidate with')
    const policy = csp(res)
    assert.equal(policy.get('default-src'), "'none'")
    assert.equal(policy.get('script-src'), "'self'")
    assert.equal(policy.get('style-src'), "'self'")
    assert.equal(policy.get('frame-ancestors'), "'none'")
    assert.equal(policy.get('form-action'), "'none'")
    const { host } = new URL(gw.url)
    assert.equal(policy.get('connect-src'), `'self' ws://${host} wss://${host}`)
    assert.ok(![...policy.values()].some((v) => v.includes('unsafe')), 'no unsafe-inline or unsafe-eval')
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff')
    assert.equal(res.headers.get('x-frame-options'), 'DENY')
    // No inline script or style for the CSP to block: everything comes from /console/.
    assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/)
    assert.doesNotMatch(html, /<style|\sstyle=/)
    assert.deepEqual(assets.map((a) => a.replace(/\?v=[0-9a-f]+$/, '')).sort(), ['/console/app.js', '/console/styles.css'])
  })

  it('serves the assets index.html names, versioned ones cached for good, others revalidated', async () => {
    for (const asset of assets) {
      const res = await fetch(gw.url + asset)
      assert.equal(res.status, 200, asset)
      assert.match(asset, /\?v=[0-9a-f]{12}$/)
      assert.equal(res.headers.get('cache-control'), 'public, max-age=31536000, immutable', asset)
      assert.match(res.headers.get('content-type') ?? '', asset.includes('.js') ? /javascript/ : /^text\/css/)
      assert.ok(csp(res).has('default-src'), `${asset} has the CSP`)
      assert.ok((await res.text()).length > 1000, `${asset} has content`)
    }
    const plain = await fetch(`${gw.url}/console/app.js`)
    assert.equal(plain.status, 200)
    assert.equal(plain.headers.get('cache-control'), 'no-cache')
    // A changed bundle gets a new URL: the version is the content's hash.
    const version = /app\.js\?v=([0-9a-f]+)/.exec(html)?.[1]
    const { createHash } = await import('node:crypto')
    assert.equal(createHash('sha256').update(Buffer.from(await plain.arrayBuffer())).digest('hex').slice(0, 12), version)
  })

  it('serves nothing else: other files, dot files, traversal and directories are 404', async () => {
    for (const path of ['/console/secret.txt', '/console/.env', '/console/index.html', '/console/', '/console/..%2fpackage.json',
      '/console/%2e%2e/%2e%2e/package.json', '/console/app.js%00', '/index.html', '/app.js']) {
      const res = await fetch(gw.url + path)
      assert.equal(res.status, 404, path)
      const text = await res.text()
      assert.doesNotMatch(text, /not for the web|TOKEN=x|"name"/, path)
    }
  })

  it('needs no credentials for the console, and still needs them for the API', async () => {
    assert.equal((await fetch(`${gw.url}/`, { headers: { authorization: 'Bearer wrong-token-0123456789' } })).status, 200)
    assert.equal((await fetch(`${gw.url}/v1/sessions`)).status, 401)
  })

  it('lets the page\'s own origin call the API and open a WebSocket by subprotocol; other origins stay refused', async () => {
    const { host, port } = new URL(gw.url)
    const own = `http://${host}`
    const id = (await gw.createSession()).id
    const rest = await fetch(`${gw.url}/v1/sessions`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN_A}`, origin: own, 'content-type': 'application/json' }, body: '{}' })
    assert.equal(rest.status, 201)
    const ws = `${gw.wsUrl}/v1/sessions/${id}/ws`
    assert.deepEqual(await browserUpgrade(ws, own, ['claude-gateway.v1', `bearer.${TOKEN_A}`]), { status: 101, protocol: 'claude-gateway.v1' })
    // Same host name on another port, another scheme's default port, another name: not this gateway.
    for (const origin of [`http://127.0.0.1:${Number(port) + 1}`, 'http://127.0.0.1', `http://localhost:${port}`, 'https://evil.example', 'null']) {
      assert.equal((await browserUpgrade(ws, origin, ['claude-gateway.v1', `bearer.${TOKEN_A}`])).status, 403, origin)
      const refused = await fetch(`${gw.url}/v1/sessions`, { headers: { authorization: `Bearer ${TOKEN_A}`, origin } })
      assert.equal(refused.status, 403, origin)
      assert.equal((await refused.json()).code, 'forbidden_origin')
    }
    // The page's origin still needs a token.
    assert.equal((await browserUpgrade(ws, own, ['claude-gateway.v1'])).status, 401)
    assert.equal((await fetch(`${gw.url}/v1/sessions`, { headers: { origin: own } })).status, 401)
  })
})

describe('web console: not built', () => {
  it('answers / with 503 saying how to build it; the API works', async (t) => {
    const empty = mkdtempSync(join(tmpdir(), 'cgw-console-empty-'))
    t.after(() => rmSync(empty, { recursive: true, force: true }))
    const gw = await gateway(t, { parts: { consoleDir: empty } })
    const res = await fetch(`${gw.url}/`)
    assert.equal(res.status, 503)
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain/)
    assert.match(await res.text(), /npm run build/)
    assert.equal((await fetch(`${gw.url}/console/app.js`)).status, 404)
    assert.equal((await gw.request('GET', '/v1/sessions')).status, 200)
  })
})
