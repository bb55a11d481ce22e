/**
 * A name on the egress allowlist is resolved by the gateway, at each
 * connection. Whoever controls that name's DNS (or rebinds it between two
 * lookups) must not turn it into a way to the gateway's own loopback (its
 * ports, Redis) or the cloud metadata address: a name that resolves there is
 * refused (403), and the address checked is the address connected to. An
 * operator who means loopback writes `localhost` or the address itself.
 * Here the machine's host name stands for such a name when it resolves to a
 * loopback address (as in most containers' /etc/hosts).
 */
import assert from 'node:assert/strict'
import { lookup } from 'node:dns/promises'
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import http from 'node:http'
import net, { type AddressInfo } from 'node:net'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import pino from 'pino'
import { EgressProxy } from '../../src/sandbox/egress-proxy.js'

const NAME = hostname().toLowerCase()
const loopbackName = await lookup(NAME).then((a) => a.address.startsWith('127.'), () => false)

async function exchange (socketPath: string, request: string): Promise<string> {
  const s = net.connect({ path: socketPath })
  s.setEncoding('latin1')
  let text = ''
  s.on('data', (d: string) => { text += d; if (/\r\n\r\n/.test(text) && text.startsWith('HTTP/1.1 200 Connection')) s.destroy() })
  s.write(request)
  await once(s, 'close')
  return text
}

describe('sandbox egress: names that resolve to loopback', { skip: loopbackName ? false : `${NAME} does not resolve to a loopback address here` }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'cgw-egress-dns-'))
  let reached = 0
  let upstream: http.Server
  let port = 0
  let proxy: EgressProxy

  before(async () => {
    upstream = http.createServer((_req, res) => { reached++; res.end('upstream reached') })
    upstream.listen(0, '127.0.0.1')
    await once(upstream, 'listening')
    port = (upstream.address() as AddressInfo).port
    proxy = new EgressProxy({
      socketPath: join(dir, 'p.sock'),
      allow: [{ host: NAME, port }, { host: 'localhost', port }],
      logger: pino({ level: 'silent' }),
      sessionId: 's'
    })
  })
  after(async () => {
    await proxy.close()
    upstream.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('refuses CONNECT and plain HTTP to an allowed name that resolves to loopback', async () => {
    assert.match(await exchange(proxy.socketPath, `CONNECT ${NAME}:${port} HTTP/1.1\r\nHost: x\r\n\r\n`), /^HTTP\/1\.1 403 /)
    assert.match(await exchange(proxy.socketPath, `GET http://${NAME}:${port}/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`), /^HTTP\/1\.1 403 /)
    assert.equal(reached, 0, 'nothing reached the loopback server')
  })

  it('still lets an operator allow loopback by saying so (localhost)', async () => {
    assert.match(await exchange(proxy.socketPath, `GET http://localhost:${port}/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`), /^HTTP\/1\.1 200 OK[\s\S]*upstream reached$/)
  })
})
