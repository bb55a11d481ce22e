/**
 * The Redis store's write path for session events: each append becomes one
 * or more chunks of APPEND_SCRIPT (redis-scripts.ts), and on a single Redis
 * the chunks of all sessions go through the node's append gate
 * (append-gate.ts), which merges the appends of a wave into one script call,
 * framed here rather than by ioredis (redis-wave.ts). On a Cluster each
 * session's chunk is its own call, framed likewise: the keys of different
 * sessions lie in different slots, on connections of their own.
 */
import { createHash } from 'node:crypto'
import { Cluster, type Redis } from 'ioredis'
import { AppendGate } from './append-gate.js'
import { APPEND_COMMAND, APPEND_SCRIPT, type Append, type AppendAnswer, fenced, fenceOf } from './redis-scripts.js'
import { type Framed, respArg, respKeys, type WaveArg, WaveCommand } from './redis-wave.js'
import type { Lease, RetentionOptions, StoredEvent } from './store.js'

/** A script call carries at most this many events, and stops growing past this many frame characters. */
const APPEND_CHUNK_EVENTS = 500
const APPEND_CHUNK_CHARS = 1024 * 1024
/** Sessions merged into one script call at most (more in a wave go in further calls of the same write). */
const APPEND_WAVE_SESSIONS = 200
/** Sessions this node remembers keys and a largest-frame mark for; past it, it forgets them all (a forgotten one costs a GET of its mark in its next call). */
const REMEMBERED_SESSIONS = 50_000

/** A session's keys and feed channel, as the store names them. */
export interface SessionKeys {
  events: string
  meta: string
  lease: string
  followed: string
  /** The stream's largest-frame mark (redis-scripts.ts). */
  largest: string
  channel: string
}

export interface RedisAppenderConfig {
  client: Redis | Cluster
  retention: RetentionOptions
  keys: (sessionId: string) => SessionKeys
}

/** One session's chunk of events for APPEND_SCRIPT: its 5 keys and its arguments (max, TTL, epoch, channel, known largest, largest, count, then an id and a frame per event). */
interface AppendJob {
  state: SessionState
  args: Array<string | number | Buffer>
  events: number
  chars: number
  /** The chunk's first and last seq, and its longest frame in bytes. */
  first: number
  last: number
  largest: number
}

/** A chunk's events before they become a job's arguments. */
interface Chunk {
  events: StoredEvent[]
  chars: number
}

const KEYS_PER_SESSION = 5
/** Where a job's arguments hold its channel and its longest frame (APPEND_SCRIPT's fourth and sixth per session). */
const CHANNEL_ARG = 3
const LARGEST_ARG = 5
/** What EVALSHA names APPEND_SCRIPT by. */
const APPEND_SHA = createHash('sha1').update(APPEND_SCRIPT).digest('hex')

/** What a node keeps per session it appends to, so an append of one line does not name its keys again. */
interface SessionState {
  /** The script's 5 keys, in its order. */
  keys: string[]
  /** The same keys framed as RESP, for merged waves (redis-wave.ts). */
  resp: Buffer
  /** The channel argument framed likewise. */
  channelArg: Framed
  channel: string
  /**
   * The longest frame (bytes) this node has had the stream's largest-frame
   * mark cover: the script reads the mark only when a call brings a longer
   * one. Only saves work: a session forgotten here is checked.
   */
  known: number
  /**
   * Every entry of the stream up to seq `coveredTo` is at most `coveredBy`
   * bytes (0 and 0: nothing known), so a read no further than that needs no
   * budget (RedisAppender.bound). Learnt from the mark a call read, or from
   * this node's own frames when its calls follow on from `coveredTo`.
   */
  coveredTo: number
  coveredBy: number
  /** The lease fence (epoch and node) of this node's appends; another one forgets the above (another node may have written since). */
  epoch: string
}

export class RedisAppender {
  readonly #client: Redis | Cluster
  readonly #retention: RetentionOptions
  readonly #keys: (sessionId: string) => SessionKeys
  /** Clocks and merges appends of all sessions on one connection; none on a Cluster. */
  readonly #gate: AppendGate<AppendJob, AppendAnswer> | null
  readonly #sessions = new Map<string, SessionState>()

  constructor (config: RedisAppenderConfig) {
    const client = this.#client = config.client
    this.#retention = config.retention
    this.#keys = config.keys
    // On an injected client too: the same name always carries the same script.
    client.defineCommand(APPEND_COMMAND, { lua: APPEND_SCRIPT })
    this.#gate = client instanceof Cluster
      ? null
      : new AppendGate({
        stream: () => client.stream ?? null,
        writeMany: async (jobs) => await this.#wave(jobs),
        // A merged call holds no more events and characters than one chunk.
        weight: (job) => Math.max(job.chars / APPEND_CHUNK_CHARS, job.events / APPEND_CHUNK_EVENTS),
        maxWeight: 1,
        maxJobs: APPEND_WAVE_SESSIONS
      })
  }

  /** EventStore.append: in order, skipping seqs the stream holds; FencedError unless `lease` is current. */
  async append (sessionId: string, events: StoredEvent[], lease?: Lease): Promise<void> {
    // Seqs start at 1; Redis refuses the id 0-0, and the memory store ignores seq <= 0 too.
    const fresh = events.every((e) => e.seq >= 1) ? events : events.filter((e) => e.seq >= 1)
    if (fresh.length === 0) return
    for (const e of fresh) {
      if (!Number.isSafeInteger(e.seq)) throw new TypeError(`seq must be an integer, got ${e.seq}`)
    }
    const state = this.#state(sessionId)
    const max = this.#retention.maxEventsPerSession
    const epoch = fenceOf(lease)
    if (epoch !== state.epoch) {
      // Under a lease taken anew, others may have written the stream since: read the mark again.
      state.epoch = epoch
      state.known = state.coveredTo = state.coveredBy = 0
    }
    const known = state.known
    // One script call per chunk (usually one per batch) instead of one XADD
    // per event plus the TTL checks: the same commands run inside Redis,
    // without a command, a reply and a client-side object per event.
    const chunks: Chunk[] = []
    let chunk: Chunk | null = null
    for (const e of fresh) {
      chunk ??= { events: [], chars: 0 }
      chunk.events.push(e)
      chunk.chars += e.frame.length
      if (chunk.events.length >= APPEND_CHUNK_EVENTS || chunk.chars >= APPEND_CHUNK_CHARS) {
        chunks.push(chunk)
        chunk = null
      }
    }
    if (chunk !== null) chunks.push(chunk)
    // The TTL goes with every chunk: each may be the one that creates the stream (the
    // first), and a later one may fail, leaving it written with no TTL otherwise.
    const ttl = Math.max(0, Math.floor(this.#retention.ttlSecondsAfterEnd))
    const jobs = chunks.map((c): AppendJob => {
      const args: Array<string | number | Buffer> = [max, ttl, epoch, state.channel, known, 0, c.events.length]
      const largest = pushFrames(args, c.events)
      args[LARGEST_ARG] = largest
      return {
        state,
        args,
        events: c.events.length,
        chars: c.chars,
        first: (c.events[0] as StoredEvent).seq,
        last: (c.events[c.events.length - 1] as StoredEvent).seq,
        largest
      }
    })
    let outcome: AppendAnswer[]
    if (jobs.length === 1) {
      const only = jobs[0] as AppendJob
      // Merged with other sessions' appends of the same wave on a single Redis.
      outcome = this.#gate === null ? await this.#wave([only]) : [await this.#gate.submit(only)]
    } else {
      const write = async (): Promise<AppendAnswer[]> => await this.#inTurn(jobs)
      outcome = await (this.#gate === null ? write() : this.#gate.run(write))
    }
    const failed = outcome.find((r) => typeof r !== 'number')
    if (failed !== undefined) throw fenced(sessionId, new Error(String(failed)))
    outcome.forEach((r, i) => { learn(jobs[i] as AppendJob, known, r as number) })
  }

  /**
   * The longest any frame of the session's stream with seq <= `upTo` can be,
   * as far as this node knows for sure; Infinity when it does not. A read
   * ending at `upTo` whose count times this fits its budget needs no script
   * to keep to it (RedisReader.readRaw, redis-read.ts).
   */
  bound (sessionId: string, upTo: number): number {
    const state = this.#sessions.get(sessionId)
    return state !== undefined && state.coveredBy > 0 && upTo <= state.coveredTo ? state.coveredBy : Infinity
  }

  /** The session's keys and mark as this node remembers them; made (and remembered) on its first append here. */
  #state (sessionId: string): SessionState {
    let state = this.#sessions.get(sessionId)
    if (state !== undefined) return state
    if (this.#sessions.size >= REMEMBERED_SESSIONS) this.#sessions.clear()
    const k = this.#keys(sessionId)
    const keys = [k.events, k.meta, k.lease, k.followed, k.largest]
    state = { keys, resp: respKeys(keys), channel: k.channel, channelArg: respArg(k.channel), known: 0, coveredTo: 0, coveredBy: 0, epoch: '' }
    this.#sessions.set(sessionId, state)
    return state
  }

  /** One script call (the defined command) appending the chunks of one or more sessions; one answer (longest frame, or an error) per chunk. */
  async #appendMany (jobs: AppendJob[]): Promise<AppendAnswer[]> {
    const client = this.#client as unknown as Record<typeof APPEND_COMMAND, Append>
    // By hash, so the script text is not sent (and hashed by Redis) every time.
    if (jobs.length === 1) return await client[APPEND_COMMAND](KEYS_PER_SESSION, ...(jobs[0] as AppendJob).state.keys, ...(jobs[0] as AppendJob).args)
    const keys: string[] = []
    const args: Array<string | number | Buffer> = []
    for (const job of jobs) {
      for (const key of job.state.keys) keys.push(key)
      for (const a of job.args) args.push(a)
    }
    return await client[APPEND_COMMAND](keys.length, ...keys, ...args)
  }

  /**
   * A wave of the append gate (or, on a Cluster, one session's chunk): the
   * appends of one or more sessions as one script call framed by
   * redis-wave.ts, not argument by argument by ioredis; a session's keys and
   * channel go as framed when the node first appended to it. Refused
   * NOSCRIPT (the script not loaded: a new, restarted or flushed Redis), it
   * goes again through the defined command, which loads it; the gate sends
   * no other append of these sessions before this one is answered, so their
   * order holds.
   */
  async #wave (jobs: AppendJob[]): Promise<AppendAnswer[]> {
    try {
      return await this.#framed(jobs)
    } catch (err) {
      if (!noScript(err)) throw err
      return await this.#appendMany(jobs)
    }
  }

  /** The jobs as one EVALSHA framed here, issued synchronously at the call. */
  async #framed (jobs: AppendJob[]): Promise<AppendAnswer[]> {
    const args: WaveArg[] = []
    for (const job of jobs) job.args.forEach((a, i) => { args.push(i === CHANNEL_ARG ? job.state.channelArg : a) })
    // Merged jobs come only on a single Redis; a Cluster routes one session's call by its stream key.
    const command = new WaveCommand(APPEND_SHA, KEYS_PER_SESSION * jobs.length, jobs.map((job) => job.state.resp), args, (jobs[0] as AppendJob).state.keys[0])
    return await this.#client.sendCommand(command) as AppendAnswer[]
  }

  /**
   * A large batch of one session: its chunks as script calls one after
   * another, each sent once the one before is answered, and none after one
   * that failed. Sent together, a later call could be written past an
   * earlier one that failed (an error inside the script, a refused write):
   * when the event log wrote the batch again, the earlier call's events
   * would be skipped as held, a hole in the stream that nothing reports. So
   * a batch this large (an outage's held frames written back, frames of a
   * megabyte) pays a round trip a call; one that fits a call, nearly every
   * batch, is unaffected. NOSCRIPT is handled per call by #wave.
   */
  async #inTurn (jobs: AppendJob[]): Promise<AppendAnswer[]> {
    const out: AppendAnswer[] = []
    for (const job of jobs) {
      const answer = (await this.#wave([job]))[0] as AppendAnswer
      out.push(answer)
      if (typeof answer !== 'number') break
    }
    return out
  }
}

function noScript (err: unknown): boolean {
  return err instanceof Error && err.message.includes('NOSCRIPT')
}

/**
 * Appends a chunk's id and frame arguments to `args`; returns its longest
 * frame in bytes. Events a session encoded in one batch (frame-bytes.ts)
 * bring their bytes, views of the batch's buffer, sent as they are; others
 * are encoded here.
 */
function pushFrames (args: Array<string | number | Buffer>, events: StoredEvent[]): number {
  let largest = 0
  for (const e of events) {
    const bytes = e.bytes ?? Buffer.from(e.frame, 'utf8')
    if (bytes.length > largest) largest = bytes.length
    args.push(`${e.seq}-0`, bytes)
  }
  return largest
}

/**
 * What a written chunk teaches its session's state (APPEND_SCRIPT's answer,
 * `known` as the call was given it). A call that read the mark answers it:
 * it bounds every entry up to the chunk's last seq. Otherwise the chunk's
 * own frames extend what is covered only when it follows on from it (a seq
 * at most one past it): entries in between could be anyone's.
 */
function learn (job: AppendJob, known: number, answer: number): void {
  const state = job.state
  const read = job.largest > known && answer >= 0
  if (Math.abs(answer) > state.known) state.known = Math.abs(answer)
  if (read) {
    if (job.last > state.coveredTo) state.coveredTo = job.last
    if (answer > state.coveredBy) state.coveredBy = answer
  } else if (job.first <= state.coveredTo + 1 && state.coveredTo + state.coveredBy > 0) {
    if (job.last > state.coveredTo) state.coveredTo = job.last
    if (job.largest > state.coveredBy) state.coveredBy = job.largest
  }
}
