/**
 * A sandboxed tool may pipeline plain-HTTP requests on one connection to its
 * egress proxy (written back to back before any answer is read), as HTTP/1.1
 * allows. Each must get its own answer, in the order asked, whether passed
 * on or refused, and each must give back the tenant's connection slot it
 * took once its answer is done. These tests speak to a real proxy on its
 * Unix socket with a raw socket, in front of a real upstream HTTP server.
 */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import http from 'node:http'
import net, { type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import pino from 'pino'
import { ConnectionSlots } from '../../src/net/connection-slots.js'
import { EgressProxy } from '../../src/sandbox/egress-proxy.js'
import { eventually } from '../support/gateway.js'
import { toolConnection } from '../support/egress-tool.js'


interface Answer { status: number, body: string }

/**
 * Reads answers from `socket` until `count` complete ones came or it closed,
 * framed by their Content-Length (the upstream and the proxy's own answers
 * all carry one); resolves with those that came whole.
 */
function readAnswers (socket: net.Socket, count: number): Promise<Answer[]> {
  let buffered = Buffer.alloc(0)
  const answers: Answer[] = []
  return new Promise((resolve, reject) => {
    const done = (): void => { socket.removeListener('data', onData); resolve(answers) }
    const onData = (chunk: Buffer): void => {
      buffered = Buffer.concat([buffered, chunk])
      for (;;) {
        const end = buffered.indexOf('\r\n\r\n')
        if (end < 0) break
        const head = buffered.subarray(0, end).toString('latin1')
        const length = /\r\ncontent-length: *(\d+)/i.exec(head)
        if (length === null) { reject(new Error(`answer without Content-Length: ${head}`)); return }
        const total = end + 4 + Number(length[1])
        if (buffered.length < total) break
        answers.push({ status: Number(head.split(' ')[1]), body: buffered.subarray(end + 4, total).toString('latin1') })
        buffered = buffered.subarray(total)
      }
      if (answers.length >= count) done()
    }
    socket.on('data', onData)
    socket.once('close', done)
  })
}

describe('sandbox egress: pipelined plain-HTTP requests', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cgw-egress-pipe-'))
  const slots = new ConnectionSlots(8)
  /** Whose slots the next connection takes: each test has its own, so one's leak cannot fail another. */
  let tenant = ''
  /** Paths the upstream was asked for, in order. */
  const asked: string[] = []
  /** Upstream answers held open (paths under /hold/), and those of them that closed. */
  const held: http.ServerResponse[] = []
  const heldClosed: string[] = []
  let upstream: http.Server
  let port = 0
  /** Allowed, but nothing listens there: each request to it fails upstream (502). */
  let deadPort = 0
  let proxy: EgressProxy

  before(async () => {
    upstream = http.createServer((req, res) => {
      const path = req.url ?? ''
      asked.push(path)
      if (!path.startsWith('/hold/')) {
        res.end(`upstream ${path}`)
        return
      }
      held.push(res)
      res.once('close', () => heldClosed.push(path))
      res.writeHead(200, { 'content-type': 'text/event-stream' }).write('data: open\n\n')
    })
    upstream.listen(0, '127.0.0.1')
    await once(upstream, 'listening')
    port = (upstream.address() as AddressInfo).port
    const dead = net.createServer().listen(0, '127.0.0.1')
    await once(dead, 'listening')
    deadPort = (dead.address() as AddressInfo).port
    dead.close()
    await once(dead, 'close')
    proxy = new EgressProxy({
      socketPath: join(dir, 'p.sock'),
      allow: [{ host: '127.0.0.1', port }, { host: '127.0.0.1', port: deadPort }],
      logger: pino({ level: 'silent' }),
      sessionId: 'sess-pipe',
      slots: () => slots.take(tenant)
    })
  })

  after(async () => {
    for (const res of held) res.end()
    await proxy.close()
    upstream.close()
    rmSync(dir, { recursive: true, force: true })
  })

  const connect = async (): Promise<net.Socket> => await toolConnection(proxy.socketPath)

  const get = (target: string): string => `GET ${target} HTTP/1.1\r\nHost: x\r\n\r\n`

  it('answers each of two pipelined requests, in order', async () => {
    tenant = 'two'
    const s = await connect()
    try {
      const answers = readAnswers(s, 2)
      s.write(get(`http://127.0.0.1:${port}/a`) + get(`http://127.0.0.1:${port}/b`))
      assert.deepEqual(await answers, [
        { status: 200, body: 'upstream /a' },
        { status: 200, body: 'upstream /b' }
      ])
    } finally {
      s.destroy()
    }
  })

  it('keeps the order when a refused request is pipelined between two allowed ones', async () => {
    tenant = 'refused-between'
    const s = await connect()
    try {
      const answers = readAnswers(s, 3)
      s.write(get(`http://127.0.0.1:${port}/a`) + get('http://203.0.113.9/secret') + get(`http://127.0.0.1:${port}/c`))
      const got = await answers
      assert.deepEqual(got.map((a) => a.status), [200, 403, 200], JSON.stringify(got))
      assert.equal(got[0]?.body, 'upstream /a')
      assert.equal(got[1]?.body, 'egress not allowed by the gateway sandbox\n')
      assert.equal(got[2]?.body, 'upstream /c')
    } finally {
      s.destroy()
    }
  })

  it('keeps the order when a request whose upstream fails is pipelined between two allowed ones', async () => {
    tenant = 'failed-between'
    const s = await connect()
    try {
      const answers = readAnswers(s, 3)
      s.write(get(`http://127.0.0.1:${port}/a`) + get(`http://127.0.0.1:${deadPort}/dead`) + get(`http://127.0.0.1:${port}/c`))
      const got = await answers
      assert.deepEqual(got.map((a) => a.status), [200, 502, 200], JSON.stringify(got))
      assert.equal(got[2]?.body, 'upstream /c')
    } finally {
      s.destroy()
    }
  })

  it("gives back the tenant's slot of each pipelined request once its answer is done", async () => {
    tenant = 'rounds'
    const s = await connect()
    try {
      // More requests than the share, in three rounds: each round can only be served if the last gave its slots back.
      for (let round = 0; round < 3; round++) {
        const answers = readAnswers(s, 4)
        s.write([1, 2, 3, 4].map((i) => get(`http://127.0.0.1:${port}/r${round}-${i}`)).join(''))
        assert.deepEqual((await answers).map((a) => a.body), [1, 2, 3, 4].map((i) => `upstream /r${round}-${i}`))
        // Only the connection itself still holds a slot.
        await eventually(() => slots.count(tenant) === 1, 5000, `the slots of round ${round}'s requests to be given back`)
      }
    } finally {
      s.destroy()
    }
    await eventually(() => slots.count(tenant) === 0, 5000, 'the connection\'s slot to be given back once it closed')
  })

  it('ends the upstream requests and gives back the slots of pipelined requests still waiting when the tool goes away', async () => {
    tenant = 'gone'
    const s = await connect()
    s.write(get(`http://127.0.0.1:${port}/hold/1`) + get(`http://127.0.0.1:${port}/hold/2`) + get(`http://127.0.0.1:${port}/hold/3`))
    await eventually(() => ['/hold/1', '/hold/2', '/hold/3'].every((p) => asked.includes(p)), 5000, 'the upstream to be asked for all three')
    s.destroy()
    // Waits for the condition, then says what is missing if it never came.
    await eventually(() => heldClosed.length === 3, 5000, 'every upstream request to end').catch(() => {})
    assert.deepEqual([...heldClosed].sort(), ['/hold/1', '/hold/2', '/hold/3'], 'upstream requests ended with the tool\'s connection')
    await eventually(() => slots.count(tenant) === 0, 5000, 'the tenant\'s slots to be given back').catch(() => {})
    assert.equal(slots.count(tenant), 0, 'slots the tenant still holds')
  })
})
