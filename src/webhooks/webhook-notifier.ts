/**
 * Operator webhooks: the SessionEvents the session calls (permission
 * prompts asked and ended, turns finished, sessions ended), each turned into
 * a signed JSON POST to WEBHOOK_URL. A call builds the body (bounded in
 * size, see webhook-payload.ts) and queues it, and returns: delivery,
 * retries and a receiver that is down or hanging all happen off the relay's
 * path (delivery-queue.ts). docs/WEBHOOKS.md is the receiver's side.
 *
 * With an outbox, each delivery is also kept in the store until it ends, so
 * a node that crashes or stops with deliveries unsent leaves them for
 * another node, or its own next start, to send (outbox-sweep.ts). Keeping
 * is not waited for either: a store that does not answer costs the
 * deliveries their durability, not their sending.
 */
import type { Logger } from 'pino'
import { isLoopback } from '../net/loopback.js'
import type { SessionEvents, SessionRef } from '../session/session-events.js'
import type { OutboxEntry, WebhookOutbox } from '../store/store.js'
import { type Delivery, DeliveryQueue, type DeliveryStats } from './delivery-queue.js'
import type { WebhookEventType } from './webhook-event-types.js'
import { permissionRequestedData, permissionResolvedData, sessionEndedData, turnFinishedData, webhookBody } from './webhook-payload.js'
import { WebhookSender, describeTarget } from './webhook-sender.js'

export interface WebhookNotifierOptions {
  /** http(s) URL; `user:password@` in it is sent as Basic authentication. */
  url: string
  /** Key of the HMAC-SHA256 signature. */
  secret: string
  /** The event types sent; others are not even built. */
  events: readonly WebhookEventType[]
  timeoutMs: number
  maxAttempts: number
  retryBaseMs: number
  retryMaxMs: number
  concurrency: number
  queueMax: number
  logger: Logger
  /** A number in [0, 1) for the retry jitter (tests pass their own). */
  random?: () => number
  /** Where deliveries are kept until they end, under this node's name; without it they live in memory only. */
  outbox?: { store: WebhookOutbox, node: string }
}

/** What the outbox keeps of a delivery: enough to send the same bytes again, and its place in time. */
interface KeptText { v: 1, type: string, session: string, body: string, at: number, n: number }

/** At shutdown, what is in flight or never tried gets this long at most (or WEBHOOK_TIMEOUT_MS when shorter). */
export const CLOSE_DEADLINE_MS = 5_000
/** How long after a failed outbox removal it is tried again (sooner when the store reconnects). */
const REMOVE_RETRY_MS = 5_000
/**
 * How long an ended delivery's id is remembered once the store answered its
 * removal: a takeover of this node's own name that read the entry before
 * that removal may answer after it (adopt). Far longer than any takeover.
 */
const REMOVED_MEMORY_MS = 60_000

export class WebhookNotifier implements SessionEvents {
  readonly #events: ReadonlySet<WebhookEventType>
  readonly #log: Logger
  readonly #sender: WebhookSender
  readonly #queue: DeliveryQueue
  readonly #timeoutMs: number
  readonly #outbox: WebhookNotifierOptions['outbox']
  /** Orders deliveries kept in the same millisecond. */
  #kept = 0
  /** Whether the last keep failed: the first failure of a run is warned, the rest debug. */
  #keepFailing = false
  #recovered = 0
  /**
   * Deliveries this run ended whose removal from the outbox has not been
   * answered yet (true: it failed, and is tried again). adopt skips them: an
   * entry read back before its removal is no delivery to make again.
   */
  readonly #unremoved = new Map<string, boolean>()
  /** Ended deliveries whose removal the store answered, and when (performance.now()), oldest first: adopt skips them too. */
  readonly #removed = new Map<string, number>()
  #retryTimer: NodeJS.Timeout | null = null
  #closed: Promise<void> | null = null

  constructor (options: WebhookNotifierOptions) {
    this.#events = new Set(options.events)
    this.#log = options.logger.child({ webhook: describeTarget(options.url) })
    this.#timeoutMs = options.timeoutMs
    this.#sender = new WebhookSender({ url: options.url, secret: options.secret, timeoutMs: options.timeoutMs, maxSockets: options.concurrency })
    this.#queue = new DeliveryQueue({
      send: (delivery, signal) => this.#sender.send(delivery, signal),
      logger: this.#log,
      concurrency: options.concurrency,
      queueMax: options.queueMax,
      maxAttempts: options.maxAttempts,
      retryBaseMs: options.retryBaseMs,
      retryMaxMs: options.retryMaxMs,
      ...(options.random === undefined ? {} : { random: options.random }),
      ...(options.outbox === undefined ? {} : { onEnded: (delivery: Delivery) => { this.#forget(delivery) }, abandonedAre: 'kept' as const })
    })
    this.#outbox = options.outbox
    this.#log.info({ events: [...this.#events] }, 'webhooks on')
    const target = new URL(options.url)
    if (target.protocol === 'http:' && !isLoopback(target.hostname)) {
      // Signed, so not forged; but tool inputs and results would cross the network in clear.
      this.#log.warn('WEBHOOK_URL is plain http to another machine: bodies travel unencrypted; prefer https')
    }
  }

  /** Deliveries waiting, in flight, counted by how they ended, and taken over from the outbox. */
  get stats (): DeliveryStats & { recovered: number } {
    return { ...this.#queue.stats, recovered: this.#recovered }
  }

  /**
   * Queues deliveries node `from` kept and this node took over
   * (outbox-sweep.ts), oldest first; they are kept under this node now.
   * What this run holds (queued, in flight), or ended (its removal not yet
   * answered, or answered lately: the entries may have been read before
   * it), is skipped: from this node's own name that leaves its
   * previous run's and those a failed takeover moved here, whatever their
   * clock said, and the same entries taken up twice are sent once. One
   * that cannot be read is forgotten, logged.
   */
  adopt (entries: readonly OutboxEntry[], from: string): void {
    const held = new Set(this.#queue.held().map((d) => d.id))
    this.#pruneRemoved()
    const adopted: Array<{ delivery: Delivery, at: number, n: number }> = []
    for (const entry of entries) {
      if (held.has(entry.id) || this.#unremoved.has(entry.id) || this.#removed.has(entry.id)) continue
      const kept = readKept(entry.text)
      if (kept === null) {
        this.#log.error({ delivery: entry.id, from }, 'webhook delivery in the outbox could not be read; dropped')
        this.#forget({ id: entry.id })
        continue
      }
      adopted.push({ delivery: { id: entry.id, type: kept.type, sessionId: kept.session, body: kept.body, attempts: 0 }, at: kept.at, n: kept.n })
    }
    adopted.sort((a, b) => a.at - b.at || a.n - b.n)
    for (const { delivery } of adopted) this.#queue.add(delivery)
    this.#recovered += adopted.length
  }

  /**
   * Keeps every delivery not ended yet again, oldest first: the store
   * answers again after a lost connection and may have lost what it held (a
   * Redis restarted without persistence), as session records are saved again.
   */
  keepAgain (): void {
    for (const delivery of this.#queue.held()) this.#keep(delivery)
    this.#removeAgain()
  }

  // Arrow properties: callers may hold a method apart from the object.
  readonly permissionRequested: SessionEvents['permissionRequested'] = (session, e) => {
    this.#emit('permission.requested', session, () => permissionRequestedData(e))
  }

  readonly permissionResolved: SessionEvents['permissionResolved'] = (session, e) => {
    this.#emit('permission.resolved', session, () => permissionResolvedData(e))
  }

  readonly turnFinished: SessionEvents['turnFinished'] = (session, e) => {
    this.#emit('turn.finished', session, () => turnFinishedData(e))
  }

  readonly sessionEnded: SessionEvents['sessionEnded'] = (session, e) => {
    this.#emit('session.ended', session, () => sessionEndedData(e))
  }

  /**
   * Stops retries; what is in flight and what was never tried get
   * min(WEBHOOK_TIMEOUT_MS, CLOSE_DEADLINE_MS) (or `deadlineMs`), then are
   * cut and counted abandoned; the receiver's sockets are closed. Call after
   * the sessions are stopped, so their `session.ended` are among them.
   * Idempotent.
   */
  close (deadlineMs = Math.min(this.#timeoutMs, CLOSE_DEADLINE_MS)): Promise<void> {
    this.#closed ??= (async () => {
      await this.#queue.close(deadlineMs)
      this.#sender.close()
      // A last try for removals that failed: each one left is an event the next taker sends again.
      if (this.#retryTimer !== null) clearTimeout(this.#retryTimer)
      this.#retryTimer = null
      this.#removeAgain()
    })()
    return this.#closed
  }

  /** Builds and queues one event; never throws (it runs inside the relay). */
  #emit (type: WebhookEventType, session: SessionRef, data: () => Record<string, unknown>): void {
    if (!this.#events.has(type)) return
    try {
      const body = webhookBody(type, session, data())
      const delivery = { id: body.id, type, sessionId: session.sessionId, body: JSON.stringify(body), attempts: 0 }
      this.#keep(delivery)
      this.#queue.add(delivery)
    } catch (err) {
      this.#log.error({ err, type, session: session.sessionId }, 'webhook not queued')
    }
  }

  /** Keeps the delivery in the outbox (before it is queued: its forgetting, on a fast answer, comes after on the same connection). */
  #keep (delivery: Delivery): void {
    const outbox = this.#outbox
    if (outbox === undefined) return
    const kept: KeptText = { v: 1, type: delivery.type, session: delivery.sessionId, body: delivery.body, at: Date.now(), n: this.#kept++ }
    outbox.store.keep(outbox.node, { id: delivery.id, text: JSON.stringify(kept) }).then(() => {
      this.#keepFailing = false
    }, (err: unknown) => {
      const level = this.#keepFailing ? 'debug' : 'warn'
      this.#keepFailing = true
      this.#log[level]({ err: (err as Error).message, delivery: delivery.id }, 'webhook delivery not kept in the store: it is lost if this node stops before sending it')
    })
  }

  /**
   * Forgets an ended delivery in the outbox. A removal that fails is tried
   * again (every REMOVE_RETRY_MS, and at once when the store is back): one
   * left there would be sent again by whoever takes this node over.
   */
  #forget (delivery: Pick<Delivery, 'id'>): void {
    if (this.#outbox === undefined) return
    this.#unremoved.set(delivery.id, false)
    this.#remove([delivery.id])
  }

  #remove (ids: string[]): void {
    const outbox = this.#outbox
    if (outbox === undefined) return
    outbox.store.remove(outbox.node, ids).then(() => {
      const now = performance.now()
      for (const id of ids) {
        if (!this.#unremoved.delete(id)) continue
        this.#removed.delete(id) // re-inserted: the map stays oldest first
        this.#removed.set(id, now)
      }
      this.#pruneRemoved()
    }, (err: unknown) => {
      for (const id of ids) if (this.#unremoved.has(id)) this.#unremoved.set(id, true)
      this.#log.debug({ err: (err as Error).message, deliveries: ids.length }, 'ended webhook deliveries not removed from the store; trying again')
      if (this.#retryTimer === null && this.#closed === null) {
        this.#retryTimer = setTimeout(() => { this.#retryTimer = null; this.#removeAgain() }, REMOVE_RETRY_MS)
        this.#retryTimer.unref()
      }
    })
  }

  /** Forgets the removed ids remembered longer than REMOVED_MEMORY_MS. */
  #pruneRemoved (): void {
    const before = performance.now() - REMOVED_MEMORY_MS
    for (const [id, at] of this.#removed) {
      if (at > before) return
      this.#removed.delete(id)
    }
  }

  /** Tries again every removal that failed. */
  #removeAgain (): void {
    const failed = [...this.#unremoved].filter(([, didFail]) => didFail).map(([id]) => id)
    if (failed.length === 0) return
    for (const id of failed) this.#unremoved.set(id, false)
    this.#remove(failed)
  }
}

/** The kept delivery, or null when the text is not one (the signed store has checked it was written by a node). */
function readKept (text: string): KeptText | null {
  try {
    const kept = JSON.parse(text) as Partial<KeptText> | null
    if (kept?.v !== 1 || typeof kept.type !== 'string' || typeof kept.session !== 'string' || typeof kept.body !== 'string' ||
      typeof kept.at !== 'number' || typeof kept.n !== 'number') return null
    return kept as KeptText
  } catch {
    return null
  }
}
