/**
 * Session leases for the in-memory store. One process is one node here, so
 * leases only ever meet their own node; they keep the same contract as the
 * Redis ones (epochs, lapse, take-back) so the session core has one code path
 * and the store contract suite checks both.
 */
import type { Lease, LeaseHolder, SessionLeases } from './store.js'

interface Held {
  node: string
  epoch: number
  expiresAt: number
}

export class MemoryLeases implements SessionLeases {
  readonly #now: () => number
  readonly #held = new Map<string, Held>()
  /** Last epoch given out per session; outlives the lease, as the Redis epoch key does. */
  readonly #epochs = new Map<string, number>()

  constructor (options: { now?: () => number } = {}) {
    this.#now = options.now ?? Date.now
  }

  #current (sessionId: string): Held | undefined {
    const held = this.#held.get(sessionId)
    if (held !== undefined && held.expiresAt <= this.#now()) {
      this.#held.delete(sessionId)
      return undefined
    }
    return held
  }

  async acquire (sessionId: string, node: string, ttlMs: number, options: { takeFrom?: string } = {}): Promise<Lease | null> {
    const held = this.#current(sessionId)
    if (held !== undefined && held.node !== node && held.node !== options.takeFrom) return null
    const epoch = (this.#epochs.get(sessionId) ?? 0) + 1
    this.#epochs.set(sessionId, epoch)
    this.#held.set(sessionId, { node, epoch, expiresAt: this.#now() + ttlMs })
    return { sessionId, node, epoch }
  }

  async renew (lease: Lease, ttlMs: number): Promise<boolean> {
    const held = this.#current(lease.sessionId)
    if (held === undefined) {
      // Lapsed: ours again only if nobody acquired the session since.
      if ((this.#epochs.get(lease.sessionId) ?? lease.epoch) !== lease.epoch) return false
      this.#epochs.set(lease.sessionId, lease.epoch)
      this.#held.set(lease.sessionId, { node: lease.node, epoch: lease.epoch, expiresAt: this.#now() + ttlMs })
      return true
    }
    if (held.epoch !== lease.epoch || held.node !== lease.node) return false
    held.expiresAt = this.#now() + ttlMs
    return true
  }

  async release (lease: Lease): Promise<void> {
    const held = this.#current(lease.sessionId)
    if (held !== undefined && held.epoch === lease.epoch && held.node === lease.node) this.#held.delete(lease.sessionId)
  }

  async holder (sessionId: string): Promise<LeaseHolder | null> {
    const held = this.#current(sessionId)
    return held === undefined ? null : { node: held.node, epoch: held.epoch, ttlMs: Math.max(0, held.expiresAt - this.#now()) }
  }

  /**
   * The session's entry expired: its epoch goes with it, as the Redis epoch
   * key expires with the record (else one entry per session ever created
   * stays for as long as the process runs). Kept while a lease is held.
   */
  forget (sessionId: string): void {
    if (this.#current(sessionId) === undefined) this.#epochs.delete(sessionId)
  }

  /** True when `lease` is the session's current one: what a fenced write requires. */
  isCurrent (lease: Lease): boolean {
    const held = this.#current(lease.sessionId)
    return held !== undefined && held.epoch === lease.epoch && held.node === lease.node
  }
}
