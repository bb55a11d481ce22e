/**
 * Stops a session nobody uses: armed when it has no client, no turn running
 * and no pending request, for IDLE_TIMEOUT_MS (0 = never).
 */
export class IdleTimer {
  readonly #ms: number
  readonly #onIdle: () => void
  #timer: NodeJS.Timeout | null = null

  constructor (ms: number, onIdle: () => void) {
    this.#ms = ms
    this.#onIdle = onIdle
  }

  /**
   * Starts the countdown unless already counting; `busy` stops it instead: a
   * session can become busy with nothing disarming it first (a turn the CLI
   * starts on its own says so only in its `session_state_changed`).
   */
  arm (busy: boolean): void {
    if (busy) { this.disarm(); return }
    if (this.#ms <= 0 || this.#timer !== null) return
    this.#timer = setTimeout(() => {
      this.#timer = null
      this.#onIdle()
    }, this.#ms)
    this.#timer.unref()
  }

  disarm (): void {
    if (this.#timer !== null) clearTimeout(this.#timer)
    this.#timer = null
  }
}
