/**
 * An upstream that dies partway through an answer (after its head, before
 * the declared Content-Length or the last chunk) must not leave the
 * sandboxed tool waiting: the proxy cuts the tool's connection, so the tool
 * sees a short body rather than a stall (ending it cleanly would pass the
 * truncated body off as whole), requests it pipelined behind are not left
 * hanging, and the tenant's slots are given back. A real proxy on its Unix
 * socket, a raw socket as the tool, and a raw TCP server as the upstream so
 * the bytes it sends before dying are exact.
 */
import assert from 'node:assert/strict'
import { EventEmitter, once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import net, { type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import pino from 'pino'
import { ConnectionSlots } from '../../src/net/connection-slots.js'
import { EgressProxy } from '../../src/sandbox/egress-proxy.js'
import { eventually } from '../support/waiters.js'
import { toolConnection } from '../support/egress-tool.js'

const PART = '0123456789'

/** What the upstream writes for each path; `cut` ones are followed by destroying its socket. */
const ANSWERS: Record<string, { head: string, body: string, cut: boolean }> = {
  '/cut-length': { head: 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n', body: PART, cut: true },
  '/cut-chunked': { head: 'HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n', body: `${PART.length.toString(16)}\r\n${PART}\r\n`, cut: true },
  '/whole': { head: 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\n', body: 'whole', cut: false }
}

/** What the tool's connection received, once it closed; fails after `ms` saying what had come by then. */
function closedWith (socket: net.Socket, ms: number): Promise<string> {
  const chunks: Buffer[] = []
  const text = (): string => Buffer.concat(chunks).toString('latin1')
  socket.on('data', (c: Buffer) => chunks.push(c))
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the tool's connection was not cut within ${ms} ms; it got: ${JSON.stringify(text())}`)), ms)
    socket.once('close', () => { clearTimeout(timer); resolve(text()) })
  })
}

describe('sandbox egress: an upstream that dies mid-answer', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cgw-egress-cut-'))
  const slots = new ConnectionSlots(8)
  /** Whose slots the next connection takes: each test has its own, so one's leak cannot fail another. */
  let tenant = ''
  /** Paths the upstream was asked for, and the upstream sockets that closed (by path). */
  const asked: string[] = []
  const upstreamClosed: string[] = []
  const arrived = new EventEmitter()
  let upstream: net.Server
  let port = 0
  let proxy: EgressProxy

  before(async () => {
    upstream = net.createServer((socket) => {
      socket.on('error', () => {})
      let head = ''
      const onData = (chunk: Buffer): void => {
        head += chunk.toString('latin1')
        if (!head.includes('\r\n\r\n')) return
        socket.removeListener('data', onData)
        const path = head.split(' ')[1] ?? ''
        asked.push(path)
        socket.once('close', () => upstreamClosed.push(path))
        arrived.emit('asked', path)
        const answer = ANSWERS[path.replace(/\?.*$/, '')]
        // Paths not in the table are held open: the answer never comes.
        if (answer === undefined) return
        const send = (): void => {
          socket.write(answer.head + answer.body, () => {
            if (answer.cut) socket.destroy()
            else socket.end()
          })
        }
        // `?after=/p`: answered only once the upstream was asked for /p, so that request is surely under way when this one dies.
        const awaited = /\?after=(.*)$/.exec(path)?.[1]
        if (awaited === undefined || asked.includes(awaited)) send()
        else arrived.on('asked', function onAsked (p: string) { if (p === awaited) { arrived.off('asked', onAsked); send() } })
      }
      socket.on('data', onData)
    })
    upstream.listen(0, '127.0.0.1')
    await once(upstream, 'listening')
    port = (upstream.address() as AddressInfo).port
    proxy = new EgressProxy({
      socketPath: join(dir, 'p.sock'),
      allow: [{ host: '127.0.0.1', port }],
      logger: pino({ level: 'silent' }),
      sessionId: 'sess-cut',
      slots: () => slots.take(tenant)
    })
  })

  after(async () => {
    await proxy.close()
    upstream.close()
    rmSync(dir, { recursive: true, force: true })
  })

  const connect = async (): Promise<net.Socket> => await toolConnection(proxy.socketPath)

  const get = (path: string): string => `GET http://127.0.0.1:${port}${path} HTTP/1.1\r\nHost: x\r\n\r\n`

  /** Splits what the tool got into the answer's head (lower case) and the bytes after it. */
  function split (got: string): { head: string, body: string } {
    const end = got.indexOf('\r\n\r\n')
    assert.ok(end >= 0, `an answer head came: ${JSON.stringify(got)}`)
    return { head: got.slice(0, end).toLowerCase(), body: got.slice(end + 4) }
  }

  it('cuts the tool\'s connection when the upstream dies short of its Content-Length', async () => {
    tenant = 'length'
    const s = await connect()
    try {
      const got = closedWith(s, 3000)
      s.write(get('/cut-length'))
      const { head, body } = split(await got)
      assert.match(head, /^http\/1\.1 200 /)
      assert.match(head, /\r\ncontent-length: 1000(\r\n|$)/)
      // The tool sees fewer bytes than declared, then the close: it can tell the body is short.
      assert.equal(body, PART)
    } finally {
      s.destroy()
    }
    await eventually(() => slots.count(tenant) === 0, 3000, 'the tenant\'s slots to be given back').catch(() => {})
    assert.equal(slots.count(tenant), 0, 'slots the tenant still holds')
  })

  it('cuts the tool\'s connection, without a last chunk, when a chunked upstream answer dies', async () => {
    tenant = 'chunked'
    const s = await connect()
    try {
      const got = closedWith(s, 3000)
      s.write(get('/cut-chunked'))
      const { head, body } = split(await got)
      assert.match(head, /\r\ntransfer-encoding: chunked(\r\n|$)/)
      assert.equal(body, `a\r\n${PART}\r\n`, 'the chunk that came, and no terminating 0-length chunk')
    } finally {
      s.destroy()
    }
    await eventually(() => slots.count(tenant) === 0, 3000, 'the tenant\'s slots to be given back').catch(() => {})
    assert.equal(slots.count(tenant), 0, 'slots the tenant still holds')
  })

  it('does not leave a request pipelined behind the cut answer waiting, and ends its upstream request', async () => {
    tenant = 'pipelined'
    const s = await connect()
    try {
      const got = closedWith(s, 3000)
      s.write(get('/cut-length?after=/held-behind') + get('/held-behind'))
      const { body } = split(await got)
      // Nothing of the answer behind may be passed off as the rest of the short one.
      assert.equal(body, PART)
    } finally {
      s.destroy()
    }
    await eventually(() => upstreamClosed.includes('/held-behind'), 3000, 'the upstream request pipelined behind to end').catch(() => {})
    assert.ok(upstreamClosed.includes('/held-behind'), 'the upstream request pipelined behind was ended')
    await eventually(() => slots.count(tenant) === 0, 3000, 'the tenant\'s slots to be given back').catch(() => {})
    assert.equal(slots.count(tenant), 0, 'slots the tenant still holds')
  })

  it('still ends a whole upstream answer cleanly, keeping the connection for the next request', async () => {
    tenant = 'whole'
    const s = await connect()
    try {
      const chunks: Buffer[] = []
      let closed = false
      s.on('data', (c: Buffer) => chunks.push(c))
      s.once('close', () => { closed = true })
      s.write(get('/whole') + get('/whole'))
      const twice = await eventually(() => {
        const text = Buffer.concat(chunks).toString('latin1')
        return (text.match(/\r\n\r\nwhole/g)?.length ?? 0) === 2 && text
      }, 3000, 'two whole answers')
      assert.equal(closed, false, 'the connection stayed open after whole answers')
      assert.equal(twice.split('HTTP/1.1 200').length, 3)
    } finally {
      s.destroy()
    }
    await eventually(() => slots.count(tenant) === 0, 3000, 'the tenant\'s slots to be given back').catch(() => {})
    assert.equal(slots.count(tenant), 0, 'slots the tenant still holds')
  })
})
