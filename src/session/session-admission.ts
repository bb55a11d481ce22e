/**
 * What MAX_SESSIONS and MAX_SESSIONS_PER_TENANT count: this node's running
 * CLIs, the creates past admission whose CLI is not running yet (reserved,
 * so concurrent creates see them before any record is stored), and what the
 * tenant runs on the other nodes. Apart from session-manager.ts so the
 * counting and the refusals live in one place.
 */
import { GatewayError } from '../errors.js'
import type { Session } from './session.js'

/** What the other gateway nodes run per tenant, as they report it to the shared store. */
export interface ClusterTenants {
  /** CLIs the tenant runs on other live nodes, as last read. */
  tenantElsewhere: (tenant: string) => number
  /** Reads the other nodes' counts again (before a create). */
  refresh: () => Promise<void>
  /** This node's counts changed: tell the others (resolves once they can read it). */
  changed: () => Promise<void>
}

export interface SessionAdmissionOptions {
  maxSessions: number
  maxSessionsPerTenant: number
  /** Other nodes' CLIs per tenant; none when undefined (one node). */
  tenants?: ClusterTenants | undefined
}

export class SessionAdmission {
  readonly #o: SessionAdmissionOptions
  readonly #running = new Set<Session>()
  /** Creates past admission whose CLI is not running yet: id → tenant. The limits count them. */
  readonly #reserved = new Map<string, string>()

  constructor (options: SessionAdmissionOptions) {
    this.#o = options
  }

  /** How full this node is: CLIs running and creates reserved, against MAX_SESSIONS, and per tenant. */
  get load (): { running: number, max: number, tenants: Record<string, number> } {
    const tenants: Record<string, number> = {}
    for (const s of this.#running) tenants[s.tenant] = (tenants[s.tenant] ?? 0) + 1
    for (const tenant of this.#reserved.values()) tenants[tenant] = (tenants[tenant] ?? 0) + 1
    return { running: this.#running.size + this.#reserved.size, max: this.#o.maxSessions, tenants }
  }

  /** Sessions whose CLI is running (what MAX_SESSIONS limits). */
  get runningCount (): number { return this.#running.size }

  /** Holds a create's slot from admission on, across its store write. */
  reserve (id: string, tenant: string): void {
    this.#reserved.set(id, tenant)
    void this.#o.tenants?.changed()
  }

  /** The create's CLI runs, or failed to: counted as running from here (or not at all). */
  started (id: string): void {
    this.#reserved.delete(id)
    void this.#o.tenants?.changed()
  }

  /** The create is over, however it ended: a slot still held is given back. */
  unreserve (id: string): void {
    if (this.#reserved.delete(id)) void this.#o.tenants?.changed()
  }

  /** A session's status changed: it counts as running while its CLI runs. */
  statusChanged (s: Session): void {
    const had = this.#running.has(s)
    // Counted as running now (from the start, also while the spawn helper starts it): a create's reservation is done.
    if (s.running) { this.#running.add(s); this.#reserved.delete(s.id) } else this.#running.delete(s)
    if (had !== s.running) void this.#o.tenants?.changed()
  }

  /** Another node took the session over: its CLI no longer counts here. */
  fenced (s: Session): void {
    if (this.#running.delete(s)) void this.#o.tenants?.changed()
  }

  /** Refuses a start past MAX_SESSIONS / MAX_SESSIONS_PER_TENANT, counting reserved creates but `self`'s own. */
  admit (tenant: string, self?: string): GatewayError | null {
    let reserved = 0
    let mine = 0
    for (const [id, owner] of this.#reserved) {
      if (id === self) continue
      reserved++
      if (owner === tenant) mine++
    }
    if (this.#running.size + reserved >= this.#o.maxSessions) {
      return new GatewayError('too_many_sessions', `The gateway runs MAX_SESSIONS (${this.#o.maxSessions}) sessions already`)
    }
    for (const s of this.#running) if (s.tenant === tenant) mine++
    // And what the tenant runs on the other nodes, as they last reported it.
    mine += this.#o.tenants?.tenantElsewhere(tenant) ?? 0
    return mine >= this.#o.maxSessionsPerTenant
      ? new GatewayError('tenant_session_limit', `This tenant runs MAX_SESSIONS_PER_TENANT (${this.#o.maxSessionsPerTenant}) sessions already`)
      : null
  }
}
