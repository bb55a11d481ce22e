/**
 * Every byte a sandboxed tool sends out passes through the gateway process:
 * each connection to its egress proxy, and each connection the proxy opens
 * on its behalf, is a file descriptor of the gateway, which every tenant
 * shares. These tests speak to the proxies the sandboxed launcher opens (on
 * their real Unix sockets, as the in-sandbox socat does) and check that one
 * tenant's tools, however many connections or pipelined requests they
 * open, hold at most its own share, and that another tenant is still served.
 */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import http from 'node:http'
import net, { type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { Writable } from 'node:stream'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import pino from 'pino'
import type { CliExit, CliSpawnSpec } from '../../src/cli/cli-handle.js'
import { EGRESS_SOCKET_INSIDE } from '../../src/sandbox/bwrap-spec.js'
import { noopMetrics, type SandboxRefusal } from '../../src/metrics/sink.js'
import { sandboxedLauncher } from '../../src/sandbox/sandboxed-launcher.js'
import { eventually } from '../support/gateway.js'

const LIMIT = 6

/** Reads from `socket` until `until` matches what came (or it closes); resolves with all of it. */
function readUntil (socket: net.Socket, until: RegExp): Promise<string> {
  let text = ''
  socket.setEncoding('latin1')
  return new Promise((resolve) => {
    const done = (): void => { socket.removeAllListeners('data'); resolve(text) }
    socket.on('data', (d: string) => { text += d; if (until.test(text)) done() })
    socket.once('close', done)
  })
}

describe('sandbox egress: connections per tenant', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cgw-egress-lim-'))
  const exits: Array<(exit: CliExit) => void> = []
  const sockets: net.Socket[] = []
  /** Upstream requests open now, and the most seen at once. */
  let open = 0
  let most = 0
  /** Upstream requests received in all. */
  let seen = 0
  const lines: string[] = []
  /** What the proxies told /metrics they refused, by kind. */
  const refused: SandboxRefusal[] = []
  const refusals = (): number => lines.filter((l) => l.includes('relay connections')).length
  /** Ends the answers the upstream is holding. */
  const held: http.ServerResponse[] = []
  let upstream: http.Server
  let port = 0
  let launch: ReturnType<typeof sandboxedLauncher>

  /** Starts a "CLI" (nothing runs: the inner launcher only records the spec) and returns its proxy's socket. */
  function start (sessionId: string, tenant: string): string {
    launch({
      command: '/bin/true', args: [], cwd: dir, env: {}, sessionId, tenant,
      sandbox: { tenantRoot: dir, configDir: dir, workdir: dir }
    }, {
      onLine: () => {}, onOversize: () => {}, onExit: () => {}
    })
    // The inner launcher below stored the bwrap spec: the proxy socket is what it binds at EGRESS_SOCKET_INSIDE.
    const spec = specs.at(-1)
    assert.ok(spec !== undefined)
    const at = spec.args.indexOf(EGRESS_SOCKET_INSIDE)
    return spec.args[at - 1] as string
  }
  const specs: CliSpawnSpec[] = []

  async function connectTo (socketPath: string): Promise<net.Socket> {
    const s = net.connect({ path: socketPath })
    sockets.push(s)
    s.on('error', () => {})
    await once(s, 'connect')
    return s
  }

  before(async () => {
    upstream = http.createServer((req, res) => {
      open++
      seen++
      most = Math.max(most, open)
      res.once('close', () => { open-- })
      if (req.url === '/hold') held.push(res)
      else res.end(`upstream ${req.url}`)
    })
    upstream.listen(0, '127.0.0.1')
    await once(upstream, 'listening')
    port = (upstream.address() as AddressInfo).port
    launch = sandboxedLauncher((spec, callbacks) => {
      specs.push(spec)
      exits.push(callbacks.onExit)
      return { pid: undefined, write: () => true, stop: async () => ({ code: 0, signal: null, stderrTail: [] }) }
    }, {
      bwrap: '/usr/bin/bwrap',
      socat: '/usr/bin/socat',
      system: [],
      cliDir: dir,
      egress: [{ host: '127.0.0.1', port }],
      socketDir: dir,
      credentials: 'env',
      apiPaths: [],
      pinUserSettings: false,
      strictMcpConfig: false,
      egressConnectionsPerTenant: LIMIT,
      metrics: { ...noopMetrics, sandboxRefused: (kind) => { refused.push(kind) } },
      logger: pino({ level: 'warn' }, new Writable({ write (chunk, _enc, cb) { lines.push(String(chunk)); cb() } }))
    })
  })

  after(async () => {
    for (const res of held) res.end()
    for (const s of sockets) s.destroy()
    for (const exit of exits) exit({ code: 0, signal: null, stderrTail: [] })
    upstream.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it("refuses a tenant's connection past its share, across its sessions, and still serves another tenant", async () => {
    const a1 = start('sess-a1', 'tenant-a')
    const a2 = start('sess-a2', 'tenant-a')
    const b1 = start('sess-b1', 'tenant-b')
    // Tunnels held open: each is one connection in and one out.
    const tunnels: net.Socket[] = []
    for (let i = 0; i < LIMIT; i++) {
      const s = await connectTo(i % 2 === 0 ? a1 : a2)
      s.write(`CONNECT 127.0.0.1:${port} HTTP/1.1\r\nHost: x\r\n\r\n`)
      const answer = await readUntil(s, /\r\n\r\n/)
      if (!answer.startsWith('HTTP/1.1 200')) {
        // The share is reached: this one was refused, and so is any further one of the tenant's.
        assert.ok(i >= LIMIT / 2, `refused already at connection ${i + 1}: ${answer}`)
        break
      }
      tunnels.push(s)
    }
    const extra = await connectTo(a2)
    extra.write(`GET http://127.0.0.1:${port}/more HTTP/1.1\r\nHost: x\r\n\r\n`)
    assert.match(await readUntil(extra, /\r\n\r\n|$^/), /^HTTP\/1\.1 503 /, 'a connection past the tenant\'s share is refused')
    assert.ok(refused.includes('connections'), `counted in /metrics as connections: ${refused.join(' ')}`)
    assert.ok(!refused.includes('egress'), 'not as a destination refused')

    const other = await connectTo(b1)
    other.write(`GET http://127.0.0.1:${port}/b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`)
    assert.match(await readUntil(other, /upstream \/b/), /^HTTP\/1\.1 200 OK[\s\S]*upstream \/b$/, 'another tenant is served')

    // Closing one of tenant A's gives its slot back.
    for (const s of tunnels) s.destroy()
    await eventually(async () => {
      const again = await connectTo(a1)
      again.write(`GET http://127.0.0.1:${port}/again HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`)
      return /upstream \/again/.test(await readUntil(again, /upstream \/again/))
    }, 5000, 'tenant A served again once its connections closed')
  })

  it('does not open an upstream request per pipelined request past the share', async () => {
    const c1 = start('sess-c1', 'tenant-c')
    const s = await connectTo(c1)
    most = 0
    const asked = seen
    const refusedBefore = refusals()
    const n = 40
    s.write(Array.from({ length: n }, () => `GET http://127.0.0.1:${port}/hold HTTP/1.1\r\nHost: x\r\n\r\n`).join(''))
    // Done once the proxy has sent each request upstream or refused it (logged).
    await eventually(() => (seen - asked) + (refusals() - refusedBefore) === n, 10_000, `the proxy to pass on or refuse all ${n} pipelined requests`)
    for (const res of held.splice(0)) res.end('done')
    s.destroy()
    assert.ok(most <= LIMIT, `${most} upstream requests open at once for one tenant (share ${LIMIT})`)
  })
})
