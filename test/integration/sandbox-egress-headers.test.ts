/**
 * What the egress proxy sends upstream on a sandboxed tool's behalf, and
 * what stays out of the sandbox. A plain-HTTP request goes where its
 * absolute-form target says, and its Host header says the same (a tool
 * cannot address another virtual host of an allowed server). With the API
 * credential held (SANDBOX_CREDENTIALS=proxy), the operator's
 * ANTHROPIC_CUSTOM_HEADERS (often an LLM gateway's credential) are held
 * with it: added by the proxy to the API requests, never in the sandbox.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import http from 'node:http'
import net, { type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import pino from 'pino'
import { EgressProxy } from '../../src/sandbox/egress-proxy.js'
import { gateway, suiteScope, type TestClient } from '../support/gateway.js'
import { run, sandboxUnavailable } from '../support/sandbox.js'

const unavailable = sandboxUnavailable()
const GATEWAY_SECRET = `gw-secret-${randomBytes(10).toString('hex')}`
const KEY = `sk-ant-test-${randomBytes(10).toString('hex')}`

describe('sandbox egress: headers sent upstream', () => {
  const scope = suiteScope()
  const seen: http.IncomingHttpHeaders[] = []
  let api: http.Server
  let port = 0

  before(async () => {
    api = http.createServer((req, res) => {
      seen.push(req.headers)
      // Names what came, never echoes a secret back into the sandbox.
      res.end(`host=${req.headers.host} custom=${req.headers['x-gateway-auth'] === GATEWAY_SECRET ? 'real' : String(req.headers['x-gateway-auth'])} key=${req.headers['x-api-key'] === KEY ? 'real' : 'other'} team=${String(req.headers['x-team'])}`)
    })
    api.listen(0, '127.0.0.1')
    await once(api, 'listening')
    port = (api.address() as AddressInfo).port
  })
  after(() => { api.close() })

  it('sends a plain-HTTP request with the Host of its target, not the one the tool wrote', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cgw-egress-host-'))
    const proxy = new EgressProxy({ socketPath: join(dir, 'p.sock'), allow: [{ host: '127.0.0.1', port }], logger: pino({ level: 'silent' }), sessionId: 's' })
    try {
      const s = net.connect({ path: proxy.socketPath })
      s.setEncoding('latin1')
      let text = ''
      s.on('data', (d: string) => { text += d })
      s.write(`GET http://127.0.0.1:${port}/x HTTP/1.1\r\nHost: internal.example:8080\r\nConnection: close\r\n\r\n`)
      await once(s, 'close')
      assert.match(text, new RegExp(`\\r\\n\\r\\nhost=127\\.0\\.0\\.1:${port} `))
    } finally {
      await proxy.close()
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('holds ANTHROPIC_CUSTOM_HEADERS with the key: not in the sandbox, on every API request', { skip: unavailable ?? false }, async () => {
    const gw = await gateway(scope, {
      env: { SANDBOX: 'bwrap', CLAUDE_ARGS_EXTRA: '', ANTHROPIC_API_KEY: KEY },
      parts: {
        env: {
          PATH: process.env.PATH ?? '',
          ANTHROPIC_BASE_URL: `http://127.0.0.1:${port}`,
          ANTHROPIC_CUSTOM_HEADERS: `X-Gateway-Auth: ${GATEWAY_SECRET}\nX-Team: blue`
        }
      }
    })
    const created = await gw.createSession({})
    const holder: TestClient = await gw.connect(created.id)
    await holder.waitFor((f) => f.subtype === 'hello')
    const out = await run(holder, `cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c -F '${GATEWAY_SECRET}'; ` +
      'curl -sS -m 5 -H "x-api-key: $ANTHROPIC_API_KEY" "$ANTHROPIC_BASE_URL/v1/models"; echo')
    assert.equal(out, `0\nhost=127.0.0.1:${port} custom=real key=real team=blue\n[exit 0]`)
  })
})
