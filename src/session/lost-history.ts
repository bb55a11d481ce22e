/**
 * What store outages dropped from a session's history (event-log.ts): the
 * exact seq ranges given up once too many frames were held for a store that
 * did not answer (kept in the session record, so a resume verdict can name
 * them), and the current outage's losses, reported once however many batches
 * it drops, after they are checked against what the store holds after all.
 */
import type { Logger } from 'pino'
import type { EventStore, StoredEvent } from '../store/store.js'

/** Seqs `[from, to]` (inclusive) that are missing from history. */
export type SeqRange = [from: number, to: number]

/** What one outage dropped from history (STORE_QUEUE_MAX passed). */
export interface OverflowEpisode {
  /** First and last seq dropped; `dropped` may be fewer when a write succeeded in between. */
  from: number
  to: number
  dropped: number
}

export interface LostHistoryOptions {
  sessionId: string
  store: EventStore
  /** Ranges dropped from history earlier (kept in the session record). */
  lostRanges?: SeqRange[] | undefined
  logger: Logger
  /** The first drop of an outage (once per outage): what is dropped so far. */
  onOverflow: (episode: OverflowEpisode) => void
}

/** At most this many lost ranges are remembered per session. */
const MAX_LOST_RANGES = 100

/** Reading back a dropped range after an outage goes in pages of at most this many events (as held frames are written back) … */
const CHECK_PAGE_EVENTS = 1000
/** … and of about this many bytes. */
export const CHECK_PAGE_BYTES = 256 * 1024

export class LostHistory {
  readonly #o: LostHistoryOptions
  readonly #lost: SeqRange[]
  /** What the current outage dropped; null until it drops something. */
  #episode: OverflowEpisode | null = null
  /** Drops so far (#drop calls): what an outage's check of its losses has seen. */
  #drops = 0

  constructor (options: LostHistoryOptions) {
    this.#o = options
    this.#lost = (options.lostRanges ?? []).map(([from, to]) => [from, to])
  }

  /** Every range dropped from history, ascending (a copy). */
  get ranges (): SeqRange[] { return this.#lost.map(([from, to]) => [from, to]) }
  /** What the current outage dropped; null until it drops something. */
  get episode (): OverflowEpisode | null { return this.#episode }
  /** Drops so far: what an outage's check of its losses has seen. */
  get drops (): number { return this.#drops }

  /** The outage is over: its episode (null when it dropped nothing), and the next outage starts a new one. */
  endEpisode (): OverflowEpisode | null {
    const found = this.#episode
    this.#episode = null
    return found
  }

  /** The dropped ranges within (after, upTo], clipped to it. */
  within (after: number, upTo: number): SeqRange[] {
    const out: SeqRange[] = []
    for (const [from, to] of this.#lost) {
      if (to <= after || from > upTo) continue
      out.push([Math.max(from, after + 1), Math.min(to, upTo)])
    }
    return out
  }

  /** Forgets held frames for good: their range is remembered, and reported once per outage. */
  drop (dropped: StoredEvent[]): void {
    this.#drops++
    const from = (dropped[0] as StoredEvent).seq
    const to = (dropped[dropped.length - 1] as StoredEvent).seq
    const last = this.#lost[this.#lost.length - 1]
    if (last !== undefined && last[1] + 1 >= from) last[1] = Math.max(last[1], to)
    else this.#lost.push([from, to])
    // Forgotten rather than merged (a merge would call the seqs between them missing): a
    // replay still marks the jump over a forgotten range with a `gap` frame.
    if (this.#lost.length > MAX_LOST_RANGES) this.#lost.shift()
    if (this.#episode !== null) {
      this.#episode.to = to
      this.#episode.dropped += dropped.length
      return
    }
    this.#episode = { from, to, dropped: dropped.length }
    this.#o.logger.error({ session: this.#o.sessionId, from, to }, 'STORE_QUEUE_MAX reached: the oldest unsaved events are dropped from history until the store answers')
    this.#o.onOverflow({ ...this.#episode })
  }

  /**
   * An append that timed out may still have been applied (a paused Redis runs
   * the commands waiting on its socket once it resumes: the failed batch, and
   * retries of held frames later dropped), so frames dropped as unsaved may be
   * in the store after all, in any pattern. Before the outage's losses are
   * reported, each of its ranges is read back once (seqs only matter; pages
   * bounded in bytes) and replaced by the sub-ranges the store really lacks.
   */
  async confirm (episode: OverflowEpisode): Promise<void> {
    try {
      for (let i = this.#lost.length - 1; i >= 0; i--) {
        const [from, to] = this.#lost[i] as SeqRange
        if (to < episode.from) break
        this.#lost.splice(i, 1, ...await this.#missingIn(from, to))
      }
    } catch (err) {
      this.#o.logger.warn({ err, session: this.#o.sessionId }, 'could not check which dropped events the store has after all; reporting all of them')
      return
    }
    const mine = this.#lost.filter(([, to]) => to >= episode.from)
    episode.dropped = mine.reduce((n, [from, to]) => n + to - from + 1, 0)
    episode.from = mine[0]?.[0] ?? episode.from
    episode.to = mine[mine.length - 1]?.[1] ?? episode.to
  }

  /** The sub-ranges of [from, to] the store does not hold. */
  async #missingIn (from: number, to: number): Promise<SeqRange[]> {
    const missing: SeqRange[] = []
    let cursor = from - 1
    while (cursor < to) {
      const page = await this.#o.store.read(this.#o.sessionId, cursor, Math.min(CHECK_PAGE_EVENTS, to - cursor), CHECK_PAGE_BYTES)
      const inRange = page.filter((e) => e.seq <= to)
      for (const e of inRange) {
        if (e.seq > cursor + 1) missing.push([cursor + 1, e.seq - 1])
        cursor = e.seq
      }
      if (inRange.length < page.length || inRange.length === 0) break
    }
    if (cursor < to) missing.push([cursor + 1, to])
    return missing
  }
}
