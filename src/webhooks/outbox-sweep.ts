/**
 * Finds webhook deliveries left in the store's outbox by nodes that are
 * gone, and takes them over for this node to send. A node's deliveries stay
 * kept until they end (webhook-notifier.ts), so a node that crashed, was
 * killed, or stopped while its receiver was down leaves its own behind:
 * another node (or the same NODE_ID started again) sends them, with the
 * same Webhook-Id, so receivers that deduplicate see each event once.
 *
 * A node is gone when it no longer reports to the store (its report lapsed,
 * or it left at shutdown) or, sooner, when it was a gateway of this host
 * whose process is gone. The store's takeOver gives each delivery to one
 * taker: of two nodes sweeping at once, each sends its share, none twice.
 */
import type { Logger } from 'pino'
import type { OutboxEntry, WebhookOutbox } from '../store/store.js'

export interface OutboxSweepOptions {
  outbox: WebhookOutbox
  /** This node's NODE_ID. */
  node: string
  /** The nodes reporting to the store now; a failure skips the sweep (never read as "all gone"). */
  liveNodes: () => Promise<string[]>
  /** Gone without waiting for its report to lapse (a gateway of this host whose pid is gone). */
  isDead: (node: string) => boolean
  everyMs: number
  /** Gets what was taken over from `from` (this node's own kept deliveries at start included). */
  onTaken: (entries: OutboxEntry[], from: string) => void
  logger: Logger
}

export class OutboxSweep {
  readonly #o: OutboxSweepOptions
  #timer: NodeJS.Timeout | null = null
  #running: Promise<void> | null = null
  #closed = false
  /** Whether this node's own kept deliveries (its previous run's, or moved here by a takeover that failed) were taken up: until then each sweep tries. */
  #ownTaken = false

  constructor (options: OutboxSweepOptions) {
    this.#o = options
  }

  /**
   * Takes this node's own kept deliveries (left by its previous run under a
   * fixed NODE_ID; retried at each sweep until the store answers) and those
   * of nodes already gone, then sweeps every `everyMs`. Resolves after the
   * first sweep; never rejects.
   */
  async start (): Promise<void> {
    await this.#sweep()
    if (this.#closed) return
    this.#timer = setInterval(() => { void this.#sweep() }, this.#o.everyMs)
    this.#timer.unref()
  }

  /** Stops sweeping; resolves once a sweep in flight is over. */
  async close (): Promise<void> {
    this.#closed = true
    if (this.#timer !== null) clearInterval(this.#timer)
    this.#timer = null
    await this.#running
  }

  /** One sweep at a time: one still running (a slow store) makes the next tick a no-op. */
  async #sweep (): Promise<void> {
    if (this.#running !== null) return
    this.#running = this.#takeOver().finally(() => { this.#running = null })
    await this.#running
  }

  async #takeOver (): Promise<void> {
    const { outbox, node, logger } = this.#o
    try {
      if (!this.#ownTaken) {
        // Its own first: what it takes over from others goes under its name, and would be read twice after.
        const entries = await outbox.takeOver(node, node)
        this.#ownTaken = true
        if (entries.length > 0) {
          logger.info({ deliveries: entries.length }, 'webhook deliveries kept by this node\'s previous run taken up')
          this.#o.onTaken(entries, node)
        }
      }
      const [kept, live] = await Promise.all([outbox.nodes(), this.#o.liveNodes()])
      const alive = new Set(live)
      for (const from of kept) {
        if (this.#closed) return
        if (from === node || (alive.has(from) && !this.#o.isDead(from))) continue
        const entries = await outbox.takeOver(from, node)
        if (entries.length === 0) continue
        logger.info({ from, deliveries: entries.length }, 'webhook deliveries of a node that is gone taken over')
        this.#o.onTaken(entries, from)
      }
    } catch (err) {
      // A takeover that timed out may still have run in Redis, moving a gone node's deliveries under
      // this node's name: the next sweep reads them there (the notifier adopts each delivery once).
      this.#ownTaken = false
      logger.warn({ err: (err as Error).message }, 'could not look for webhook deliveries left by other nodes; trying again later')
    }
  }
}
