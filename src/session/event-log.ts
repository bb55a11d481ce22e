/**
 * A session's ordered event log: assigns seq numbers, writes batches to the
 * store, and releases each batch to clients only once the store has it.
 *
 * Ordering argument: seqs are assigned synchronously in arrival order, at
 * most one append is in flight per session, and batches are committed
 * (handed to `onCommit`) in the order they were appended. So clients see
 * seqs strictly ascending, and any seq a client has seen is in the store —
 * except while the store is unreachable: then frames are committed at once
 * (live relay goes on), held in `#unsaved`, and written in order when the
 * store answers again. Past `maxUnsaved` the oldest held frames are dropped
 * from history: the log keeps the exact ranges it dropped (`lostRanges`, saved
 * in the session record), so a resume verdict can name them, and reports each
 * outage's losses once (`onOverflow` at the first drop, the totals with
 * `onDegraded(false, …)`), however many batches it drops (lost-history.ts).
 */
import type { Logger } from 'pino'
import { encodeFrames } from './frame-bytes.js'
import { CHECK_PAGE_BYTES, LostHistory, type OverflowEpisode, type SeqRange } from './lost-history.js'
import { type EventStore, type Lease, type RawEvent, type StoredEvent, FencedError, withinBytes } from '../store/store.js'

export type { OverflowEpisode, SeqRange } from './lost-history.js'

/** A committed event, with an optional alternative rendering for observers. */
export interface LogEvent extends StoredEvent {
  /** What a client that does not hold the session receives instead of `frame`. */
  observerFrame?: string | undefined
  /** The CLI line `frame` was spliced from (frame-bytes.ts). */
  line?: string | undefined
}

export interface EventLogOptions {
  sessionId: string
  store: EventStore
  /** Highest seq already in the store. */
  lastSeq: number
  maxUnsaved: number
  /** Ranges dropped from history earlier (kept in the session record). */
  lostRanges?: SeqRange[] | undefined
  logger: Logger
  onCommit: (events: LogEvent[]) => void
  /** The store stopped or started answering; with `false`, what the outage dropped (null when nothing). */
  onDegraded: (degraded: boolean, lost: OverflowEpisode | null) => void
  /** The first drop of an outage (once per outage): what is dropped so far. */
  onOverflow: (episode: OverflowEpisode) => void
  /**
   * The lease writes are fenced with (the session's owner). When given, a
   * log whose lease is null writes nothing, and a write the store refuses as
   * fenced ends the log's writing for good (`onFenced`, once): another node
   * owns the session now. Without it (unit tests), writes are not fenced.
   */
  lease?: () => Lease | null
  onFenced?: () => void
  /** Asked once after a fenced refusal: true when the lease was taken back (it had only lapsed) and the write may be retried. */
  reclaim?: (lease: Lease) => Promise<boolean>
  /**
   * The events waiting for the append in flight reached BACKLOG_CHARS
   * (true), or left for the store (false): the source of the lines should
   * stop, then go on, so that what waits stays about one append's worth.
   */
  onBacklog?: (full: boolean) => void
}

/**
 * Frame characters waiting behind the append in flight past which the log
 * asks its source to pause (onBacklog); a quarter of what one Redis script
 * call carries (redis-append.ts), which measured better than a whole one.
 * Unbounded, a CLI printing faster than the store writes piled its lines up
 * here: batches of thousands of lines, kept alive through every scavenge,
 * so that collecting them cost more than relaying them, and memory without
 * limit (docs/PERFORMANCE.md §25).
 */
export const BACKLOG_CHARS = 256 * 1024

const RETRY_MIN_MS = 100
const RETRY_MAX_MS = 5000
const WRITE_CHUNK = 1000

export class EventLog {
  readonly #o: EventLogOptions
  #seq: number
  #committedSeq: number
  #pending: LogEvent[] = []
  #inFlight: Promise<void> | null = null
  #scheduled = false
  /** Characters of the frames in #pending, counted while an append is in flight. */
  #pendingChars = 0
  #backlogged = false
  /** Committed but not yet in the store (only while degraded). */
  #unsaved: LogEvent[] = []
  #degraded = false
  #retryMs = RETRY_MIN_MS
  #retryTimer: NodeJS.Timeout | null = null
  #closed = false
  /** Ranges dropped from history, and the current outage's losses. */
  readonly #lost: LostHistory
  /** Set when the store refused a write as fenced: nothing is written or relayed any more. */
  #fenced = false

  constructor (options: EventLogOptions) {
    this.#o = options
    this.#seq = options.lastSeq
    this.#committedSeq = options.lastSeq
    this.#lost = new LostHistory(options)
  }

  /** Highest seq assigned. */
  get lastSeq (): number { return this.#seq }
  /** Highest seq handed to clients. */
  get committedSeq (): number { return this.#committedSeq }
  get degraded (): boolean { return this.#degraded }
  /** True from onBacklog(true) until onBacklog(false): a CLI started meanwhile must start paused. */
  get backlogged (): boolean { return this.#backlogged }
  get unsavedCount (): number { return this.#unsaved.length }
  /** Oldest seq held in memory for the store (only while it is down), else undefined. */
  get heldFrom (): number | undefined { return this.#unsaved[0]?.seq }
  /** Every range dropped from history, ascending (a copy). */
  get lostRanges (): SeqRange[] { return this.#lost.ranges }

  /** The dropped ranges within (after, upTo], clipped to it. */
  lostWithin (after: number, upTo: number): SeqRange[] {
    return this.#lost.within(after, upTo)
  }

  /**
   * How far a history read goes by default: what this log committed, when it
   * is written here; all the store has, when another node writes it (this
   * log only learns of those events as it follows them).
   */
  #readable (): number {
    return this.#o.lease?.() === null ? Number.MAX_SAFE_INTEGER : this.#committedSeq
  }

  /** True once a write was refused as fenced (another node owns the session). */
  get fenced (): boolean { return this.#fenced }

  /**
   * Commits events another node appended (followed from the store), for a
   * session this node does not own: those past what this log holds are handed
   * to clients as if appended here, so its seqs continue after them.
   */
  ingest (events: LogEvent[]): void {
    const fresh = events.filter((e) => e.seq > this.#seq && e.seq > this.#committedSeq)
    if (fresh.length === 0) return
    this.#seq = (fresh[fresh.length - 1] as LogEvent).seq
    this.#commit(fresh)
  }

  /**
   * Reads what the store holds past this log (appended by another node while
   * this one did not own the session) and commits it, so that a node taking
   * the session over continues its seqs and its clients miss nothing.
   */
  async catchUp (observerFrame: (e: StoredEvent) => string | undefined): Promise<void> {
    for (;;) {
      const page = await this.#o.store.read(this.#o.sessionId, Math.max(this.#seq, this.#committedSeq), WRITE_CHUNK, CHECK_PAGE_BYTES * 4)
      if (page.length === 0) return
      this.ingest(page.map((e) => ({ ...e, observerFrame: observerFrame(e) })))
    }
  }

  /** Writes may go on again, under a lease taken since the fence. */
  unfence (): void {
    this.#fenced = false
  }

  /**
   * Assigns the next seq, builds the frame for it, and queues it. Returns the
   * seq. `line`: the CLI line the frame is spliced from (frames.ts
   * `spliceSource`), for encoding it (frame-bytes.ts).
   */
  push (build: (seq: number) => string, buildObserver?: (seq: number) => string, line?: string): number {
    const seq = ++this.#seq
    const frame = build(seq)
    this.#pending.push({ seq, frame, observerFrame: buildObserver?.(seq), line })
    if (this.#inFlight !== null && (this.#pendingChars += frame.length) >= BACKLOG_CHARS && !this.#backlogged) {
      this.#backlogged = true
      this.#o.onBacklog?.(true)
    }
    this.#schedule()
    return seq
  }

  /**
   * Committed events with seq > `after`, up to `upTo`, at most `limit`, and
   * with `maxBytes` cut as EventStore.read does (one store read). Serves from
   * the held (unsaved) frames where the store does not have them.
   */
  async read (after: number, limit: number, upTo = this.#readable(), maxBytes?: number): Promise<StoredEvent[]> {
    return await this.#readWith(after, limit, upTo, maxBytes, (want) => this.#o.store.read(this.#o.sessionId, after, want, maxBytes), (e) => e)
  }

  /** `read` with each frame as its UTF-8 bytes, as the store holds them (EventStore.readRaw): history pages copy them as they are. */
  async readRaw (after: number, limit: number, upTo = this.#readable(), maxBytes?: number): Promise<RawEvent[]> {
    return await this.#readWith(after, limit, upTo, maxBytes, (want) => this.#o.store.readRaw(this.#o.sessionId, after, want, maxBytes, upTo),
      (e) => ({ seq: e.seq, frame: Buffer.from(e.frame) }))
  }

  async #readWith<T extends { seq: number }> (after: number, limit: number, upTo: number, maxBytes: number | undefined,
    fromStore: (want: number) => Promise<T[]>, fromHeld: (e: LogEvent) => T): Promise<T[]> {
    // Seqs are contiguous, so no more than this many can lie in (after, upTo]:
    // the store is never asked for (and the budget never spent on) later ones.
    const want = Math.min(limit, upTo - after)
    if (want <= 0) return []
    for (;;) {
      const heldFrom = this.#unsaved[0]?.seq
      if (heldFrom !== undefined && after + 1 >= heldFrom) break
      const events = await fromStore(want)
      const kept = events.filter((e) => e.seq <= upTo)
      if (kept.length > 0 || heldFrom === undefined) return kept
      // Held frames written back while the store answered have left #unsaved: ask the store again, which has them.
      if (this.#unsaved[0]?.seq === heldFrom) break
    }
    const held: LogEvent[] = []
    for (const e of this.#unsaved) {
      if (held.length >= want || e.seq > upTo) break
      if (e.seq > after) held.push(e)
    }
    return withinBytes(held, maxBytes).map(fromHeld)
  }

  /**
   * Oldest seq still readable (store, else held frames); null when there is
   * none. Rejects when the store does not answer: the frames held in memory
   * are the newest ones, never evidence of where the log starts.
   */
  async firstSeq (): Promise<number | null> {
    const stored = await this.#o.store.firstSeq(this.#o.sessionId)
    return stored ?? this.#unsaved[0]?.seq ?? null
  }

  /** Waits until every queued event is committed and, if the store answers, saved. */
  async flush (deadlineMs: number): Promise<void> {
    const deadline = Date.now() + deadlineMs
    while (!this.#fenced && (this.#pending.length > 0 || this.#inFlight !== null || this.#unsaved.length > 0) && Date.now() < deadline) {
      if (this.#inFlight !== null) await this.#inFlight
      else if (this.#pending.length > 0) this.#drain()
      else await this.#retryUnsaved()
      if (this.#unsaved.length > 0 && this.#inFlight === null) await delay(Math.min(200, Math.max(0, deadline - Date.now())))
    }
  }

  close (): void {
    this.#closed = true
    if (this.#retryTimer !== null) clearTimeout(this.#retryTimer)
  }

  #schedule (): void {
    if (this.#scheduled || this.#inFlight !== null) return
    this.#scheduled = true
    // A microtask lets every line of one stdout chunk join the same batch.
    queueMicrotask(() => { this.#scheduled = false; this.#drain() })
  }

  #drain (): void {
    if (this.#inFlight !== null || this.#pending.length === 0) return
    // Taken out by splice, not by swapping in a new `[]`: V8 can decide to
    // allocate an array literal's objects in the old generation (allocation-
    // site pretenuring, misled while many sessions start at once), and a
    // dead old array keeps the young events it held alive through every
    // scavenge: nearly every relayed line was then promoted, and the
    // mark-compacts that followed were the 100 × 100 latency tail
    // (docs/PERFORMANCE.md §17). splice allocates without such a site.
    const batch = this.#pending.splice(0)
    this.#backlogLeft()
    // Once, for the store and every client (frame-bytes.ts).
    encodeFrames(batch)
    const lease = this.#o.lease?.()
    if (this.#fenced || lease === null) {
      // Not this node's to write: never stored, so never relayed either.
      this.#o.logger.error({ session: this.#o.sessionId, from: (batch[0] as LogEvent).seq, events: batch.length }, 'events of a session this node does not own were dropped')
      return
    }
    if (this.#degraded) {
      // The store is down: relay now, save later, in order.
      this.#commit(batch)
      this.#hold(batch)
      this.#drain()
      return
    }
    this.#inFlight = this.#append(batch, lease).then(
      () => { this.#commit(batch) },
      (err: unknown) => {
        if (err instanceof FencedError) { this.#fence(); return }
        this.#o.logger.warn({ err, session: this.#o.sessionId }, 'event store append failed; holding events in memory')
        this.#commit(batch)
        this.#hold(batch)
        this.#setDegraded(true)
      }
    ).finally(() => {
      this.#inFlight = null
      this.#drain()
    })
  }

  /**
   * One fenced write, tried again once when the refusal only meant that the
   * lease lapsed (a long pause, or a store that restarted without its data)
   * and it could be taken back: nobody else wrote meanwhile.
   */
  async #append (events: StoredEvent[], lease: Lease | undefined): Promise<void> {
    try {
      await this.#o.store.append(this.#o.sessionId, events, lease)
    } catch (err) {
      if (!(err instanceof FencedError) || lease === undefined || this.#o.reclaim === undefined || !(await this.#o.reclaim(lease))) throw err
      await this.#o.store.append(this.#o.sessionId, events, lease)
    }
  }

  /** The store refused a write: another node owns the session. Everything waiting is dropped, unrelayed. */
  #fence (): void {
    if (this.#fenced) return
    this.#fenced = true
    this.#pending = []
    this.#backlogLeft()
    this.#unsaved = []
    if (this.#retryTimer !== null) clearTimeout(this.#retryTimer)
    this.#retryTimer = null
    this.#o.onFenced?.()
  }

  /** Nothing waits behind the append in flight any more: the source may go on. */
  #backlogLeft (): void {
    this.#pendingChars = 0
    if (!this.#backlogged) return
    this.#backlogged = false
    this.#o.onBacklog?.(false)
  }

  #commit (batch: LogEvent[]): void {
    this.#committedSeq = (batch[batch.length - 1] as LogEvent).seq
    this.#o.onCommit(batch)
  }

  #hold (batch: LogEvent[]): void {
    // Relayed already: held as strings, not pinning the batch's encoded buffer through an outage.
    for (const e of batch) e.bytes = undefined
    this.#unsaved.push(...batch)
    const over = this.#unsaved.length - this.#o.maxUnsaved
    if (over > 0) this.#lost.drop(this.#unsaved.splice(0, over))
    this.#armRetry()
  }

  #armRetry (): void {
    if (this.#retryTimer !== null || this.#closed) return
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = null
      void this.#retryUnsaved()
    }, this.#retryMs)
    this.#retryTimer.unref()
  }

  async #retryUnsaved (): Promise<void> {
    // Frames relayed while the losses are checked are held too: written before the log is healthy
    // again, or a later frame would reach the store first and the store would skip them as held.
    // Checked again only after new drops: a CLI that keeps printing would otherwise keep the log degraded.
    let checked = -1
    for (;;) {
      while (this.#unsaved.length > 0) {
        const chunk = this.#unsaved.slice(0, WRITE_CHUNK)
        const lease = this.#o.lease?.()
        if (this.#fenced || lease === null) return
        try {
          await this.#append(chunk, lease)
        } catch (err) {
          if (err instanceof FencedError) { this.#fence(); return }
          this.#retryMs = Math.min(RETRY_MAX_MS, this.#retryMs * 2)
          this.#armRetry()
          return
        }
        // Drop what was written; the array may have grown (or been trimmed) meanwhile.
        const lastWritten = (chunk[chunk.length - 1] as LogEvent).seq
        const firstKept = this.#unsaved.findIndex((e) => e.seq > lastWritten)
        this.#unsaved.splice(0, firstKept === -1 ? this.#unsaved.length : firstKept)
      }
      this.#retryMs = RETRY_MIN_MS
      const episode = this.#lost.episode
      if (episode === null || checked === this.#lost.drops) break
      checked = this.#lost.drops
      await this.#lost.confirm(episode)
    }
    this.#setDegraded(false)
  }

  #setDegraded (degraded: boolean): void {
    if (this.#degraded === degraded) return
    this.#degraded = degraded
    // An episode may begin just before the outage is declared (the failed batch itself overflowed).
    const found = degraded ? null : this.#lost.endEpisode()
    const episode = found !== null && found.dropped > 0 ? found : null
    if (episode !== null) {
      this.#o.logger.warn({ session: this.#o.sessionId, ...episode }, 'event store answers again; events dropped from history during the outage')
    }
    this.#o.onDegraded(degraded, episode)
  }
}

function delay (ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}
