/**
 * Saves a session's record to the store under this node's lease, one write
 * after another so they land in order, and says when every write queued so
 * far (events included) is done.
 */
import type { Logger } from 'pino'
import { type EventStore, FencedError, type Lease, type SessionRecord } from '../store/store.js'
import type { EventLog } from './event-log.js'
import type { SessionOwnership } from './session-deps.js'

export interface RecordWriterOptions {
  /** The session's record, as this node has it (saved as it is at each write). */
  record: SessionRecord
  events: EventLog
  store: EventStore
  ownership: SessionOwnership
  /** This node's lease on the session, or null when it does not own it. */
  lease: () => Lease | null
  /** A write was refused as fenced under the lease still held: another node owns the session now. */
  onFenced: () => void
  log: Logger
}

export class RecordWriter {
  readonly #o: RecordWriterOptions
  #write: Promise<void> = Promise.resolve()

  constructor (options: RecordWriterOptions) {
    this.#o = options
  }

  /** Settles once the record writes queued so far are done (failed ones included). */
  get written (): Promise<void> { return this.#write }

  /** Saves the record; writes are chained so they land in order. */
  persist (): void {
    const { record, events, store, ownership } = this.#o
    const lease = this.#o.lease()
    // Only the owner writes the record (a node following a session elsewhere never does).
    if (lease === null) return
    record.last_seq = events.lastSeq
    const lost = events.lostRanges
    if (lost.length > 0) record.lost_ranges = lost
    const copy = structuredClone(record)
    this.#write = this.#write
      .then(async () => {
        try {
          await store.putSession(copy, lease)
        } catch (err) {
          // As for appends: a lease that merely lapsed is taken back and the write tried once more.
          if (!(err instanceof FencedError) || !(await ownership.reclaim(lease))) throw err
          await store.putSession(copy, lease)
        }
      })
      .catch((err: unknown) => {
        if (err instanceof FencedError && this.#o.lease() === lease) this.#o.onFenced()
        else if (err instanceof FencedError) this.#o.log.warn('a record write landed after the session lease was given up; dropped')
        else this.#o.log.warn({ err }, 'saving session record failed')
      })
  }

  /** Until every event and record write queued so far (and any queued meanwhile) is done. */
  async settle (deadlineMs: number): Promise<void> {
    for (;;) {
      await this.#o.events.flush(deadlineMs)
      const write = this.#write
      await write
      if (write === this.#write) return
    }
  }
}
