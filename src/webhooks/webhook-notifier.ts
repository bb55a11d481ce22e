/**
 * Operator webhooks: the SessionEvents the session calls (permission
 * prompts asked and ended, turns finished, sessions ended), each turned into
 * a signed JSON POST to WEBHOOK_URL. A call builds the body (bounded in
 * size, see webhook-payload.ts) and queues it, and returns: delivery,
 * retries and a receiver that is down or hanging all happen off the relay's
 * path (delivery-queue.ts). docs/WEBHOOKS.md is the receiver's side.
 */
import type { Logger } from 'pino'
import { isLoopback } from '../net/loopback.js'
import type { SessionEvents, SessionRef } from '../session/session-events.js'
import { DeliveryQueue, type DeliveryStats } from './delivery-queue.js'
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
}

/** At shutdown, what is in flight or never tried gets this long at most (or WEBHOOK_TIMEOUT_MS when shorter). */
export const CLOSE_DEADLINE_MS = 5_000

export class WebhookNotifier implements SessionEvents {
  readonly #events: ReadonlySet<WebhookEventType>
  readonly #log: Logger
  readonly #sender: WebhookSender
  readonly #queue: DeliveryQueue
  readonly #timeoutMs: number
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
      ...(options.random === undefined ? {} : { random: options.random })
    })
    this.#log.info({ events: [...this.#events] }, 'webhooks on')
    const target = new URL(options.url)
    if (target.protocol === 'http:' && !isLoopback(target.hostname)) {
      // Signed, so not forged; but tool inputs and results would cross the network in clear.
      this.#log.warn('WEBHOOK_URL is plain http to another machine: bodies travel unencrypted; prefer https')
    }
  }

  /** Deliveries waiting, in flight, and counted by how they ended. */
  get stats (): DeliveryStats {
    return this.#queue.stats
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
    })()
    return this.#closed
  }

  /** Builds and queues one event; never throws (it runs inside the relay). */
  #emit (type: WebhookEventType, session: SessionRef, data: () => Record<string, unknown>): void {
    if (!this.#events.has(type)) return
    try {
      const body = webhookBody(type, session, data())
      this.#queue.add({ id: body.id, type, sessionId: session.sessionId, body: JSON.stringify(body), attempts: 0 })
    } catch (err) {
      this.#log.error({ err, type, session: session.sessionId }, 'webhook not queued')
    }
  }
}
