/**
 * Single-use, short-lived WebSocket tickets: browsers cannot set headers on
 * a WebSocket, and a long-lived token must never travel in a URL (it ends up
 * in proxy logs and browser history). A ticket is bound to one tenant and
 * one session, dies after its TTL, and works once.
 *
 * A ticket carries what it grants, signed (HMAC-SHA256 with a key derived
 * from the store secret every node shares), so any gateway node can check
 * it; "works once" is kept in the store (`claimOnce` of its nonce), so a
 * ticket spent on one node is spent on all of them, whatever their clocks
 * (CLOCK_SKEW_MS). No affinity needed.
 *
 * It also carries the bearer credential it was issued to, encrypted
 * (AES-256-GCM, another key derived from the same secret): the ticket lives
 * in a URL, which proxies log. Redeeming checks that credential again (one
 * revoked since the ticket was issued opens nothing), and the socket it
 * opens is listed with it, so a credential reload ends it as it ends a
 * socket opened with the credential itself (live-credentials.ts).
 */
import { createCipheriv, createDecipheriv, createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import { GatewayError } from '../errors.js'
import { WS_TICKET_MAX_CHARS } from '../protocol/session-options.js'

/** Tenant, session, expiry (ms) and nonce. */
interface Grant { t: string, s: string, e: number, n: string }

/** What a genuine ticket grants. */
export interface Redeemed {
  tenant: string
  /** The bearer credential the ticket was issued to; null in a ticket issued without one. */
  credential: string | null
}

const IV_BYTES = 12
const TAG_BYTES = 16

/**
 * How much longer than the ticket's life, by the redeeming node's clock, it
 * stays spent: every node judges expiry by its own clock, so a node running
 * ahead would otherwise let the mark lapse while one on time (or behind)
 * still takes the ticket, and open it a second time. Nodes are expected
 * within 2 minutes of each other (the node bus refuses more); the rest is margin.
 */
export const CLOCK_SKEW_MS = 5 * 60_000

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
  readonly #sealKey: Buffer
  readonly #now: () => number

  constructor (options: TicketBookOptions) {
    this.#o = options
    this.#key = createHmac('sha256', options.secret).update('cgw-ws-ticket-v1').digest()
    this.#sealKey = createHmac('sha256', options.secret).update('cgw-ws-ticket-credential-v1').digest()
    this.#now = options.now ?? Date.now
  }

  /**
   * A ticket for `tenant` on `sessionId`, issued to `credential` (the
   * request's bearer credential, null if it had none): `<grant>.<mac>`, or
   * `<grant>.<sealed credential>.<mac>`, the MAC over all before it. Throws
   * `bad_request` for a credential too long to fit WS_TICKET_MAX_CHARS.
   */
  issue (tenant: string, sessionId: string, credential: string | null): { ticket: string, expires_at: string } {
    const expiresAt = this.#now() + this.#o.ttlMs
    const grant: Grant = { t: tenant, s: sessionId, e: expiresAt, n: randomBytes(18).toString('base64url') }
    const body = Buffer.from(JSON.stringify(grant)).toString('base64url') + (credential === null ? '' : `.${this.#seal(credential)}`)
    const ticket = `${body}.${this.#mac(body).toString('base64url')}`
    if (ticket.length > WS_TICKET_MAX_CHARS) {
      throw new GatewayError('bad_request', `The credential is too long to travel in a ticket (at most ${WS_TICKET_MAX_CHARS} characters); send it in a \`bearer.\` subprotocol entry or an Authorization header instead`)
    }
    return { ticket, expires_at: new Date(expiresAt).toISOString() }
  }

  /**
   * What the ticket grants, if it is genuine, unexpired, for this session
   * and not spent before; it is spent now. The caller checks the credential
   * again before it opens anything.
   */
  async redeem (ticket: string, sessionId: string): Promise<Redeemed | null> {
    const dot = ticket.lastIndexOf('.')
    if (dot < 1) return null
    const body = ticket.slice(0, dot)
    const mac = Buffer.from(ticket.slice(dot + 1), 'base64url')
    const expected = this.#mac(body)
    if (mac.length !== expected.length || !timingSafeEqual(mac, expected)) return null
    const [grantText, sealed, ...rest] = body.split('.') as [string, string | undefined, ...string[]]
    if (rest.length > 0) return null
    let grant: Grant
    try {
      grant = JSON.parse(Buffer.from(grantText, 'base64url').toString('utf8')) as Grant
    } catch {
      return null
    }
    const left = grant.e - this.#now()
    if (left <= 0 || typeof grant.t !== 'string' || typeof grant.n !== 'string') return null
    const credential = sealed === undefined ? null : this.#unseal(sealed)
    if (credential === undefined) return null
    // Spent by any genuine attempt, one for another session included: a leaked ticket tried elsewhere is burnt.
    if (!await this.#claim(`ticket:${grant.n}`, left + CLOCK_SKEW_MS)) return null
    return grant.s === sessionId ? { tenant: grant.t, credential } : null
  }

  /** claimOnce, or 503 `store_unavailable` when the store does not answer (whether it was spent is not known: a new ticket then). */
  async #claim (key: string, ttlMs: number): Promise<boolean> {
    try {
      return await this.#o.claimOnce(key, ttlMs)
    } catch {
      throw new GatewayError('store_unavailable')
    }
  }

  #seal (credential: string): string {
    const iv = randomBytes(IV_BYTES)
    const cipher = createCipheriv('aes-256-gcm', this.#sealKey, iv)
    const sealed = Buffer.concat([iv, cipher.update(credential, 'utf8'), cipher.final(), cipher.getAuthTag()])
    return sealed.toString('base64url')
  }

  /** The credential, or undefined when it does not open (a ticket made with another secret's MAC cannot get here). */
  #unseal (sealed: string): string | undefined {
    const bytes = Buffer.from(sealed, 'base64url')
    if (bytes.length < IV_BYTES + TAG_BYTES) return undefined
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.#sealKey, bytes.subarray(0, IV_BYTES))
      decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES))
      return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES, bytes.length - TAG_BYTES)), decipher.final()]).toString('utf8')
    } catch {
      return undefined
    }
  }

  #mac (body: string): Buffer {
    return createHmac('sha256', this.#key).update(body).digest()
  }
}
