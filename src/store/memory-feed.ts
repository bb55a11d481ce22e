/**
 * The in-process event feed, and the follower logic every feed shares.
 *
 * The memory store calls `publish` after each append; followers get those
 * batches live. Each follower first catches up from the stored log (the
 * injected `read`) and does so again whenever it may have missed something:
 * a batch that does not follow the last seq it delivered, or a `resync` (the
 * Redis feed calls it after a lost subscriber connection). Batches published
 * during a catch-up are held and then delivered without what the catch-up
 * already gave, so the switch from log to live has no gap and no duplicate.
 *
 * RedisFeed (redis-feed.ts) is this class plus a Redis subscription: it
 * subscribes in `watch` (catch-up waits for it), publishes what the channel
 * brings, and unsubscribes in `unwatch`. Keeping one copy of the ordering
 * logic means both stores behave alike and one unit test covers the hard part.
 */
import type { EventFeed, StoredEvent } from './store.js'

export interface MemoryFeedConfig {
  /** The store's read: up to `limit` events with seq > `after`, ascending. */
  read: (sessionId: string, after: number, limit: number) => Promise<StoredEvent[]>
  /**
   * Runs when a session gets its first follower; its followers read the log
   * only once it resolved, so whatever it sets up (a subscription) sees every
   * later append. Retried with backoff while it rejects and the session is followed.
   */
  watch?: ((sessionId: string) => Promise<void>) | undefined
  /** Runs when the last follower of a session goes. */
  unwatch?: ((sessionId: string) => void) | undefined
  /** Events per catch-up read. Default 500. */
  pageSize?: number | undefined
}

interface Batch {
  events: StoredEvent[]
  /** Arrival number among the follower's held batches, to tell it from batches after a read. */
  arrival: number
}

interface Follower {
  readonly sessionId: string
  readonly onEvents: (events: StoredEvent[]) => void
  readonly onError: ((err: Error) => void) | undefined
  /** Highest seq delivered (or the `after` it started from). */
  last: number
  closed: boolean
  /** A catch-up is running; published batches wait in `held`. */
  syncing: boolean
  /** Another catch-up was asked for while one ran: read once more at its end. */
  again: boolean
  held: Batch[]
  arrivals: number
  /** The failure being retried has been reported (once per episode). */
  reported: boolean
  timer: NodeJS.Timeout | null
  wake: (() => void) | null
}

interface Watched {
  followers: Set<Follower>
  /** Settles once `watch` did its work; undefined until first asked for, or after it failed. */
  ready: Promise<void> | undefined
}

const PAGE_SIZE = 500
const RETRY_FIRST_MS = 100
const RETRY_MAX_MS = 5000

export class MemoryFeed implements EventFeed {
  readonly #read: MemoryFeedConfig['read']
  readonly #watch: MemoryFeedConfig['watch']
  readonly #unwatch: MemoryFeedConfig['unwatch']
  readonly #pageSize: number
  readonly #sessions = new Map<string, Watched>()
  #closed = false

  constructor (config: MemoryFeedConfig) {
    this.#read = config.read
    this.#watch = config.watch
    this.#unwatch = config.unwatch
    this.#pageSize = Math.max(1, config.pageSize ?? PAGE_SIZE)
  }

  follow (sessionId: string, after: number, onEvents: (events: StoredEvent[]) => void, onError?: (err: Error) => void): () => void {
    if (this.#closed) throw new Error('event feed is closed')
    let session = this.#sessions.get(sessionId)
    if (session === undefined) {
      session = { followers: new Set(), ready: undefined }
      this.#sessions.set(sessionId, session)
    }
    const follower: Follower = {
      sessionId,
      onEvents,
      onError,
      last: Math.max(0, Math.floor(after)),
      closed: false,
      syncing: false,
      again: false,
      held: [],
      arrivals: 0,
      reported: false,
      timer: null,
      wake: null
    }
    session.followers.add(follower)
    void this.#catchUp(follower)
    return () => { this.#unfollow(follower) }
  }

  /**
   * Hands the events just appended to a session (contiguous, ascending) to
   * its followers. Seqs a follower already has are dropped; a batch that does
   * not follow its last seq makes it catch up from the log first.
   */
  publish (sessionId: string, events: StoredEvent[]): void {
    if (events.length === 0) return
    const session = this.#sessions.get(sessionId)
    if (session === undefined) return
    for (const follower of session.followers) this.#offer(follower, events, false)
  }

  /**
   * Makes every follower of `sessionId` (of every session without it) read
   * the log from its last seq, as something may have been missed (the
   * subscription was lost, the feed's flag had expired).
   */
  resync (sessionId?: string): void {
    const sessions = sessionId === undefined ? [...this.#sessions.values()] : [this.#sessions.get(sessionId)]
    for (const session of sessions) {
      for (const follower of session?.followers ?? []) {
        if (follower.syncing) follower.again = true
        else void this.#catchUp(follower)
      }
    }
  }

  /** Reports `err` to every follower of `sessionId` (a message the feed could not use). */
  fail (sessionId: string, err: Error): void {
    for (const follower of this.#sessions.get(sessionId)?.followers ?? []) report(follower, err)
  }

  /** Ids of the sessions followed now. */
  sessions (): string[] {
    return [...this.#sessions.keys()]
  }

  async close (): Promise<void> {
    this.#closed = true
    for (const session of this.#sessions.values()) {
      for (const follower of session.followers) stop(follower)
    }
    this.#sessions.clear()
  }

  #unfollow (follower: Follower): void {
    if (follower.closed) return
    stop(follower)
    const session = this.#sessions.get(follower.sessionId)
    if (session === undefined || !session.followers.delete(follower) || session.followers.size > 0) return
    this.#sessions.delete(follower.sessionId)
    this.#unwatch?.(follower.sessionId)
  }

  /** Delivers `events` to a follower, or holds them and catches up when they do not follow its last seq. */
  #offer (follower: Follower, events: StoredEvent[], jumpAllowed: boolean): void {
    if (follower.closed) return
    if (follower.syncing) {
      follower.held.push({ events, arrival: follower.arrivals++ })
      return
    }
    const fresh = after(events, follower.last)
    if (fresh.length === 0) return
    if ((fresh[0] as StoredEvent).seq !== follower.last + 1 && !jumpAllowed) {
      follower.held.push({ events, arrival: follower.arrivals++ })
      void this.#catchUp(follower)
      return
    }
    deliver(follower, fresh)
  }

  /**
   * Reads the log from the follower's last seq to its end, then delivers the
   * batches held meanwhile. A held batch that arrived before the last read
   * was sent was appended before it, so seqs it has beyond a gap are ones
   * the log no longer holds (trimmed): it is delivered with the jump. A gap
   * in a later batch means appends went unpublished: catch up again.
   */
  async #catchUp (follower: Follower): Promise<void> {
    if (follower.closed || follower.syncing) return
    follower.syncing = true
    let readAt = 0
    let delay = RETRY_FIRST_MS
    while (!follower.closed) {
      try {
        await this.#ready(follower.sessionId)
        if (follower.closed) return
        follower.again = false
        readAt = follower.arrivals
        const page = await this.#read(follower.sessionId, follower.last, this.#pageSize)
        if (follower.closed) return
        const fresh = after(page, follower.last)
        if (fresh.length > 0) deliver(follower, fresh)
        follower.reported = false
        delay = RETRY_FIRST_MS
        if (page.length < this.#pageSize && !follower.again) break
      } catch (err) {
        if (follower.closed) return
        report(follower, err instanceof Error ? err : new Error(String(err)))
        await pause(follower, delay)
        delay = Math.min(delay * 2, RETRY_MAX_MS)
      }
    }
    if (follower.closed) return
    follower.syncing = false
    const held = follower.held
    follower.held = []
    follower.arrivals = 0
    for (let i = 0; i < held.length; i++) {
      const batch = held[i] as Batch
      if (follower.syncing) {
        // A later batch started another catch-up: the rest wait for it, in order.
        follower.held.push({ events: batch.events, arrival: follower.arrivals++ })
        continue
      }
      this.#offer(follower, batch.events, batch.arrival < readAt)
    }
  }

  /** The session's `watch`, run once (again after a failure). */
  #ready (sessionId: string): Promise<void> {
    const session = this.#sessions.get(sessionId)
    if (session === undefined || this.#watch === undefined) return Promise.resolve()
    if (session.ready === undefined) {
      const ready: Promise<void> = this.#watch(sessionId).catch((err: unknown) => {
        if (session.ready === ready) session.ready = undefined
        throw err
      })
      session.ready = ready
    }
    return session.ready
  }
}

/** The events of `events` with seq > `last` (a suffix, as they ascend). */
function after (events: StoredEvent[], last: number): StoredEvent[] {
  let i = 0
  while (i < events.length && (events[i] as StoredEvent).seq <= last) i++
  return i === 0 ? events : events.slice(i)
}

function deliver (follower: Follower, events: StoredEvent[]): void {
  follower.last = (events[events.length - 1] as StoredEvent).seq
  try {
    follower.onEvents(events)
  } catch (err) {
    // A throwing listener must not stop the feed for the session's other followers.
    report(follower, err instanceof Error ? err : new Error(String(err)), true)
  }
}

/** Tells the follower about a failure, once per episode of retries unless `always`. */
function report (follower: Follower, err: Error, always = false): void {
  if (follower.closed || (follower.reported && !always)) return
  if (!always) follower.reported = true
  try {
    follower.onError?.(err)
  } catch {
    // Its own problem; nothing sensible to do with it here.
  }
}

/** Waits `ms`, or less if the follower stops meanwhile. */
function pause (follower: Follower, ms: number): Promise<void> {
  return new Promise((resolve) => {
    follower.wake = () => {
      if (follower.timer !== null) clearTimeout(follower.timer)
      follower.timer = null
      follower.wake = null
      resolve()
    }
    follower.timer = setTimeout(follower.wake, ms)
  })
}

function stop (follower: Follower): void {
  follower.closed = true
  follower.held = []
  follower.wake?.()
}
