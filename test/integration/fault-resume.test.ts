/**
 * Resume verdicts while the event store does not answer (issue 13, findings
 * 1 and 8). Redis is frozen with SIGSTOP, as in a long pause: its data stays,
 * and the commands sent meanwhile run once it resumes.
 *
 * - A client resuming from a seq only the store holds is told
 *   `resume: "unavailable"` and closed with 1013; nothing is skipped, and the
 *   same resume once the store is back replays every seq (the old gateway
 *   said `gap`, with the oldest frame held in memory as the start of history).
 * - A resume inside the frames held in memory is served without the store.
 * - Past STORE_QUEUE_MAX, the loss is reported once per outage (frame and
 *   log line), and a later resume's `gap` names exactly the seqs history
 *   lacks: the replay holds every other seq, marked where it jumps.
 */
import assert from 'node:assert/strict'
import { Writable } from 'node:stream'
import { after, before, describe, it } from 'node:test'
import pino from 'pino'
import { isHello } from '../support/frames.js'
import { type TestClient, type TestGateway, gateway, suiteScope } from '../support/gateway.js'
import { type RedisServer, startRedisServer } from '../support/redis-server.js'
import { readHistory, settled } from './resume-helpers.js'

const LIMITS = { RATE_LIMIT_PER_MINUTE: '100000', WS_MAX_FRAMES_PER_SEC: '100000' }
const isStore = (state: string) => (f: any): boolean => f.type === 'gateway' && f.subtype === 'store' && f.state === state
const range = (from: number, to: number): number[] => Array.from({ length: to - from + 1 }, (_, i) => from + i)

/** Sends a prompt and waits until the turn is over and every seq reached `client`; returns the last seq. */
async function burst (gw: TestGateway, id: string, client: TestClient, prompt: string): Promise<number> {
  const from = client.frames.length
  client.sendUser(prompt)
  return await settled(gw, id, client, 30_000, from)
}

describe('resume while the store does not answer', () => {
  const scope = suiteScope()
  let redis: RedisServer
  let gw: TestGateway

  before(async () => {
    redis = await startRedisServer()
    gw = await gateway(scope, { env: { ...LIMITS, REDIS_URL: redis.url, REDIS_PREFIX: 'fault-resume:', RESUME_STORE_WAIT_MS: '300' } })
  })
  after(async () => {
    await redis?.kill()
  })

  it('says "unavailable" and closes with 1013 instead of claiming a gap; the same resume later gets every seq', async () => {
    const { id } = await gw.createSession()
    const holder = await gw.connect(id, 'after=0')
    await holder.waitFor(isHello)
    await burst(gw, id, holder, 'burst 50')

    redis.pause()
    const outageAt = holder.frames.length
    const end = await burst(gw, id, holder, 'burst 100')
    await holder.waitFor(isStore('degraded'), 10_000, outageAt)

    const early = await gw.connect(id, 'after=10&role=observer')
    const hello = await early.waitFor(isHello, 15_000)
    assert.equal(hello.resume, 'unavailable', JSON.stringify(hello))
    assert.equal(typeof hello.retry_after_ms, 'number')
    assert.equal(hello.role, 'observer')
    assert.equal(await early.waitClose(10_000), 1013)
    assert.deepEqual(early.seqFrames, [], 'no frame after a hole')

    // Served from memory: the frames from the outage on are held, so a resume inside them needs no store.
    const heldFrom = holder.frames.slice(outageAt).find((f) => typeof f.seq === 'number').seq as number
    const inside = await gw.connect(id, `after=${heldFrom}&role=observer`)
    const insideHello = await inside.waitFor(isHello)
    assert.equal(insideHello.resume, 'ok')
    await inside.until(() => inside.seqFrames.some((f) => f.seq === end))
    assert.deepEqual(inside.seqFrames.map((f) => f.seq), range(heldFrom + 1, end))

    redis.resume()
    await holder.waitFor(isStore('ok'), 20_000, outageAt)
    const again = await gw.connect(id, 'after=10&role=observer')
    const againHello = await again.waitFor(isHello)
    assert.equal(againHello.resume, 'ok')
    await again.until(() => again.seqFrames.some((f) => f.seq === end), 20_000)
    assert.deepEqual(again.seqFrames.map((f) => f.seq), range(11, end), 'every seq after 10, once, in order')
    const history = await readHistory(gw, id)
    assert.deepEqual(again.seqFrames, history.filter((f) => f.seq > 10))
  })
})

describe('history lost past STORE_QUEUE_MAX', () => {
  const scope = suiteScope()
  let redis: RedisServer
  let gw: TestGateway
  const logLines: any[] = []

  before(async () => {
    redis = await startRedisServer()
    const sink = new Writable({ write (chunk, _enc, done) { for (const line of String(chunk).split('\n')) if (line !== '') logLines.push(JSON.parse(line)); done() } })
    gw = await gateway(scope, {
      env: { ...LIMITS, REDIS_URL: redis.url, REDIS_PREFIX: 'fault-overflow:', STORE_QUEUE_MAX: '20', RESUME_STORE_WAIT_MS: '300' },
      parts: { logger: pino({ level: 'info' }, sink) }
    })
  })
  after(async () => {
    await redis?.kill()
  })

  it('reports the loss once per outage and names the exact missing seqs in the next resume', async () => {
    const { id } = await gw.createSession()
    const holder = await gw.connect(id, 'after=0')
    await holder.waitFor(isHello)
    const before = await burst(gw, id, holder, 'burst 30')

    redis.pause()
    const outageAt = holder.frames.length
    const end = await burst(gw, id, holder, 'burst 200')
    assert.deepEqual(holder.seqFrames.map((f) => f.seq), range(1, end), 'live relay lost nothing')
    const overflows = holder.frames.slice(outageAt).filter((f) => f.type === 'gateway' && f.subtype === 'error' && f.code === 'store_overflow')
    assert.equal(overflows.length, 1, 'one store_overflow frame for the whole outage')
    assert.equal(overflows[0].missing_from, before + 1)

    redis.resume()
    const ok = await holder.waitFor(isStore('ok'), 20_000, outageAt)
    assert.equal(logLines.filter((l) => /STORE_QUEUE_MAX/.test(l.msg)).length, 1, 'one error log line for the outage')

    // What history holds after the outage decides the truth: the gap must be exactly what it lacks.
    const history = await readHistory(gw, id)
    const held = new Set(history.map((f) => f.seq))
    const missing = range(1, end).filter((s) => !held.has(s))
    assert.ok(missing.length > 0, 'the outage dropped something')
    assert.equal(ok.dropped, missing.length, 'the recovery reports what was really lost')
    assert.equal(ok.missing_from, missing[0])
    assert.equal(ok.missing_to, missing.at(-1))

    const late = await gw.connect(id, 'after=0&role=observer')
    const hello = await late.waitFor(isHello)
    assert.equal(hello.resume, 'gap', JSON.stringify(hello))
    assert.equal(hello.missing_from, missing[0])
    assert.equal(hello.missing_to, missing.at(-1))
    const named = (hello.missing as Array<[number, number]>).flatMap(([a, b]) => range(a, b))
    assert.deepEqual(named, missing, 'exactly the seqs history lacks')
    await late.until(() => late.seqFrames.some((f) => f.seq === end), 20_000)
    assert.deepEqual(late.seqFrames, history, 'the replay holds every other seq')
    const marks = late.frames.filter((f) => f.type === 'gateway' && f.subtype === 'gap')
    assert.deepEqual(marks.flatMap((m) => range(m.missing_from, m.missing_to)), missing, 'each jump is marked where it happens')
  })
})
