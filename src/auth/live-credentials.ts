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
 */
import type { Authenticator } from './static-tokens.js'

/** A connection a reload may end. */
export interface LiveConnection {
  tenant: string
  /** The bearer credential it was opened with (a token or a JWT), or its ticket was issued to. */
  credential: string
  /** Ends it (the credential no longer holds). */
  end: () => void
}

export class LiveCredentials implements Authenticator {
  #current: Authenticator
  readonly #live = new Set<LiveConnection>()

  constructor (initial: Authenticator) {
    this.#current = initial
  }

  authenticate (token: string): Promise<string | null> { return this.#current.authenticate(token) }

  /** Lists a connection until the returned function is called (at its close). */
  add (connection: LiveConnection): () => void {
    this.#live.add(connection)
    return () => { this.#live.delete(connection) }
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
    for (const connection of [...this.#live]) {
      const tenant = await next.authenticate(connection.credential).catch(() => null) // an authenticator that fails refuses
      if (tenant === connection.tenant || !this.#live.has(connection)) continue
      this.#live.delete(connection)
      connection.end()
      ended++
    }
    return ended
  }
}
