/**
 * WebhookNotifier against a real HTTP receiver (node:http on a free
 * loopback port): what arrives is signed as documented, a receiver that is
 * down or answers 503/429 gets retries after growing delays (Retry-After
 * honoured, capped) and then the delivery, other 4xx are not retried, a
 * session's deliveries keep their order without holding back other
 * sessions, a full queue drops its oldest, and close cuts what hangs.
 * Real time with short configured delays; every wait is on a request
 * arriving or a log line being written, never a sleep.
 */
import assert from 'node:assert/strict'
import { createHmac } from 'node:crypto'
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Writable } from 'node:stream'
import { describe, it } from 'node:test'
import type { TestContext } from 'node:test'
import pino from 'pino'
import { WEBHOOK_EVENT_TYPES } from '../../src/webhooks/webhook-event-types.js'
import { type WebhookNotifierOptions, WebhookNotifier } from '../../src/webhooks/webhook-notifier.js'
import { verifyWebhook } from '../../src/webhooks/signature.js'
import { classify, parseRetryAfter } from '../../src/webhooks/webhook-sender.js'
import { eventually } from '../support/gateway.js'
import { Waiters } from '../support/waiters.js'

const SECRET = 'whsec-unit-0123456789abcdef0123456789'
const WAIT_MS = 10_000

interface Received {
  headers: IncomingMessage['headers']
  body: string
  /** performance.now() when the body was complete. */
  at: number
  /** The parsed body. */
  json: any
  res: ServerResponse
  /** Whether the request's connection closed before it was answered. */
  cutOff: boolean
}

/** What the receiver does with the n-th request (0-based): a status (and headers), or hang (answer later with `answer`). */
type Behaviour = (n: number, r: Received) => { status: number, headers?: Record<string, string> } | 'hang'

/** A real HTTP receiver that records every request and lets a test wait for them. */
class Receiver {
  readonly requests: Received[] = []
  readonly waiters = new Waiters()
  behaviour: Behaviour

  private constructor (readonly server: Server, behaviour: Behaviour) {
    this.behaviour = behaviour
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8')
        const r: Received = { headers: req.headers, body, at: performance.now(), json: JSON.parse(body), res, cutOff: false }
        res.on('close', () => { if (!res.writableEnded) r.cutOff = true; this.waiters.wake() })
        this.requests.push(r)
        const what = this.behaviour(this.requests.length - 1, r)
        if (what !== 'hang') res.writeHead(what.status, what.headers).end('ok')
        this.waiters.wake()
      })
    })
  }

  static async start (t: TestContext, behaviour: Behaviour = () => ({ status: 200 }), port = 0): Promise<Receiver> {
    const server = createServer()
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', resolve))
    const receiver = new Receiver(server, behaviour)
    t.after(() => receiver.stop())
    return receiver
  }

  get url (): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`
  }

  /** Resolves once `count` requests arrived (or `check` holds). */
  async received (count: number): Promise<Received[]> {
    return await this.waiters.until(() => this.requests.length >= count && this.requests, WAIT_MS,
      `${count} webhook requests`, () => `${this.requests.length} arrived: ${this.requests.map((r) => r.json.type).join(' ')}`)
  }

  async stop (): Promise<void> {
    this.server.closeAllConnections()
    await new Promise((resolve) => this.server.close(resolve))
  }
}

/** A pino logger writing JSON lines into `lines`, waking `waiters` on each. */
function capturedLogger (): { logger: pino.Logger, lines: any[], text: () => string, until: (check: () => any, what: string) => Promise<any> } {
  const lines: any[] = []
  const raw: string[] = []
  const waiters = new Waiters()
  const stream = new Writable({
    write (chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n').filter((l) => l !== '')) {
        raw.push(line)
        lines.push(JSON.parse(line))
      }
      waiters.wake()
      done()
    }
  })
  return {
    logger: pino({ level: 'debug' }, stream),
    lines,
    text: () => raw.join('\n'),
    until: async (check, what) => await waiters.until(check, WAIT_MS, what, () => `log: ${raw.slice(-5).join('\n')}`)
  }
}

function notifier (t: TestContext, url: string, options: Partial<WebhookNotifierOptions> = {}): WebhookNotifier {
  const n = new WebhookNotifier({
    url,
    secret: SECRET,
    events: WEBHOOK_EVENT_TYPES,
    timeoutMs: 5_000,
    maxAttempts: 5,
    retryBaseMs: 40,
    retryMaxMs: 5_000,
    concurrency: 4,
    queueMax: 100,
    logger: pino({ level: 'silent' }),
    ...options
  })
  t.after(() => n.close(100))
  return n
}

/** A turn.finished for `session` whose seq tells deliveries apart. */
function turn (n: WebhookNotifier, seq: number, session = 'sess-a'): void {
  n.turnFinished({ sessionId: session, tenant: 'tenant-a' }, { subtype: 'success', isError: false, durationMs: 5, totalCostUsd: 0.01, result: `turn ${seq}`, seq })
}

/** A port nothing listens on (bound, then closed). */
async function freePort (): Promise<number> {
  const s = createServer()
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve))
  const { port } = s.address() as AddressInfo
  await new Promise((resolve) => s.close(resolve))
  return port
}

const retryLines = (lines: any[]): any[] => lines.filter((l) => l.msg === 'webhook attempt failed; retrying')

describe('webhook delivery', () => {
  it('signs each request as documented: HMAC-SHA256 of "<timestamp>.<raw body>" in Webhook-Signature, with id and timestamp headers', async (t) => {
    const receiver = await Receiver.start(t)
    const n = notifier(t, receiver.url)
    n.permissionRequested({ sessionId: 'sess-a', tenant: 'tenant-a' }, { requestId: 'req-1', toolName: 'Bash', input: { command: 'ls' }, seq: 3 })
    const [r] = await receiver.received(1) as [Received]
    const ts = r.headers['webhook-timestamp'] as string
    assert.match(ts, /^\d+$/)
    assert.ok(Math.abs(Number(ts) - Date.now() / 1000) < 60, 'a current Unix time in seconds')
    const expected = 'v1=' + createHmac('sha256', SECRET).update(`${ts}.${r.body}`).digest('hex')
    assert.equal(r.headers['webhook-signature'], expected)
    assert.equal(verifyWebhook({ secret: SECRET, timestamp: ts, signature: r.headers['webhook-signature'] as string, body: r.body }), null)
    assert.equal(r.headers['content-type'], 'application/json')
    assert.equal(r.headers['webhook-attempt'], '1')
    assert.equal(r.headers['webhook-id'], r.json.id)
    assert.deepEqual({ ...r.json, id: '', created_at: '' }, {
      id: '',
      type: 'permission.requested',
      created_at: '',
      session_id: 'sess-a',
      tenant: 'tenant-a',
      data: { request_id: 'req-1', tool_name: 'Bash', summary: 'ls', input_preview: '{"command":"ls"}', input_truncated: false, seq: 3 }
    })
    assert.ok(Math.abs(Date.parse(r.json.created_at) - Date.now()) < 60_000)
    await eventuallyDelivered(n, 1)
  })

  it('retries a receiver that is down (connection refused) after growing delays, then delivers once it is up', async (t) => {
    const port = await freePort()
    const log = capturedLogger()
    const n = notifier(t, `http://127.0.0.1:${port}/hook`, { logger: log.logger, maxAttempts: 10, retryBaseMs: 30, random: () => 0.5 })
    turn(n, 1)
    // Three refused attempts, each logged with the delay it waits before the next.
    const failed = await log.until(() => retryLines(log.lines).length >= 3 && retryLines(log.lines), 'three failed attempts')
    assert.deepEqual(failed.slice(0, 3).map((l: any) => l.attempt), [1, 2, 3])
    assert.ok(failed.every((l: any) => /ECONNREFUSED/.test(l.reason)), JSON.stringify(failed))
    // base × 2^(n-1), three quarters of it with random() = 0.5: 23, 45, 90 ms.
    assert.deepEqual(failed.slice(0, 3).map((l: any) => l.retry_in_ms), [23, 45, 90])
    const receiver = await Receiver.start(t, () => ({ status: 200 }), port)
    const [r] = await receiver.received(1) as [Received]
    assert.ok(Number(r.headers['webhook-attempt']) >= 4)
    assert.equal(r.json.data.seq, 1)
    assert.equal(verifyWebhook({ secret: SECRET, timestamp: r.headers['webhook-timestamp'] as string, signature: r.headers['webhook-signature'] as string, body: r.body }), null)
    await eventuallyDelivered(n, 1)
    assert.equal(n.stats.exhausted, 0)
  })

  it('retries 503 after growing delays with the same id and body, each attempt signed afresh, then delivers', async (t) => {
    const receiver = await Receiver.start(t, (i) => ({ status: i < 3 ? 503 : 200 }))
    const log = capturedLogger()
    const n = notifier(t, receiver.url, { logger: log.logger, retryBaseMs: 40, random: () => 0 })
    turn(n, 1)
    const all = await receiver.received(4)
    await eventuallyDelivered(n, 1)
    assert.equal(all.length, 4, 'no attempt after the 200')
    assert.deepEqual(all.map((r) => r.headers['webhook-attempt']), ['1', '2', '3', '4'])
    assert.equal(new Set(all.map((r) => r.headers['webhook-id'])).size, 1, 'one delivery id across retries')
    assert.equal(new Set(all.map((r) => r.body)).size, 1, 'the same bytes each time')
    for (const r of all) {
      assert.equal(verifyWebhook({ secret: SECRET, timestamp: r.headers['webhook-timestamp'] as string, signature: r.headers['webhook-signature'] as string, body: r.body }), null)
    }
    // random() = 0: half of base × 2^(n-1), so 20, 40, 80 ms; each real gap at least that.
    const waits = retryLines(log.lines).map((l) => l.retry_in_ms)
    assert.deepEqual(waits, [20, 40, 80])
    const gaps = all.slice(1).map((r, i) => r.at - (all[i] as Received).at)
    gaps.forEach((gap, i) => assert.ok(gap >= (waits[i] as number) - 2, `gap ${i + 1} of ${gap.toFixed(1)} ms, expected ≥ ${waits[i]} ms`))
    assert.ok(retryLines(log.lines).every((l) => l.status === 503 && l.reason === 'answered 503'))
  })

  it('without an injected random, each wait is between half and all of base × 2^(n-1)', async (t) => {
    const receiver = await Receiver.start(t, (i) => ({ status: i < 4 ? 500 : 200 }))
    const log = capturedLogger()
    const n = notifier(t, receiver.url, { logger: log.logger, retryBaseMs: 20 })
    turn(n, 1)
    await receiver.received(5)
    await eventuallyDelivered(n, 1)
    const waits = retryLines(log.lines).map((l) => l.retry_in_ms as number)
    assert.equal(waits.length, 4)
    waits.forEach((w, i) => {
      const full = 20 * 2 ** i
      assert.ok(w >= full / 2 && w <= full, `wait ${i + 1}: ${w} ms, expected within [${full / 2}, ${full}]`)
    })
  })

  it('honours a 429\'s Retry-After when longer than the backoff, capped at WEBHOOK_RETRY_MAX_MS', async (t) => {
    const receiver = await Receiver.start(t, (i) => i === 0
      ? { status: 429, headers: { 'retry-after': '1' } }
      : i === 1 ? { status: 503, headers: { 'retry-after': '3600' } } : { status: 200 })
    const log = capturedLogger()
    const n = notifier(t, receiver.url, { logger: log.logger, retryBaseMs: 10, retryMaxMs: 1500, random: () => 0 })
    turn(n, 1)
    const all = await receiver.received(3)
    await eventuallyDelivered(n, 1)
    assert.deepEqual(retryLines(log.lines).map((l) => [l.status, l.retry_in_ms]), [[429, 1000], [503, 1500]])
    assert.ok((all[1] as Received).at - (all[0] as Received).at >= 998, 'waited the Retry-After second')
    assert.ok((all[2] as Received).at - (all[1] as Received).at >= 1498, 'waited the cap, not an hour')
  })

  it('does not retry other 4xx (nor 3xx): rejected once, and the session\'s next delivery goes', async (t) => {
    const receiver = await Receiver.start(t, (i) => ({ status: [400, 410, 301][i] ?? 200 }))
    const log = capturedLogger()
    const n = notifier(t, receiver.url, { logger: log.logger, retryBaseMs: 1 })
    turn(n, 1)
    turn(n, 2)
    turn(n, 3)
    turn(n, 4) // a fence: the session's lane is in order, so a retry of 1, 2 or 3 would come before it
    const all = await receiver.received(4)
    await log.until(() => n.stats.delivered === 1 && n.stats.rejected === 3, 'three rejections and a delivery')
    assert.deepEqual(all.map((r) => r.json.data.seq), [1, 2, 3, 4])
    assert.deepEqual(all.map((r) => r.headers['webhook-attempt']), ['1', '1', '1', '1'])
    assert.equal(retryLines(log.lines).length, 0)
    const rejected = log.lines.filter((l) => l.msg === 'webhook rejected by its receiver; not retried')
    assert.deepEqual(rejected.map((l) => l.status), [400, 410, 301])
    assert.equal(rejected[0].level, 40, 'a warning')
  })

  it('gives up after WEBHOOK_MAX_ATTEMPTS with a warning', async (t) => {
    const receiver = await Receiver.start(t, () => ({ status: 502 }))
    const log = capturedLogger()
    const n = notifier(t, receiver.url, { logger: log.logger, maxAttempts: 3, retryBaseMs: 1 })
    turn(n, 1)
    const given = await log.until(() => log.lines.find((l) => l.msg === 'webhook given up after its last attempt'), 'the give-up warning')
    assert.equal(given.attempt, 3)
    assert.equal(given.status, 502)
    assert.equal(receiver.requests.length, 3)
    assert.deepEqual({ ...n.stats }, { waiting: 0, inFlight: 0, delivered: 0, rejected: 0, exhausted: 1, dropped: 0, abandoned: 0, recovered: 0 })
  })

  it('a retrying delivery holds back its own session\'s next ones, not other sessions\'', async (t) => {
    let aTries = 0
    const receiver = await Receiver.start(t, (_i, r) => {
      if (r.json.session_id === 'sess-a' && r.json.data.seq === 1 && ++aTries < 3) return { status: 503 }
      return { status: 200 }
    })
    const n = notifier(t, receiver.url, { retryBaseMs: 150, random: () => 0 })
    turn(n, 1, 'sess-a')
    turn(n, 2, 'sess-a')
    turn(n, 3, 'sess-a')
    turn(n, 1, 'sess-b')
    turn(n, 2, 'sess-b')
    await receiver.received(7)
    await eventuallyDelivered(n, 5)
    const order = receiver.requests.map((r) => `${r.json.session_id as string}#${r.json.data.seq as number}`)
    assert.deepEqual(order.filter((o) => o.startsWith('sess-a')), ['sess-a#1', 'sess-a#1', 'sess-a#1', 'sess-a#2', 'sess-a#3'])
    assert.deepEqual(order.filter((o) => o.startsWith('sess-b')), ['sess-b#1', 'sess-b#2'])
    // sess-b went while sess-a#1 waited out its first 75 ms backoff.
    assert.ok(order.indexOf('sess-b#2') < order.indexOf('sess-a#2'), order.join(' '))
  })

  it('keeps at most WEBHOOK_CONCURRENCY requests in flight', async (t) => {
    const receiver = await Receiver.start(t, () => 'hang')
    const n = notifier(t, receiver.url, { concurrency: 2 })
    for (let s = 0; s < 5; s++) turn(n, 1, `sess-${s}`)
    await receiver.received(2)
    assert.deepEqual([n.stats.inFlight, n.stats.waiting], [2, 3])
    // Answering one lets exactly one more in.
    receiver.requests[0]?.res.writeHead(200).end()
    await receiver.received(3)
    assert.equal(receiver.requests.filter((r) => !r.res.writableEnded).length, 2)
    for (const r of receiver.requests) if (!r.res.writableEnded) r.res.writeHead(200).end()
    receiver.behaviour = () => ({ status: 200 })
    await receiver.received(5)
    await eventuallyDelivered(n, 5)
  })

  it('a full queue drops its oldest waiting delivery with a warning and a count; what is in flight is kept', async (t) => {
    const receiver = await Receiver.start(t, (i) => i === 0 ? 'hang' : { status: 200 })
    const log = capturedLogger()
    const n = notifier(t, receiver.url, { logger: log.logger, concurrency: 1, queueMax: 2 })
    turn(n, 1, 'sess-a')
    await receiver.received(1) // seq 1 in flight, its answer withheld
    turn(n, 2, 'sess-b')
    turn(n, 3, 'sess-a')
    turn(n, 4, 'sess-c') // the queue holds 2 waiting: 2 (the oldest) goes
    turn(n, 5, 'sess-b') // and then 3
    assert.deepEqual({ ...n.stats }, { waiting: 2, inFlight: 1, delivered: 0, rejected: 0, exhausted: 0, dropped: 2, abandoned: 0, recovered: 0 })
    const warnings = log.lines.filter((l) => l.msg === 'webhook queue full; dropped the oldest')
    assert.equal(warnings.length, 1, 'warned once, not once per drop')
    assert.equal(warnings[0].level, 40)
    assert.equal(warnings[0].session, 'sess-b')
    ;(receiver.requests[0] as Received).res.writeHead(200).end()
    await receiver.received(3)
    await eventuallyDelivered(n, 3)
    assert.deepEqual(receiver.requests.map((r) => r.json.data.seq), [1, 4, 5])
  })

  it('times out an attempt the receiver never answers, and retries it', async (t) => {
    const receiver = await Receiver.start(t, (i) => i === 0 ? 'hang' : { status: 200 })
    const log = capturedLogger()
    const n = notifier(t, receiver.url, { logger: log.logger, timeoutMs: 150, retryBaseMs: 1 })
    const sent = performance.now()
    turn(n, 1)
    const [first, second] = await receiver.received(2) as [Received, Received]
    await eventuallyDelivered(n, 1)
    assert.ok(second.at - sent >= 149, 'retried after the timeout')
    assert.equal(first.cutOff, true, 'the timed-out request was cut')
    assert.match(retryLines(log.lines)[0]?.reason, /TIMEOUT/)
    assert.equal(second.headers['webhook-id'], first.headers['webhook-id'])
  })

  it('close stops retries and cuts what still hangs at its deadline, counting them abandoned', async (t) => {
    const receiver = await Receiver.start(t, (_i, r) => r.json.session_id === 'sess-hang' ? 'hang' : { status: 503 })
    const log = capturedLogger()
    const n = notifier(t, receiver.url, { logger: log.logger, retryBaseMs: 60_000, retryMaxMs: 60_000 })
    turn(n, 1, 'sess-hang')
    turn(n, 1, 'sess-retry')
    turn(n, 2, 'sess-retry')
    await receiver.received(2)
    await log.until(() => retryLines(log.lines).length === 1, 'sess-retry backing off for a minute')
    const started = performance.now()
    await n.close(200)
    const took = performance.now() - started
    assert.ok(took >= 190 && took < 2000, `close took ${took.toFixed(0)} ms`)
    // sess-retry#2 had its one attempt during the deadline (503: not retried while closing).
    await receiver.waiters.until(() => receiver.requests.find((r) => r.json.session_id === 'sess-hang')?.cutOff, WAIT_MS, 'the hanging request cut', () => '')
    assert.deepEqual(receiver.requests.map((r) => `${r.json.session_id as string}#${r.json.data.seq as number}`).sort(), ['sess-hang#1', 'sess-retry#1', 'sess-retry#2'])
    assert.deepEqual({ ...n.stats }, { waiting: 0, inFlight: 0, delivered: 0, rejected: 0, exhausted: 0, dropped: 0, abandoned: 3, recovered: 0 })
    turn(n, 9)
    assert.equal(n.stats.waiting, 0, 'nothing is queued once closed')
  })

  it('warns at start when the URL is plain http to another machine', (t) => {
    const warned = (url: string): boolean => {
      const log = capturedLogger()
      notifier(t, url, { logger: log.logger })
      return log.lines.some((l) => l.level === 40 && /plain http/.test(l.msg))
    }
    assert.equal(warned('http://hooks.example.com/x'), true)
    assert.equal(warned('http://10.0.0.5:9000/x'), true)
    assert.equal(warned('https://hooks.example.com/x'), false)
    assert.equal(warned('http://127.0.0.1:9000/x'), false)
    assert.equal(warned('http://localhost:9000/x'), false)
  })

  it('sends only WEBHOOK_EVENTS; URL credentials go as Basic auth and neither they, the query nor the secret are logged', async (t) => {
    const receiver = await Receiver.start(t, (i) => ({ status: i === 0 ? 503 : 200 }))
    const log = capturedLogger()
    const url = receiver.url.replace('http://', 'http://hook-user:p%40ss-s3cret@') + '?token=query-s3cret'
    const n = notifier(t, url, { logger: log.logger, events: ['session.ended'], retryBaseMs: 1 })
    const ref = { sessionId: 'sess-a', tenant: 'tenant-a' }
    turn(n, 1)
    n.permissionResolved(ref, { requestId: 'r', decision: 'allowed', by: null, seq: 2 })
    n.sessionEnded(ref, { status: 'exited', reason: 'exited', code: 0, signal: null, seq: 3 })
    const [r] = await receiver.received(2) as [Received]
    await eventuallyDelivered(n, 1)
    assert.deepEqual(receiver.requests.map((x) => x.json.type), ['session.ended', 'session.ended'])
    assert.deepEqual(r.json.data, { status: 'exited', reason: 'exited', code: 0, signal: null, seq: 3 })
    assert.equal(r.headers.authorization, `Basic ${Buffer.from('hook-user:p@ss-s3cret').toString('base64')}`)
    const logged = log.text()
    assert.match(logged, /webhook attempt failed; retrying/)
    assert.match(logged, /"webhook":"http:\/\/127\.0\.0\.1:\d+\/hook"/)
    for (const secret of ['s3cret', 'hook-user', SECRET]) assert.ok(!logged.includes(secret), `${secret} logged`)
  })
})

describe('webhook answers', () => {
  it('2xx is delivered; 408, 429 and 5xx are retried; anything else is not', () => {
    for (const status of [200, 201, 202, 204, 299]) assert.deepEqual(classify(status, undefined), { outcome: 'delivered', status })
    for (const status of [408, 429, 500, 502, 503, 504, 599]) assert.equal(classify(status, undefined).outcome, 'retry', String(status))
    for (const status of [100, 301, 302, 304, 307, 400, 401, 403, 404, 405, 410, 413, 422]) assert.equal(classify(status, undefined).outcome, 'rejected', String(status))
    assert.deepEqual(classify(503, '7'), { outcome: 'retry', reason: 'answered 503', status: 503, retryAfterMs: 7000 })
    assert.equal((classify(400, '7') as { retryAfterMs?: number }).retryAfterMs, undefined, 'Retry-After only matters on a retry')
  })

  it('Retry-After is delay-seconds or an HTTP date', () => {
    const now = Date.parse('2026-11-26T10:00:00Z')
    assert.equal(parseRetryAfter('120', now), 120_000)
    assert.equal(parseRetryAfter(' 0 ', now), 0)
    assert.equal(parseRetryAfter('Thu, 26 Nov 2026 10:00:30 GMT', now), 30_000)
    assert.equal(parseRetryAfter('Thu, 26 Nov 2026 09:00:00 GMT', now), 0, 'a date past is now')
    assert.equal(parseRetryAfter(undefined, now), undefined)
    assert.equal(parseRetryAfter('soon', now), undefined)
    assert.equal(parseRetryAfter('-5', now), undefined)
  })
})

/** Polls the notifier's counts (its state, not an event a test can wait on) until `count` were delivered. */
async function eventuallyDelivered (n: WebhookNotifier, count: number): Promise<void> {
  await eventually(() => n.stats.delivered >= count && n.stats.inFlight === 0, WAIT_MS, `${count} delivered (${JSON.stringify(n.stats)})`)
}
