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
 *
 * Checks are asynchronous (a JWT's takes event-loop turns), so a reload can
 * come in the middle of one. Each reload bumps a generation: a check made
 * under an older one is made again (a credential presented, a connection
 * authenticated at its upgrade but listed after the reload), and a reload
 * judging a connection waits for a credential being presented on it and
 * judges the one it then lives by.
 */
import type { Authenticator } from './static-tokens.js'

/** Why a listed connection is ended: its credential reloaded away, expired, or too many refused in its place. */
export type CredentialEnd = 'revoked' | 'expired' | 'refused'

/** A connection a reload, or its credential's expiry, may end. */
export interface LiveConnection {
  tenant: string
  /** The bearer credential it was opened with (a token or a JWT), or its ticket was issued to; a presented one replaces it. */
  credential: string
  /** The `generation` its credential was authenticated under (at its upgrade): a reload since, and it is checked again. */
  checkedAt?: number | undefined
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

/** Times a check is made again because a reload or a presented credential overtook it, before its last answer stands. */
const MAX_ROUNDS = 4

/** setTimeout's longest delay; a later expiry is armed again when it fires. */
const MAX_DELAY_MS = 2 ** 31 - 1

/** What the list holds per connection (LiveCredentials.#Entry). */
interface Entry extends Listed {
  readonly connection: LiveConnection
  expiresAt: number | null
  timer: NodeJS.Timeout | null
  refused: number
  /** A credential being checked to replace the connection's (present). */
  presenting: Promise<unknown> | null
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
    presenting: Promise<unknown> | null = null
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
  #generation = 0
  readonly #live = new Map<LiveConnection, Entry>()
  readonly #expiresAt: (credential: string) => number | null
  readonly #now: () => number

  constructor (initial: Authenticator, options: LiveCredentialsOptions = {}) {
    this.#current = initial
    this.#expiresAt = options.expiresAt ?? (() => null)
    this.#now = options.now ?? Date.now
  }

  authenticate (token: string): Promise<string | null> { return this.#current.authenticate(token) }

  /** Bumped by each `replace`: read before authenticating, it says whether a reload came in between. */
  get generation (): number { return this.#generation }

  /**
   * Lists a connection (and arms its expiry) until `unlist`. One
   * authenticated under an older generation (a reload came while its
   * upgrade went on) is checked again now, and ended if the reload revoked
   * its credential.
   */
  add (connection: LiveConnection): Listed {
    const entry = new LiveCredentials.#Entry(this, connection)
    this.#live.set(connection, entry)
    this.#arm(entry, this.#expiresAt(connection.credential))
    if (connection.checkedAt !== undefined && connection.checkedAt !== this.#generation) {
      void this.#holds(entry).then((holds) => {
        if (holds !== false) return
        this.#drop(entry)
        connection.end('revoked')
      })
    }
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
    this.#generation++
    let ended = 0
    for (const entry of [...this.#live.values()]) {
      if (await this.#holds(entry) !== false) continue
      this.#drop(entry)
      entry.connection.end('revoked')
      ended++
    }
    return ended
  }

  /**
   * Whether the credential the connection lives by names its tenant under
   * the credentials of now; null once it is no longer listed. A credential
   * being presented is waited for (the connection may be moving to it), and
   * a check overtaken by a reload or a presented credential is made again.
   */
  async #holds (entry: Entry): Promise<boolean | null> {
    const { connection } = entry
    for (let round = 1; ; round++) {
      if (entry.presenting !== null) await entry.presenting.catch(() => {})
      const generation = this.#generation
      const credential = connection.credential
      const tenant = await this.#current.authenticate(credential).catch(() => null) // an authenticator that fails refuses
      if (this.#live.get(connection) !== entry) return null
      const overtaken = generation !== this.#generation || credential !== connection.credential || entry.presenting !== null
      if (!overtaken) return tenant === connection.tenant
      // Still overtaken after MAX_ROUNDS: a credential presented since was checked by the credentials of its time.
      if (round >= MAX_ROUNDS) return credential !== connection.credential || tenant === connection.tenant
    }
  }

  async #present (entry: Entry, credential: string): Promise<{ expiresAt: number | null } | false> {
    const checked = this.#checkPresented(entry, credential)
    entry.presenting = checked
    try {
      return await checked
    } finally {
      if (entry.presenting === checked) entry.presenting = null
    }
  }

  async #checkPresented (entry: Entry, credential: string): Promise<{ expiresAt: number | null } | false> {
    let tenant: string | null = null
    for (let round = 1; round <= MAX_ROUNDS; round++) {
      const generation = this.#generation
      tenant = await this.#current.authenticate(credential).catch(() => null)
      // Checked by credentials a reload has replaced meanwhile: checked again by the new ones.
      if (generation === this.#generation) break
    }
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
