/**
 * Single-use, short-lived WebSocket tickets: browsers cannot set headers on
 * a WebSocket, and a long-lived token must never travel in a URL (it ends up
 * in proxy logs and browser history). A ticket is bound to one tenant and
 * one session, dies after its TTL, and works once.
 *
 * A ticket carries what it grants, signed (HMAC-SHA256 with a key derived
 * from the store secret every node shares), so any gateway node can check
 * it; "works once" is kept in the store (`claimOnce` of its nonce), so a
 * ticket spent on one node is spent on all of them. No affinity needed.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'

interface Grant { t: string, s: string, e: number, n: string }

export interface TicketBookOptions {
  ttlMs: number
  /** The store secret (STORE_SECRET); the signing key is derived from it. */
  secret: string
  /** True the first time a key is claimed (across nodes), false after; the claim lasts `ttlMs`. */
  claimOnce: (key: string, ttlMs: number) => Promise<boolean>
  now?: () => number
}

export class TicketBook {
  readonly #o: TicketBookOptions
  readonly #key: Buffer
  readonly #now: () => number

  constructor (options: TicketBookOptions) {
    this.#o = options
    this.#key = createHmac('sha256', options.secret).update('cgw-ws-ticket-v1').digest()
    this.#now = options.now ?? Date.now
  }

  issue (tenant: string, sessionId: string): { ticket: string, expires_at: string } {
    const expiresAt = this.#now() + this.#o.ttlMs
    const grant: Grant = { t: tenant, s: sessionId, e: expiresAt, n: randomBytes(18).toString('base64url') }
    const body = Buffer.from(JSON.stringify(grant)).toString('base64url')
    return { ticket: `${body}.${this.#mac(body).toString('base64url')}`, expires_at: new Date(expiresAt).toISOString() }
  }

  /** The tenant, if the ticket is genuine, unexpired, for this session and not spent before; it is spent now. */
  async redeem (ticket: string, sessionId: string): Promise<string | null> {
    const dot = ticket.indexOf('.')
    if (dot < 1) return null
    const body = ticket.slice(0, dot)
    const mac = Buffer.from(ticket.slice(dot + 1), 'base64url')
    const expected = this.#mac(body)
    if (mac.length !== expected.length || !timingSafeEqual(mac, expected)) return null
    let grant: Grant
    try {
      grant = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as Grant
    } catch {
      return null
    }
    const left = grant.e - this.#now()
    if (left <= 0 || typeof grant.t !== 'string' || typeof grant.n !== 'string') return null
    // Spent by any genuine attempt, one for another session included: a leaked ticket tried elsewhere is burnt.
    if (!await this.#o.claimOnce(`ticket:${grant.n}`, left)) return null
    return grant.s === sessionId ? grant.t : null
  }

  #mac (body: string): Buffer {
    return createHmac('sha256', this.#key).update(body).digest()
  }
}
