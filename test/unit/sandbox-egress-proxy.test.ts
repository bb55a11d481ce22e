// The egress proxy (src/sandbox/egress-proxy.ts) on its Unix socket, spoken
// to as the in-sandbox socat would: CONNECT and absolute-form requests to an
// allowed destination pass, anything else gets 403 and a log line naming the
// session; closing it ends open tunnels.
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import http from 'node:http'
import net, { type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { after, before, describe, it } from 'node:test'
import pino from 'pino'
import { EgressProxy } from '../../src/sandbox/egress-proxy.js'

/** Writes `request` to the proxy socket; resolves with everything it answered until it closed (or `until` matched). */
async function exchange (socketPath: string, request: string, until?: RegExp): Promise<{ text: string, socket: net.Socket }> {
  const socket = net.connect({ path: socketPath })
  let text = ''
  socket.setEncoding('latin1')
  await once(socket, 'connect')
  socket.write(request)
  await new Promise<void>((resolve) => {
    socket.on('data', (d: string) => { text += d; if (until?.test(text) === true) resolve() })
    socket.on('close', () => resolve())
  })
  return { text, socket }
}

describe('EgressProxy', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cgw-egress-test-'))
  const socketPath = join(dir, 'p.sock')
  const lines: any[] = []
  const logger = pino({ level: 'info' }, new Writable({ write (chunk, _enc, cb) { lines.push(JSON.parse(String(chunk))); cb() } }))
  let upstream: http.Server
  let allowedPort = 0
  let otherPort = 0
  let other: net.Server
  let proxy: EgressProxy

  before(async () => {
    upstream = http.createServer((req, res) => res.end(`upstream ${req.method} ${req.url} host=${req.headers.host} proxy-auth=${String(req.headers['proxy-authorization'])}`))
    upstream.listen(0, '127.0.0.1')
    await once(upstream, 'listening')
    allowedPort = (upstream.address() as AddressInfo).port
    other = net.createServer((s) => s.end('should never be reached'))
    other.listen(0, '127.0.0.1')
    await once(other, 'listening')
    otherPort = (other.address() as AddressInfo).port
    proxy = new EgressProxy({ socketPath, allow: [{ host: '127.0.0.1', port: allowedPort }], logger, sessionId: 'sess-1' })
  })

  after(async () => {
    await proxy.close()
    upstream.close()
    other.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('tunnels CONNECT to the allowed host:port', async () => {
    const { text, socket } = await exchange(socketPath, `CONNECT 127.0.0.1:${allowedPort} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /in-tunnel HTTP/1.1\r\nHost: api\r\nConnection: close\r\n\r\n`)
    socket.destroy()
    assert.match(text, /^HTTP\/1\.1 200 Connection Established\r\n\r\nHTTP\/1\.1 200 OK/)
    assert.match(text, /upstream GET \/in-tunnel host=api/)
  })

  it('refuses CONNECT anywhere else with 403 and logs the destination with the session id', async () => {
    for (const target of [`127.0.0.1:${otherPort}`, `localhost:${allowedPort}`, '127.0.0.1:6379', `127.0.0.1`, 'garbage']) {
      const { text } = await exchange(socketPath, `CONNECT ${target} HTTP/1.1\r\nHost: x\r\n\r\n`)
      assert.match(text, /^HTTP\/1\.1 403 Forbidden\r\n/, target)
      assert.doesNotMatch(text, /should never be reached/)
    }
    const refusal = lines.find((l) => l.msg.includes('sandbox egress refused') && l.destination === '127.0.0.1:6379')
    assert.equal(refusal?.session, 'sess-1')
  })

  it('forwards absolute-form plain HTTP to the allowed destination only, without the proxy headers', async () => {
    const ok = await exchange(socketPath, `GET http://127.0.0.1:${allowedPort}/v1/x?y=1 HTTP/1.1\r\nHost: 127.0.0.1:${allowedPort}\r\nProxy-Authorization: Basic eA==\r\nConnection: close\r\n\r\n`)
    assert.match(ok.text, /^HTTP\/1\.1 200 OK/)
    assert.match(ok.text, /upstream GET \/v1\/x\?y=1 host=127\.0\.0\.1:\d+ proxy-auth=undefined/)
    const refused = await exchange(socketPath, `GET http://127.0.0.1:${otherPort}/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`)
    assert.match(refused.text, /^HTTP\/1\.1 403 Forbidden/)
    const originForm = await exchange(socketPath, 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
    assert.match(originForm.text, /^HTTP\/1\.1 403 Forbidden/)
  })

  it('ends open tunnels when closed (the CLI exited)', async () => {
    const p2 = new EgressProxy({ socketPath: join(dir, 'p2.sock'), allow: [{ host: '127.0.0.1', port: allowedPort }], logger, sessionId: 'sess-2' })
    const socket = net.connect({ path: join(dir, 'p2.sock') })
    await once(socket, 'connect')
    socket.write(`CONNECT 127.0.0.1:${allowedPort} HTTP/1.1\r\n\r\n`)
    await once(socket, 'data')
    const closed = once(socket, 'close')
    await p2.close()
    await closed
    await assert.rejects(exchange(join(dir, 'p2.sock'), 'x'), /ENOENT|ECONNREFUSED/)
  })
})
