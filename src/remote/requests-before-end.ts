/**
 * The host's control requests still unanswered when its stdin ended (written
 * while claude-remote had no connection): the end waits for their answers,
 * as the CLI answers every line it read before its EOF. Not for ever: a
 * gateway that never comes back must not keep a host that sends no SIGTERM
 * (a script, an IDE plugin) waiting, so after a bound they are given up.
 */

/**
 * The bound, from stdin's end: beyond the gateway's own
 * CLIENT_REQUEST_TIMEOUT_MS (30 s), so an attached gateway answers (or
 * refuses) them first.
 */
const REQUESTS_AT_END_MS = 35_000

export class RequestsBeforeEnd {
  readonly #ids = new Set<string>()
  readonly #ms: number
  #timer: ReturnType<typeof setTimeout> | null = null

  constructor (ms = REQUESTS_AT_END_MS) {
    this.#ms = ms
  }

  get size (): number {
    return this.#ids.size
  }

  add (id: string): void {
    this.#ids.add(id)
  }

  /** The request's answer (or a refusal of it) reached the host. */
  answered (id: string): void {
    this.#ids.delete(id)
  }

  /** Stdin ended: if requests wait, `lapse` gets those still waiting once the bound has passed (its seconds too). */
  arm (lapse: (ids: string[], seconds: number) => void): void {
    if (this.#ids.size === 0) return
    this.#timer = setTimeout(() => {
      this.#timer = null
      const ids = [...this.#ids]
      this.#ids.clear()
      if (ids.length > 0) lapse(ids, this.#ms / 1000)
    }, this.#ms)
  }

  /** The end came: nothing to give up any more. */
  stop (): void {
    if (this.#timer !== null) clearTimeout(this.#timer)
    this.#timer = null
  }
}
