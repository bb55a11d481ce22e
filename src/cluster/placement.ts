/**
 * Where a new session goes when this node is full: every node reports how
 * full it is to the store (every `everyMs`, and it counts for three times
 * that), and a create this node cannot take is made, over the node bus, on
 * the least loaded node with room. A create is refused for lack of room
 * only when no node has any.
 *
 * The same reports carry each node's CLIs per tenant, so that
 * MAX_SESSIONS_PER_TENANT counts the tenant's sessions on every node: a node
 * reports again as soon as its own counts change, and reads the others' at
 * each report and before each create (`refresh`). Two creates of one tenant
 * on two nodes within one store round trip may still both pass.
 */
import type { Logger } from 'pino'
import { GatewayError } from '../errors.js'
import type { EventStore, NodeLoad } from '../store/store.js'

export interface PlacementOptions {
  store: Pick<EventStore, 'reportNode' | 'listNodes' | 'forgetNode'>
  /** This node's NODE_ID. */
  node: string
  /** How full this node is now, and its CLIs per tenant. */
  load: () => { running: number, max: number, tenants?: Record<string, number> }
  everyMs: number
  /** Creates a session on `node` (ClusterRouter.call), resolving with its snapshot. */
  createOn: (node: string, tenant: string, options: unknown) => Promise<Record<string, unknown>>
  logger: Logger
}

export class Placement {
  readonly #o: PlacementOptions
  #timer: NodeJS.Timeout | null = null
  /** The other live nodes as last read from the store. */
  #others: NodeLoad[] = []
  /** A report in flight, and whether this node's counts changed since it was sent. */
  #reporting: Promise<void> | null = null
  #dirty = false
  #closed = false
  #draining = false

  constructor (options: PlacementOptions) {
    this.#o = options
  }

  /** CLIs the tenant runs on the other live nodes, as they last reported. */
  tenantElsewhere (tenant: string): number {
    let n = 0
    for (const node of this.#others) n += node.tenants?.[tenant] ?? 0
    return n
  }

  /** Reads the other nodes' reports now (before a create); keeps the last ones if the store does not answer. */
  async refresh (): Promise<void> {
    try {
      this.#remember(await this.#o.store.listNodes())
    } catch (err) {
      this.#o.logger.debug({ err: (err as Error).message }, 'could not read the other nodes\' load')
    }
  }

  /**
   * This node's counts changed (a CLI started or stopped): report them now,
   * not at the next tick. Resolves once a report made after the change is stored (or failed).
   */
  async changed (): Promise<void> {
    if (this.#timer === null || this.#closed) return
    await this.#report()
  }

  async start (): Promise<void> {
    await this.#report()
    this.#timer = setInterval(() => { void this.#report() }, this.#o.everyMs)
    this.#timer.unref()
  }

  /**
   * The node drains (shutdown): from now on it reports itself with no room,
   * so no node sends it creates, but stays listed, so other nodes do not
   * take it for gone (its webhook outbox, outbox-sweep.ts) while it still
   * sends; `close` then leaves the list.
   */
  async drain (): Promise<void> {
    if (this.#draining || this.#closed) return
    this.#draining = true
    await this.#report()
  }

  /** Stops reporting and leaves the list: other nodes see it gone at once. */
  async close (): Promise<void> {
    this.#closed = true
    if (this.#timer !== null) clearInterval(this.#timer)
    this.#timer = null
    await this.#reporting
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
    this.#remember(nodes)
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

  /** Reports this node's load and reads the others'; one at a time, again at once if the counts changed meanwhile. */
  async #report (): Promise<void> {
    if (this.#reporting !== null) { this.#dirty = true; return await this.#reporting }
    this.#reporting = (async () => {
      do {
        this.#dirty = false
        const { running, max, tenants } = this.#o.load()
        try {
          // Draining: no room (`max` 0), its CLIs still counted against their tenants until they stop.
          await this.#o.store.reportNode({ node: this.#o.node, running, max: this.#draining ? 0 : max, at: Date.now(), ...(tenants === undefined ? {} : { tenants }) }, this.#o.everyMs * 3)
          this.#remember(await this.#o.store.listNodes())
        } catch (err) {
          this.#o.logger.debug({ err: (err as Error).message }, 'could not report this node\'s load')
        }
      } while (this.#dirty && !this.#closed)
    })()
    try {
      await this.#reporting
    } finally {
      this.#reporting = null
    }
  }

  #remember (nodes: NodeLoad[]): void {
    this.#others = nodes.filter((n) => n.node !== this.#o.node)
  }
}
