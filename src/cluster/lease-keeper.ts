/**
 * Holds this node's session leases: takes them, renews all of them on one
 * timer (a third of SESSION_LEASE_MS, so two renewals may fail before one
 * lapses), and tells a session the moment it is fenced: a renewal answered
 * "no" means another node acquired the session since, and this node must stop
 * its CLI and write nothing more. A renewal that fails because the store does
 * not answer is tried again at the next tick: the append fencing in the store
 * still stops a stale writer, whatever this node believes.
 *
 * It also knows until when a lease is surely still this node's (`fresh`):
 * the store's TTL runs from the moment a renewal lands, so a lease is held
 * at least SESSION_LEASE_MS after the last confirmed renewal was sent. A node
 * paused longer than that (SIGSTOP, a VM freeze) may have lost it without
 * knowing: it confirms it (`confirm`) before it acts on the session again.
 * While the store does not answer (the last renewal or confirmation failed
 * to reach it), a lease counts as fresh: nothing can be learned from the
 * store then, the append fencing still stops a stale writer, and a client
 * frame must not wait a command timeout each time for an answer that will
 * not come.
 */
import type { Logger } from 'pino'
import type { Lease, SessionLeases } from '../store/store.js'

export interface LeaseKeeperOptions {
  leases: SessionLeases
  /** This node's NODE_ID. */
  node: string
  /** SESSION_LEASE_MS. */
  ttlMs: number
  logger: Logger
  /** The clock (tests). Default Date.now. */
  now?: () => number
}

interface Kept {
  lease: Lease
  onFenced: () => void
  /** When the last acquisition or renewal the store confirmed was sent (ms since the epoch). */
  confirmedAt: number
  /** The store did not answer the last renewal or confirmation. */
  unreachable: boolean
}

export class LeaseKeeper {
  readonly #o: LeaseKeeperOptions
  readonly #kept = new Map<string, Kept>()
  #timer: NodeJS.Timeout | null = null
  /** The renewal round in flight, if any. */
  #renewing: Promise<void> | null = null
  readonly #now: () => number

  constructor (options: LeaseKeeperOptions) {
    this.#o = options
    this.#now = options.now ?? Date.now
  }

  get ttlMs (): number { return this.#o.ttlMs }

  /**
   * Takes the session's lease for this node and keeps it renewed until
   * `release`; null when another live node holds it. `takeFrom` names a
   * node known to be dead whose lease may be taken over at once.
   */
  async acquire (sessionId: string, onFenced: () => void, takeFrom?: string): Promise<Lease | null> {
    const sentAt = this.#now()
    const lease = await this.#o.leases.acquire(sessionId, this.#o.node, this.#o.ttlMs, takeFrom === undefined ? {} : { takeFrom })
    if (lease === null) return null
    this.#kept.set(sessionId, { lease, onFenced, confirmedAt: sentAt, unreachable: false })
    this.#arm()
    return lease
  }

  /** Stops renewing and gives the lease up in the store (if still this one). */
  async release (lease: Lease): Promise<void> {
    const kept = this.#kept.get(lease.sessionId)
    if (kept !== undefined && kept.lease.epoch === lease.epoch) this.#kept.delete(lease.sessionId)
    // A renewal already sent would land after the release and take the lapsed lease back
    // (renew re-creates a lease nobody acquired since): release only after it.
    await this.#renewing
    await this.#o.leases.release(lease)
  }

  /** True while `lease` is kept here (acquired, not released, not fenced). */
  holds (lease: Lease): boolean {
    const kept = this.#kept.get(lease.sessionId)
    return kept !== undefined && kept.lease.epoch === lease.epoch
  }

  /**
   * True while `lease` is kept here and its last confirmed renewal is recent
   * enough that no other node can hold it yet, or the store does not answer.
   */
  fresh (lease: Lease): boolean {
    const kept = this.#kept.get(lease.sessionId)
    return kept !== undefined && kept.lease.epoch === lease.epoch && (kept.unreachable || this.#now() - kept.confirmedAt < this.#o.ttlMs)
  }

  /**
   * Renews `lease` now, if it is still kept here: true when it is still this
   * node's (or had only lapsed, nobody having taken it since: taken back).
   */
  async confirm (lease: Lease): Promise<boolean> {
    if (!this.holds(lease)) return false
    const sentAt = this.#now()
    let held: boolean
    try {
      held = await this.#o.leases.renew(lease, this.#o.ttlMs)
    } catch (err) {
      this.#answered(lease, false)
      throw err
    }
    this.#answered(lease, true)
    if (!held) return false
    this.#confirmed(lease, sentAt)
    return true
  }

  #confirmed (lease: Lease, sentAt: number): void {
    const kept = this.#kept.get(lease.sessionId)
    if (kept !== undefined && kept.lease.epoch === lease.epoch) kept.confirmedAt = Math.max(kept.confirmedAt, sentAt)
  }

  /** Whether the store answered the last renewal or confirmation of `lease`. */
  #answered (lease: Lease, answered: boolean): void {
    const kept = this.#kept.get(lease.sessionId)
    if (kept !== undefined && kept.lease.epoch === lease.epoch) kept.unreachable = !answered
  }

  /** Stops renewing without releasing (the session was fenced: the lease is not ours any more). */
  forget (lease: Lease): void {
    const kept = this.#kept.get(lease.sessionId)
    if (kept !== undefined && kept.lease.epoch === lease.epoch) this.#kept.delete(lease.sessionId)
  }

  close (): void {
    if (this.#timer !== null) clearInterval(this.#timer)
    this.#timer = null
  }

  #arm (): void {
    if (this.#timer !== null) return
    this.#timer = setInterval(() => { void this.#renewAll() }, Math.max(50, Math.floor(this.#o.ttlMs / 3)))
    this.#timer.unref()
  }

  async #renewAll (): Promise<void> {
    if (this.#renewing !== null) return
    this.#renewing = this.#renewRound()
    await this.#renewing
  }

  async #renewRound (): Promise<void> {
    try {
      await Promise.all([...this.#kept.values()].map(async (kept) => {
        let held: boolean
        const sentAt = this.#now()
        try {
          held = await this.#o.leases.renew(kept.lease, this.#o.ttlMs)
        } catch (err) {
          this.#answered(kept.lease, false)
          this.#o.logger.warn({ session: kept.lease.sessionId, err: (err as Error).message }, 'lease renewal failed; trying again')
          return
        }
        this.#answered(kept.lease, true)
        if (held) this.#confirmed(kept.lease, sentAt)
        if (held || this.#kept.get(kept.lease.sessionId) !== kept) return
        this.#kept.delete(kept.lease.sessionId)
        this.#o.logger.warn({ session: kept.lease.sessionId, epoch: kept.lease.epoch }, 'session lease taken by another node: stopping here')
        kept.onFenced()
      }))
    } finally {
      this.#renewing = null
      if (this.#kept.size === 0 && this.#timer !== null) {
        clearInterval(this.#timer)
        this.#timer = null
      }
    }
  }
}
