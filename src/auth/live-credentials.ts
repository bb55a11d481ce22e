/**
 * The credentials in use: the authenticator every request goes through,
 * replaceable when the operator reloads the credentials (SIGHUP re-reads
 * GATEWAY_TOKENS_FILE and the JWT keys), and the long-lived connections
 * (WebSockets, event streams) with the bearer credential each was opened
 * with. A connection outlives the check made at its upgrade, so at a reload
 * every one whose credential no longer names its tenant is ended, as a new
 * request with that credential would be refused. A connection opened with a
 * single-use ticket is listed with the credential the ticket was issued to
 * (tickets.ts).
 *
 * With an `expiresAt` rule (JWT_EXPIRY_ENDS_CONNECTIONS), a connection also
 * ends when its credential expires, as a request with it would then be
 * refused; a WebSocket client keeps it open by presenting a newer
 * credential of the same tenant before then (the `credential` frame).
 */
import type { Authenticator } from './static-tokens.js'

/** Why a listed connection is ended: its credential reloaded away, expired, or too many refused in its place. */
export type CredentialEnd = 'revoked' | 'expired' | 'refused'

/** A connection a reload, or its credential's expiry, may end. */
export interface LiveConnection {
  tenant: string
  /** The bearer credential it was opened with (a token or a JWT), or its ticket was issued to; a presented one replaces it. */
  credential: string
  /** Ends it (the credential no longer holds). */
  end: (why: CredentialEnd) => void
}

/** A connection as listed: what its owner may do with the listing. */
export interface Listed {
  /** When its credential ends it (ms since the epoch), or null when nothing does. */
  readonly expiresAt: number | null
  /**
   * Takes `credential` in place of the connection's own if it authenticates
   * now as the same tenant: the connection then lives by it (its expiry, the
   * next reload's check). Resolves with the new expiry (ms, or null), or
   * false, changing nothing, when it is refused; the MAX_REFUSED-th refusal
   * ends the connection (`refused`).
   */
  present: (credential: string) => Promise<{ expiresAt: number | null } | false>
  /** Takes it off the list (at its close). */
  unlist: () => void
}

export interface LiveCredentialsOptions {
  /** When a credential expires (ms since the epoch), or null when it does not; absent: connections never expire. */
  expiresAt?: ((credential: string) => number | null) | undefined
  now?: () => number
}

/**
 * Credentials a connection may present and have refused before it is ended:
 * presenting is authenticating, and the failure limit per address
 * (AUTH_FAILURES_PER_MINUTE) never sees frames on an open socket.
 */
export const MAX_REFUSED = 5

/** setTimeout's longest delay; a later expiry is armed again when it fires. */
const MAX_DELAY_MS = 2 ** 31 - 1

/** What the list holds per connection (LiveCredentials.#Entry). */
interface Entry extends Listed {
  readonly connection: LiveConnection
  expiresAt: number | null
  timer: NodeJS.Timeout | null
  refused: number
}

export class LiveCredentials implements Authenticator {
  /**
   * A listed connection: its listing and its state in one object, methods on
   * one shared prototype (no closures per connection: an idle socket costs
   * a few hundred bytes in all, issue 14). Declared here to reach the
   * private methods.
   */
  static readonly #Entry = class implements Listed {
    expiresAt: number | null = null
    timer: NodeJS.Timeout | null = null
    refused = 0
    readonly #owner: LiveCredentials
    readonly connection: LiveConnection

    constructor (owner: LiveCredentials, connection: LiveConnection) {
      this.#owner = owner
      this.connection = connection
    }

    async present (credential: string): Promise<{ expiresAt: number | null } | false> { return await this.#owner.#present(this, credential) }
    unlist (): void { this.#owner.#drop(this) }
  }

  #current: Authenticator
  readonly #live = new Map<LiveConnection, Entry>()
  readonly #expiresAt: (credential: string) => number | null
  readonly #now: () => number

  constructor (initial: Authenticator, options: LiveCredentialsOptions = {}) {
    this.#current = initial
    this.#expiresAt = options.expiresAt ?? (() => null)
    this.#now = options.now ?? Date.now
  }

  authenticate (token: string): Promise<string | null> { return this.#current.authenticate(token) }

  /** Lists a connection (and arms its expiry) until `unlist`. */
  add (connection: LiveConnection): Listed {
    const entry = new LiveCredentials.#Entry(this, connection)
    this.#live.set(connection, entry)
    this.#arm(entry, this.#expiresAt(connection.credential))
    return entry
  }

  /** Connections listed. */
  get size (): number { return this.#live.size }

  /**
   * Authenticates with `next` from now on, and ends every listed connection
   * whose credential `next` refuses or gives another tenant; resolves with
   * how many were ended.
   */
  async replace (next: Authenticator): Promise<number> {
    this.#current = next
    let ended = 0
    for (const entry of [...this.#live.values()]) {
      const { connection } = entry
      const tenant = await next.authenticate(connection.credential).catch(() => null) // an authenticator that fails refuses
      if (tenant === connection.tenant || this.#live.get(connection) !== entry) continue
      this.#drop(entry)
      connection.end('revoked')
      ended++
    }
    return ended
  }

  async #present (entry: Entry, credential: string): Promise<{ expiresAt: number | null } | false> {
    const tenant = await this.#current.authenticate(credential).catch(() => null)
    if (this.#live.get(entry.connection) !== entry) return false
    if (tenant !== entry.connection.tenant) {
      if (++entry.refused >= MAX_REFUSED) {
        this.#drop(entry)
        entry.connection.end('refused')
      }
      return false
    }
    entry.connection.credential = credential
    this.#arm(entry, this.#expiresAt(credential))
    return { expiresAt: entry.expiresAt }
  }

  #arm (entry: Entry, expiresAt: number | null): void {
    if (entry.timer !== null) clearTimeout(entry.timer)
    entry.timer = null
    entry.expiresAt = expiresAt
    if (expiresAt === null) return
    const left = expiresAt - this.#now()
    if (left <= 0) {
      // Expired between its check and now (or presented so): ended as if the timer had fired.
      queueMicrotask(() => { this.#expire(entry) })
      return
    }
    entry.timer = setTimeout(() => { this.#expire(entry) }, Math.min(left, MAX_DELAY_MS))
    entry.timer.unref()
  }

  #expire (entry: Entry): void {
    if (this.#live.get(entry.connection) !== entry || entry.expiresAt === null) return
    if (entry.expiresAt > this.#now()) {
      this.#arm(entry, entry.expiresAt) // past setTimeout's reach: armed again
      return
    }
    this.#drop(entry)
    entry.connection.end('expired')
  }

  #drop (entry: Entry): void {
    if (entry.timer !== null) clearTimeout(entry.timer)
    entry.timer = null
    if (this.#live.get(entry.connection) === entry) this.#live.delete(entry.connection)
  }
}
