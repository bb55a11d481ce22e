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
 * from history and `onOverflow` says so.
 */
import type { Logger } from 'pino'
import { type EventStore, type StoredEvent, withinBytes } from '../store/store.js'

/** A committed event, with an optional alternative rendering for observers. */
export interface LogEvent extends StoredEvent {
  /** What a client that does not hold the session receives instead of `frame`. */
  observerFrame?: string | undefined
}

export interface EventLogOptions {
  sessionId: string
  store: EventStore
  /** Highest seq already in the store. */
  lastSeq: number
  maxUnsaved: number
  logger: Logger
  onCommit: (events: LogEvent[]) => void
  onDegraded: (degraded: boolean) => void
  onOverflow: (dropped: number) => void
}

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
  /** Committed but not yet in the store (only while degraded). */
  #unsaved: LogEvent[] = []
  #degraded = false
  #retryMs = RETRY_MIN_MS
  #retryTimer: NodeJS.Timeout | null = null
  #closed = false

  constructor (options: EventLogOptions) {
    this.#o = options
    this.#seq = options.lastSeq
    this.#committedSeq = options.lastSeq
  }

  /** Highest seq assigned. */
  get lastSeq (): number { return this.#seq }
  /** Highest seq handed to clients. */
  get committedSeq (): number { return this.#committedSeq }
  get degraded (): boolean { return this.#degraded }
  get unsavedCount (): number { return this.#unsaved.length }

  /** Assigns the next seq, builds the frame for it, and queues it. Returns the seq. */
  push (build: (seq: number) => string, buildObserver?: (seq: number) => string): number {
    const seq = ++this.#seq
    this.#pending.push({ seq, frame: build(seq), observerFrame: buildObserver?.(seq) })
    this.#schedule()
    return seq
  }

  /**
   * Committed events with seq > `after`, up to `upTo`, at most `limit`, and
   * with `maxBytes` cut as EventStore.read does (one store read). Serves from
   * the held (unsaved) frames where the store does not have them.
   */
  async read (after: number, limit: number, upTo = this.#committedSeq, maxBytes?: number): Promise<StoredEvent[]> {
    // Seqs are contiguous, so no more than this many can lie in (after, upTo]:
    // the store is never asked for (and the budget never spent on) later ones.
    const want = Math.min(limit, upTo - after)
    if (want <= 0) return []
    const heldFrom = this.#unsaved[0]?.seq
    if (heldFrom === undefined || after + 1 < heldFrom) {
      const events = await this.#o.store.read(this.#o.sessionId, after, want, maxBytes)
      const kept = events.filter((e) => e.seq <= upTo)
      if (kept.length > 0 || heldFrom === undefined) return kept
    }
    const held: LogEvent[] = []
    for (const e of this.#unsaved) {
      if (held.length >= want || e.seq > upTo) break
      if (e.seq > after) held.push(e)
    }
    return withinBytes(held, maxBytes)
  }

  /**
   * Oldest seq still readable (store or held frames); null when there is
   * none; undefined when the store did not answer and no frames are held.
   */
  async firstSeq (): Promise<number | null | undefined> {
    let stored: number | null
    try {
      stored = await this.#o.store.firstSeq(this.#o.sessionId)
    } catch {
      return this.#unsaved[0]?.seq
    }
    return stored ?? this.#unsaved[0]?.seq ?? null
  }

  /** Waits until every queued event is committed and, if the store answers, saved. */
  async flush (deadlineMs: number): Promise<void> {
    const deadline = Date.now() + deadlineMs
    while ((this.#pending.length > 0 || this.#inFlight !== null || this.#unsaved.length > 0) && Date.now() < deadline) {
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
    const batch = this.#pending
    this.#pending = []
    if (this.#degraded) {
      // The store is down: relay now, save later, in order.
      this.#commit(batch)
      this.#hold(batch)
      this.#drain()
      return
    }
    this.#inFlight = this.#o.store.append(this.#o.sessionId, batch.map(stored)).then(
      () => { this.#commit(batch) },
      (err: unknown) => {
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

  #commit (batch: LogEvent[]): void {
    this.#committedSeq = (batch[batch.length - 1] as LogEvent).seq
    this.#o.onCommit(batch)
  }

  #hold (batch: LogEvent[]): void {
    this.#unsaved.push(...batch)
    const over = this.#unsaved.length - this.#o.maxUnsaved
    if (over > 0) {
      this.#unsaved.splice(0, over)
      this.#o.logger.error({ session: this.#o.sessionId, dropped: over }, 'STORE_QUEUE_MAX reached: oldest unsaved events dropped from history')
      this.#o.onOverflow(over)
    }
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
    while (this.#unsaved.length > 0) {
      const chunk = this.#unsaved.slice(0, WRITE_CHUNK)
      try {
        await this.#o.store.append(this.#o.sessionId, chunk.map(stored))
      } catch {
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
    this.#setDegraded(false)
  }

  #setDegraded (degraded: boolean): void {
    if (this.#degraded === degraded) return
    this.#degraded = degraded
    this.#o.onDegraded(degraded)
  }
}

function stored (e: LogEvent): StoredEvent {
  return { seq: e.seq, frame: e.frame }
}

function delay (ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}
