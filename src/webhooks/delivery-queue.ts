/**
 * The webhook deliveries waiting, in flight and backing off, in memory.
 * Adding one never waits: the relay calls in through the notifier, and a
 * receiver that is slow, down or hanging must cost it nothing. Hence:
 *
 * - bounded: past `queueMax` waiting deliveries the oldest is dropped
 *   (warned, at most every 10 s, and counted);
 * - one lane per session: a session's deliveries go one at a time, in
 *   order, a retrying one holding back those behind it (ordering is best
 *   effort: a dropped or abandoned delivery leaves a gap);
 * - at most `concurrency` requests in flight, lanes served oldest-ready first;
 * - retries on what `send` calls retryable, after exponential backoff with
 *   jitter, or the receiver's Retry-After when longer, up to `maxAttempts`;
 * - `close` stops retries and timers, lets what is in flight (and what never
 *   had an attempt) go within a deadline, then aborts the rest; with an
 *   outbox keeping them, a session whose head failed lately keeps all of
 *   its deliveries back, so the node taking them over sends them in order;
 * - `onEnded` hears of each delivery that ended for good (delivered,
 *   rejected, exhausted, dropped), so the outbox that kept it forgets it;
 *   one abandoned at shutdown is not ended: the outbox keeps it for another
 *   node.
 */
import { setMaxListeners } from 'node:events'
import type { Logger } from 'pino'

/** One event for one receiver; `body` is fixed at creation, so every attempt sends the same bytes. */
export interface Delivery {
  id: string
  type: string
  sessionId: string
  body: string
  /** Attempts made so far. */
  attempts: number
}

/** What one attempt came to. */
export type AttemptResult =
  | { outcome: 'delivered', status: number }
  /** Worth trying again (network error, timeout, 408, 429, 5xx); `retryAfterMs` from the receiver's Retry-After. */
  | { outcome: 'retry', reason: string, status?: number, retryAfterMs?: number }
  /** Never worth trying again (any other answer). */
  | { outcome: 'rejected', reason: string, status: number }

/** Sends one attempt; must not throw (a failure is a result) and must stop when `signal` aborts. */
export type SendAttempt = (delivery: Delivery, signal: AbortSignal) => Promise<AttemptResult>

export interface DeliveryQueueOptions {
  send: SendAttempt
  logger: Logger
  concurrency: number
  queueMax: number
  maxAttempts: number
  retryBaseMs: number
  retryMaxMs: number
  /** A number in [0, 1) for the jitter (tests pass their own). */
  random?: () => number
  /** Told of each delivery that ended for good (not of one abandoned at shutdown). */
  onEnded?: (delivery: Delivery, how: Ending) => void
  /** What happens to deliveries abandoned at shutdown, for the log line: `lost`, or `kept` in the store's outbox. */
  abandonedAre?: 'lost' | 'kept'
}

/** How a delivery ended for good. */
export type Ending = 'delivered' | 'rejected' | 'exhausted' | 'dropped'

/** Counts since the queue was made; `waiting` and `inFlight` are now. */
export interface DeliveryStats {
  waiting: number
  inFlight: number
  delivered: number
  /** Answered with a status that is never retried. */
  rejected: number
  /** Still failing after maxAttempts. */
  exhausted: number
  /** Dropped, oldest first, because the queue was full. */
  dropped: number
  /** Left unsent (or cut off) when the queue closed. */
  abandoned: number
}

/** A session's deliveries in order; the head is the one being sent or backing off. */
interface Lane {
  sessionId: string
  items: Delivery[]
  state: 'ready' | 'sending' | 'backoff'
  timer: NodeJS.Timeout | null
}

/** How often a full queue says so (it may stay full for a long outage). */
const DROP_WARNING_EVERY_MS = 10_000

export class DeliveryQueue {
  readonly #o: DeliveryQueueOptions
  readonly #random: () => number
  readonly #lanes = new Map<string, Lane>()
  /** Lanes whose head may be sent now, in the order they became ready. */
  readonly #ready: Lane[] = []
  /** Every delivery held, oldest first (the head of a sending lane included). */
  readonly #held = new Set<Delivery>()
  readonly #sending = new Set<Delivery>()
  readonly #stats = { delivered: 0, rejected: 0, exhausted: 0, dropped: 0, abandoned: 0 }
  /** Aborts whatever is in flight when a close runs out of time. */
  readonly #abort = new AbortController()
  #closing = false
  #idle: Array<() => void> = []
  #lastDropWarning = -Infinity
  #droppedSinceWarning = 0

  constructor (options: DeliveryQueueOptions) {
    this.#o = options
    this.#random = options.random ?? Math.random
    // Every request in flight listens on it: up to `concurrency` at once, past Node's warning at 10.
    setMaxListeners(0, this.#abort.signal)
  }

  get stats (): DeliveryStats {
    return { waiting: this.#held.size - this.#sending.size, inFlight: this.#sending.size, ...this.#stats }
  }

  /** Every delivery not ended yet (waiting, backing off or in flight), oldest first. */
  held (): Delivery[] {
    return [...this.#held]
  }

  /** Queues `delivery` (sent at once when a slot is free); ignored once closing. Never waits, never throws. */
  add (delivery: Delivery): void {
    if (this.#closing) {
      this.#o.logger.debug({ delivery: delivery.id, type: delivery.type }, 'webhook not queued: closing')
      return
    }
    if (this.#held.size - this.#sending.size >= this.#o.queueMax) this.#dropOldest()
    this.#held.add(delivery)
    let lane = this.#lanes.get(delivery.sessionId)
    if (lane === undefined) {
      lane = { sessionId: delivery.sessionId, items: [], state: 'ready', timer: null }
      this.#lanes.set(delivery.sessionId, lane)
      this.#ready.push(lane)
    }
    lane.items.push(delivery)
    this.#pump()
  }

  /**
   * Stops retrying and accepting; gives what is in flight, and deliveries
   * not yet tried, `deadlineMs` to go; then aborts what is still in flight
   * and drops the rest (counted as abandoned). Resolves once nothing is in
   * flight.
   */
  async close (deadlineMs: number): Promise<void> {
    if (!this.#closing) {
      this.#closing = true
      for (const lane of this.#lanes.values()) {
        if (lane.state !== 'backoff') continue
        // It failed lately: at shutdown there is no time to wait for its receiver.
        clearTimeout(lane.timer ?? undefined)
        this.#abandon(lane)
      }
      this.#pump()
    }
    let timer: NodeJS.Timeout | undefined
    const deadline = new Promise<void>((resolve) => { timer = setTimeout(resolve, deadlineMs) })
    await Promise.race([this.#whenIdle(), deadline])
    clearTimeout(timer)
    // Past the deadline: nothing new starts, in-flight requests are cut, the rest is dropped.
    this.#abort.abort()
    for (const lane of [...this.#lanes.values()]) {
      const unsent = lane.items.filter((d) => !this.#sending.has(d))
      for (const d of unsent) this.#remove(lane, d)
      this.#stats.abandoned += unsent.length
    }
    await this.#whenIdle()
    const { abandoned } = this.#stats
    if (abandoned === 0) return
    if (this.#o.abandonedAre === 'kept') this.#o.logger.info({ abandoned }, 'webhooks closed with deliveries unsent; the store keeps them for another node or the next start')
    else this.#o.logger.warn({ abandoned }, 'webhooks closed with deliveries unsent')
  }

  /** Starts the heads of ready lanes while a slot is free. */
  #pump (): void {
    while (this.#sending.size < this.#o.concurrency && !this.#abort.signal.aborted) {
      const lane = this.#ready.shift()
      if (lane === undefined) return
      // A lane emptied (or replaced) since it was queued as ready is skipped.
      if (this.#lanes.get(lane.sessionId) !== lane || lane.state !== 'ready' || lane.items.length === 0) continue
      this.#start(lane, lane.items[0] as Delivery)
    }
  }

  #start (lane: Lane, delivery: Delivery): void {
    lane.state = 'sending'
    this.#sending.add(delivery)
    delivery.attempts++
    this.#o.send(delivery, this.#abort.signal)
      .catch((err: unknown): AttemptResult => ({ outcome: 'retry', reason: `send failed: ${(err as Error).message}` }))
      .then((result) => { this.#settle(lane, delivery, result) })
      .catch((err: unknown) => { this.#o.logger.error({ err }, 'webhook queue failed to settle a delivery') })
  }

  #settle (lane: Lane, delivery: Delivery, result: AttemptResult): void {
    this.#sending.delete(delivery)
    // Counts change before the line is logged: whoever reads the log sees them.
    const log = { delivery: delivery.id, type: delivery.type, session: delivery.sessionId, attempt: delivery.attempts }
    // In flight, it is its lane's head: nothing drops or abandons a delivery in flight.
    if (result.outcome === 'delivered') {
      this.#finish(lane, 'delivered')
      this.#o.logger.debug({ ...log, status: result.status }, 'webhook delivered')
    } else if (result.outcome === 'rejected') {
      this.#finish(lane, 'rejected')
      this.#o.logger.warn({ ...log, status: result.status, reason: result.reason }, 'webhook rejected by its receiver; not retried')
    } else if (this.#closing) {
      this.#abandon(lane)
      this.#o.logger.debug({ ...log, reason: result.reason }, 'webhook attempt failed while closing; not retried')
    } else if (delivery.attempts >= this.#o.maxAttempts) {
      this.#finish(lane, 'exhausted')
      this.#o.logger.warn({ ...log, status: result.status, reason: result.reason }, 'webhook given up after its last attempt')
    } else {
      const delayMs = this.#delay(delivery.attempts, result.retryAfterMs)
      this.#o.logger.info({ ...log, status: result.status, reason: result.reason, retry_in_ms: delayMs }, 'webhook attempt failed; retrying')
      lane.state = 'backoff'
      lane.timer = setTimeout(() => {
        lane.timer = null
        lane.state = 'ready'
        this.#ready.push(lane)
        this.#pump()
      }, delayMs)
    }
    this.#pump()
    this.#checkIdle()
  }

  /**
   * The wait after attempt `n` failed: base × 2^(n-1), capped at retryMaxMs,
   * of which a random half is waived (so many gateways retrying a receiver
   * that came back do not all hit it at once), or the receiver's
   * Retry-After when longer (also capped).
   */
  #delay (n: number, retryAfterMs: number | undefined): number {
    const full = Math.min(this.#o.retryMaxMs, this.#o.retryBaseMs * 2 ** Math.min(n - 1, 40))
    const jittered = Math.round(full / 2 + this.#random() * (full / 2))
    return Math.min(this.#o.retryMaxMs, Math.max(jittered, retryAfterMs ?? 0))
  }

  /** Ends the lane's head as `how` and moves the lane on (ready with its next, or gone). */
  #finish (lane: Lane, how: Ending | 'abandoned'): void {
    const head = lane.items[0]
    if (head !== undefined) this.#remove(lane, head)
    this.#stats[how]++
    if (head !== undefined && how !== 'abandoned') this.#ended(head, how)
  }

  /**
   * Abandons the lane's failing head at close. Kept for another node, it
   * takes the rest of its lane along: sent now, they would reach the
   * receiver before it. Lost, it leaves a gap, and the rest still goes.
   */
  #abandon (lane: Lane): void {
    if (this.#o.abandonedAre !== 'kept') {
      this.#finish(lane, 'abandoned')
      return
    }
    const items = [...lane.items]
    for (const d of items) this.#remove(lane, d)
    this.#stats.abandoned += items.length
  }

  /** Tells `onEnded`, which must not break the queue. */
  #ended (delivery: Delivery, how: Ending): void {
    try {
      this.#o.onEnded?.(delivery, how)
    } catch (err) {
      this.#o.logger.error({ err, delivery: delivery.id }, 'webhook queue: onEnded failed')
    }
  }

  /** Takes `delivery` out of `lane` and the queue; a lane left empty goes, one whose head went is ready again. */
  #remove (lane: Lane, delivery: Delivery): void {
    this.#held.delete(delivery)
    const at = lane.items.indexOf(delivery)
    if (at === -1) return
    lane.items.splice(at, 1)
    if (at !== 0 || this.#sending.has(delivery)) return
    clearTimeout(lane.timer ?? undefined)
    lane.timer = null
    if (lane.items.length === 0) {
      if (this.#lanes.get(lane.sessionId) === lane) this.#lanes.delete(lane.sessionId)
      return
    }
    if (lane.state !== 'ready') {
      lane.state = 'ready'
      this.#ready.push(lane)
    }
  }

  /** Drops the oldest delivery not in flight (the queue is full). */
  #dropOldest (): void {
    for (const d of this.#held) {
      if (this.#sending.has(d)) continue
      const lane = this.#lanes.get(d.sessionId)
      if (lane !== undefined) this.#remove(lane, d)
      else this.#held.delete(d)
      this.#stats.dropped++
      this.#ended(d, 'dropped')
      this.#droppedSinceWarning++
      const now = performance.now()
      if (now - this.#lastDropWarning >= DROP_WARNING_EVERY_MS) {
        this.#o.logger.warn({ delivery: d.id, type: d.type, session: d.sessionId, dropped: this.#droppedSinceWarning, queue_max: this.#o.queueMax },
          'webhook queue full; dropped the oldest')
        this.#lastDropWarning = now
        this.#droppedSinceWarning = 0
      }
      return
    }
  }

  #whenIdle (): Promise<void> {
    return new Promise((resolve) => {
      this.#idle.push(resolve)
      this.#checkIdle()
    })
  }

  /** Resolves close's waits once nothing is in flight and, before the deadline, nothing is left to send. */
  #checkIdle (): void {
    const idle = this.#sending.size === 0 && (this.#abort.signal.aborted || this.#held.size === 0)
    if (!idle) return
    for (const resolve of this.#idle.splice(0)) resolve()
  }
}
