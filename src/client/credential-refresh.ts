/**
 * When a connection renews its credential: the gateway (with
 * JWT_EXPIRY_ENDS_CONNECTIONS) names the deadline at which it ends the
 * connection in a `credential` frame; the renewal is timed before it
 * (refresh-delay.ts) and re-armed when the deadline is beyond one timer's
 * reach. What renewing means (asking refreshToken, presenting the answer)
 * is the connection's.
 */
import { MAX_TIMER_MS, refreshDelay } from './refresh-delay.js'

export class CredentialRefresh {
  readonly #renew: () => void
  #timer: ReturnType<typeof setTimeout> | null = null

  /** @param renew called once the deadline is near (not for a deadline that was replaced or cleared). */
  constructor (renew: () => void) {
    this.#renew = renew
  }

  /**
   * Arms one renewal before `expiresAt` (ms since the epoch), replacing any
   * armed one; nothing is armed for a deadline that is not a finite number.
   */
  before (expiresAt: number): void {
    this.clear()
    if (!Number.isFinite(expiresAt)) return
    const delay = refreshDelay(expiresAt, Date.now())
    this.#timer = setTimeout(() => {
      this.#timer = null
      // A deadline beyond one timer's reach (MAX_TIMER_MS): wait again rather than renew weeks early.
      if (delay === MAX_TIMER_MS) { this.before(expiresAt); return }
      this.#renew()
    }, delay)
  }

  clear (): void {
    if (this.#timer !== null) clearTimeout(this.#timer)
    this.#timer = null
  }
}
