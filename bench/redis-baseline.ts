/**
 * Redis ceilings, measured in the same run as the gateway:
 * - `redis-benchmark -P 16 XADD …` (Redis itself, C client, 50 connections);
 * - a bare ioredis loop of pipelined XADD batches, one batch in flight at a
 *   time, with the gateway's command shape (explicit `<seq>-0` ids,
 *   `MAXLEN ~`) and client options;
 * - the gateway's own RedisStore.append in the same loop (what one session's
 *   event log could reach if the rest of the gateway cost nothing).
 */
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { Redis } from 'ioredis'
import { RedisStore } from '../src/store/redis.js'
import { REDIS_URL, deleteKeys } from './lib.js'

export interface RedisBenchmarkResult {
  ok: boolean
  requests_per_s: number | null
  n: number
  pipeline: number
  value_bytes: number
  error?: string
}

export async function redisBenchmark (n: number, valueBytes: number): Promise<RedisBenchmarkResult> {
  const url = new URL(REDIS_URL)
  const key = `cgwbench:${process.pid}-${randomBytes(4).toString('hex')}:rb`
  const args = ['-h', url.hostname, '-p', url.port || '6379', '-P', '16', '-n', String(n), '-q',
    'XADD', key, 'MAXLEN', '~', '100000', '*', 'f', 'x'.repeat(valueBytes)]
  try {
    const output = await new Promise<string>((resolve, reject) => {
      const child = spawn('redis-benchmark', args, { stdio: ['ignore', 'pipe', 'pipe'] })
      let text = ''
      child.stdout.on('data', (d: Buffer) => { text += d.toString() })
      child.stderr.on('data', (d: Buffer) => { text += d.toString() })
      child.on('error', reject)
      child.on('exit', (code) => code === 0 ? resolve(text) : reject(new Error(`redis-benchmark exited ${code}: ${text.slice(-300)}`)))
    })
    const all = [...output.matchAll(/([\d.]+) requests per second/g)]
    const last = all[all.length - 1]
    return { ok: last !== undefined, requests_per_s: last === undefined ? null : Number(last[1]), n, pipeline: 16, value_bytes: valueBytes }
  } catch (err) {
    return { ok: false, requests_per_s: null, n, pipeline: 16, value_bytes: valueBytes, error: String(err) }
  } finally {
    await deleteKeys(key)
  }
}

export interface PipelineLoopResult {
  batch: number
  events: number
  events_per_s: number
  /** Mean time of one batch round trip. */
  batch_ms: number
}

/** Appends `events` frames of `frameBytes` in batches of `batch`, one batch in flight. */
export async function ioredisPipelineLoop (events: number, batch: number, frameBytes: number): Promise<PipelineLoopResult> {
  const prefix = `cgwbench:${process.pid}-${randomBytes(4).toString('hex')}:`
  const key = `${prefix}{loop}:events`
  const client = new Redis(REDIS_URL, { enableAutoPipelining: true, maxRetriesPerRequest: 1 })
  const frame = `{"seq":0,"type":"assistant","bench":{"i":0,"t":0},"text":"${'x'.repeat(Math.max(0, frameBytes - 60))}"}`
  try {
    await client.ping()
    let seq = 0
    const t0 = process.hrtime.bigint()
    let batches = 0
    while (seq < events) {
      const pipeline = client.pipeline()
      const end = Math.min(events, seq + batch)
      for (; seq < end;) {
        seq++
        pipeline.xadd(key, 'MAXLEN', '~', 5_000_000, `${seq}-0`, 'f', frame)
      }
      const results = await pipeline.exec()
      if (results === null) throw new Error('pipeline aborted')
      for (const [err] of results) if (err !== null) throw err
      batches++
    }
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9
    return { batch, events, events_per_s: events / seconds, batch_ms: (seconds * 1000) / batches }
  } finally {
    await client.quit().catch(() => {})
    await deleteKeys(prefix)
  }
}

/** The gateway's RedisStore.append, `batch` events per call, one call in flight (like the event log). */
export async function storeAppendLoop (events: number, batch: number, frameBytes: number): Promise<PipelineLoopResult> {
  const prefix = `cgwbench:${process.pid}-${randomBytes(4).toString('hex')}:`
  const store = new RedisStore({ url: REDIS_URL, prefix, retention: { maxEventsPerSession: 5_000_000, ttlSecondsAfterEnd: 604_800 } })
  const frame = `{"seq":0,"type":"assistant","bench":{"i":0,"t":0},"text":"${'x'.repeat(Math.max(0, frameBytes - 60))}"}`
  try {
    await store.ping()
    let seq = 0
    let batches = 0
    const t0 = process.hrtime.bigint()
    while (seq < events) {
      const chunk = []
      const end = Math.min(events, seq + batch)
      while (seq < end) chunk.push({ seq: ++seq, frame })
      await store.append('loop', chunk)
      batches++
    }
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9
    return { batch, events, events_per_s: events / seconds, batch_ms: (seconds * 1000) / batches }
  } finally {
    await store.close()
    await deleteKeys(prefix)
  }
}

export interface RoundTripResult { n: number, rate: number, p50_ms: number, p99_ms: number, p999_ms: number, max_ms: number }

/**
 * Round trip of one XADD (like one relayed line at low rates) at `rate` per
 * second with a bare ioredis client: the floor under what the gateway adds
 * to a line's latency with Redis on (store before relay).
 */
export async function redisRoundTrip (n: number, rate: number, frameBytes: number): Promise<RoundTripResult> {
  const prefix = `cgwbench:${process.pid}-${randomBytes(4).toString('hex')}:`
  const key = `${prefix}{rtt}:events`
  const client = new Redis(REDIS_URL, { enableAutoPipelining: true, maxRetriesPerRequest: 1 })
  const frame = `{"seq":0,"type":"assistant","bench":{"i":0,"t":0},"text":"${'x'.repeat(Math.max(0, frameBytes - 60))}"}`
  try {
    await client.ping()
    const times: number[] = []
    const start = process.hrtime.bigint()
    for (let i = 1; i <= n; i++) {
      const due = start + BigInt(Math.round((i * 1e9) / rate))
      const wait = Number(due - process.hrtime.bigint()) / 1e6
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, Math.floor(wait)))
      const t0 = process.hrtime.bigint()
      await client.xadd(key, 'MAXLEN', '~', 5_000_000, `${i}-0`, 'f', frame)
      times.push(Number(process.hrtime.bigint() - t0) / 1e6)
    }
    times.sort((a, b) => a - b)
    const q = (p: number): number => times[Math.min(times.length - 1, Math.ceil(p * times.length) - 1)] as number
    return { n, rate, p50_ms: q(0.5), p99_ms: q(0.99), p999_ms: q(0.999), max_ms: times[times.length - 1] as number }
  } finally {
    await client.quit().catch(() => {})
    await deleteKeys(prefix)
  }
}
