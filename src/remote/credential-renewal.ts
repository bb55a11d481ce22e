/**
 * Keeps claude-remote's connection alive past its credential's expiry.
 * With JWT_EXPIRY_ENDS_CONNECTIONS the gateway tells each connection when
 * its JWT ends it (a `gateway`/`credential` frame) and takes a newer one in
 * a `credential` frame. From a token file kept fresh by something else, the
 * file is read again from refreshDelay's margin before the deadline, then
 * every second until it holds another token, which is presented; the
 * gateway's answer (a new deadline) re-arms it. One the gateway refuses
 * (not valid yet, a key it has not loaded) is not presented again on that
 * connection; at the deadline's close the connection is opened again with
 * what the file holds then. A fixed CLAUDE_REMOTE_TOKEN cannot be renewed:
 * that is said once.
 */
import { refreshDelay } from '../client/refresh-delay.js'
import type { RemoteToken } from './remote-token.js'

/** Before a deadline: how often the token file is read again until it holds a newer token. */
const POLL_MS = 1_000

export interface CredentialRenewalDeps {
  token: RemoteToken
  /** Sends a `credential` frame on the live connection; false when there is none (the next one opens with the token). */
  present: (frame: string) => boolean
  warn: (message: string) => void
  debug: (message: string) => void
}

export class CredentialRenewal {
  readonly #deps: CredentialRenewalDeps
  /** The credential the current connection lives by: opened with, or presented on it and accepted. */
  #inUse = ''
  /** Presented on it, the gateway's answer not in yet. */
  #offered: string | null = null
  /** Presented and refused: not presented again (a refusal counts towards the connection's end), tried on a new connection instead. */
  #refused: string | null = null
  #timer: ReturnType<typeof setTimeout> | null = null
  #toldFixed = false

  constructor (deps: CredentialRenewalDeps) {
    this.#deps = deps
  }

  /** A connection is being opened: the token to open it with. */
  opening (): string {
    this.#inUse = this.#deps.token.value
    this.#offered = null
    this.#refused = null
    return this.#inUse
  }

  /**
   * The gateway refused the connection's credential (HTTP 401, close 4401):
   * true when the token file now holds another one to connect with.
   */
  replaced (): boolean {
    return this.#deps.token.reread() || this.#deps.token.value !== this.#inUse
  }

  /**
   * A `gateway`/`credential` frame's `expires_at` (null: the credential does
   * not end the connection): after `hello`, or the answer accepting the
   * credential presented.
   */
  deadline (expiresAt: unknown): void {
    this.stop()
    if (this.#offered !== null) {
      this.#inUse = this.#offered
      this.#offered = null
    }
    const at = typeof expiresAt === 'string' ? Date.parse(expiresAt) : Number.NaN
    if (!Number.isFinite(at)) return
    this.#deps.debug(`the gateway ends this connection at ${expiresAt as string} unless given a newer credential`)
    if (this.#deps.token.file === null) {
      if (!this.#toldFixed) this.#deps.warn(`the gateway ends this connection at ${expiresAt as string} (its JWT expires) and CLAUDE_REMOTE_TOKEN cannot be renewed: give CLAUDE_REMOTE_TOKEN_FILE, kept fresh, instead`)
      this.#toldFixed = true
      return
    }
    this.#timer = setTimeout(() => this.#renew(at), refreshDelay(at, Date.now()))
  }

  /** The gateway answered `credential_refused` to the credential presented. */
  refused (): void {
    if (this.#offered === null) return
    this.#refused = this.#offered
    this.#offered = null
  }

  stop (): void {
    if (this.#timer !== null) clearTimeout(this.#timer)
    this.#timer = null
  }

  #renew (deadline: number): void {
    this.#timer = null
    const token = this.#deps.token
    token.reread()
    const next = token.value
    if (next !== this.#inUse && next !== this.#offered && next !== this.#refused && this.#deps.present(JSON.stringify({ type: 'credential', token: next }))) {
      this.#offered = next
      this.#deps.debug(`presented the newer token of ${token.source}`)
    }
    // Until the gateway answers with a new deadline (or refuses it: the file may change again).
    if (Date.now() < deadline) this.#timer = setTimeout(() => this.#renew(deadline), POLL_MS)
  }
}
