/**
 * Where a new session goes when this node is full: every node reports how
 * full it is to the store (every `everyMs`, and it counts for three times
 * that), and a create this node cannot take is made, over the node bus, on
 * the least loaded node with room. A create is refused for lack of room
 * only when no node has any.
 */
import type { Logger } from 'pino'
import { GatewayError } from '../errors.js'
import type { EventStore } from '../store/store.js'

export interface PlacementOptions {
  store: Pick<EventStore, 'reportNode' | 'listNodes' | 'forgetNode'>
  /** This node's NODE_ID. */
  node: string
  /** How full this node is now. */
  load: () => { running: number, max: number }
  everyMs: number
  /** Creates a session on `node` (ClusterRouter.call), resolving with its snapshot. */
  createOn: (node: string, tenant: string, options: unknown) => Promise<Record<string, unknown>>
  logger: Logger
}

export class Placement {
  readonly #o: PlacementOptions
  #timer: NodeJS.Timeout | null = null

  constructor (options: PlacementOptions) {
    this.#o = options
  }

  async start (): Promise<void> {
    await this.#report()
    this.#timer = setInterval(() => { void this.#report() }, this.#o.everyMs)
    this.#timer.unref()
  }

  /** Stops reporting and leaves the list, so no node sends this one creates any more. */
  async close (): Promise<void> {
    if (this.#timer !== null) clearInterval(this.#timer)
    this.#timer = null
    await this.#o.store.forgetNode(this.#o.node).catch(() => {})
  }

  /**
   * Creates the session on another node with room, least loaded first, and
   * resolves with its snapshot; null when no other node has room. A refusal
   * that is not about room (the tenant's own limit, the policy) is thrown.
   */
  async elsewhere (tenant: string, options: unknown): Promise<Record<string, unknown> | null> {
    let nodes
    try {
      nodes = await this.#o.store.listNodes()
    } catch {
      return null
    }
    const candidates = nodes
      .filter((n) => n.node !== this.#o.node && n.running < n.max)
      .sort((a, b) => a.running / a.max - b.running / b.max)
    for (const candidate of candidates) {
      try {
        return await this.#o.createOn(candidate.node, tenant, options)
      } catch (err) {
        // Full since it reported, or gone: the next one. Anything else is the answer.
        if (err instanceof GatewayError && err.code !== 'too_many_sessions' && err.code !== 'shutting_down') throw err
        this.#o.logger.info({ node: candidate.node, err: (err as Error).message }, 'placing a session on another node failed; trying the next')
      }
    }
    return null
  }

  async #report (): Promise<void> {
    const { running, max } = this.#o.load()
    try {
      await this.#o.store.reportNode({ node: this.#o.node, running, max, at: Date.now() }, this.#o.everyMs * 3)
    } catch (err) {
      this.#o.logger.debug({ err: (err as Error).message }, 'could not report this node\'s load')
    }
  }
}
