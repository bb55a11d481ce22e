/**
 * Single-use, short-lived WebSocket tickets: browsers cannot set headers on
 * a WebSocket, and a long-lived token must never travel in a URL (it ends up
 * in proxy logs and browser history). A ticket is bound to one tenant and
 * one session, dies after its TTL, and works once.
 *
 * Kept in process memory: with several gateways behind a load balancer,
 * route `ws-ticket` and the upgrade to the same instance (session affinity).
 */
import { randomBytes } from 'node:crypto'

interface Ticket { tenant: string, sessionId: string, expiresAt: number }

export class TicketBook {
  readonly #tickets = new Map<string, Ticket>()
  readonly #ttlMs: number
  readonly #now: () => number

  constructor (options: { ttlMs: number, now?: () => number }) {
    this.#ttlMs = options.ttlMs
    this.#now = options.now ?? Date.now
  }

  issue (tenant: string, sessionId: string): { ticket: string, expires_at: string } {
    this.#sweep()
    const ticket = randomBytes(24).toString('base64url')
    const expiresAt = this.#now() + this.#ttlMs
    this.#tickets.set(ticket, { tenant, sessionId, expiresAt })
    return { ticket, expires_at: new Date(expiresAt).toISOString() }
  }

  /** The tenant, if the ticket is valid for this session; the ticket is spent either way. */
  redeem (ticket: string, sessionId: string): string | null {
    const entry = this.#tickets.get(ticket)
    if (entry === undefined) return null
    this.#tickets.delete(ticket)
    if (entry.expiresAt <= this.#now() || entry.sessionId !== sessionId) return null
    return entry.tenant
  }

  #sweep (): void {
    const now = this.#now()
    for (const [key, entry] of this.#tickets) if (entry.expiresAt <= now) this.#tickets.delete(key)
  }
}
