/**
 * Lines a dead connection may have taken with it. `ws.send` only hands a line
 * to the socket: one written just before the connection died may never reach
 * the gateway, and an SDK waiting for the answer to a lost control request
 * waits for ever. So control requests are kept, exactly as sent, until their
 * answer (or a refusal) arrives, and user lines with a `uuid` until the
 * gateway has provably read them (the pong to a ping sent after them). After
 * a reconnect they are sent again: a request the gateway still has in flight
 * is refused as `duplicate_request_id` (ignored: the original's answer will
 * come), a repeated user uuid is dropped by the gateway. A user line without
 * a `uuid` is never sent twice: nothing would stop it from starting a second
 * turn.
 */

interface Entry {
  line: string
  /** A control request's id, or null for a user line. */
  requestId: string | null
  uuid: string | null
  /** For a user line: the ping (on the connection it went out on) whose pong proves it arrived. */
  ping: number
}

export class InFlight {
  /** By `r:<request_id>` / `u:<uuid>`, in the order sent. */
  readonly #entries = new Map<string, Entry>()
  /** Request ids sent again after a reconnect: their `duplicate_request_id` refusal is expected. */
  readonly #resent = new Set<string>()
  /** Keys to send again once the new connection's replay has caught up. */
  #candidates: string[] = []
  #pings = 0

  /** A control request went out on the socket. */
  requestSent (id: string, line: string): void {
    this.#entries.set(`r:${id}`, { line, requestId: id, uuid: null, ping: 0 })
  }

  /** A user line with a uuid went out; returns the payload of the ping to send right after it. */
  userSent (uuid: string, line: string): string {
    const key = `u:${uuid}`
    this.#entries.delete(key)
    this.#entries.set(key, { line, requestId: null, uuid, ping: ++this.#pings })
    return String(this.#pings)
  }

  /** A pong: every user line sent before the ping it answers has been read by the gateway. */
  pong (payload: string): void {
    const upTo = Number(payload)
    if (!Number.isInteger(upTo)) return
    for (const [key, entry] of this.#entries) {
      if (entry.requestId === null && entry.ping <= upTo) this.#entries.delete(key)
    }
  }

  /** The request's answer (or a refusal of it) arrived. */
  answered (id: string): void {
    this.#entries.delete(`r:${id}`)
    this.#resent.delete(id)
  }

  /** True when a `duplicate_request_id` refusal of `id` only says the original is still in flight. */
  isResent (id: string): boolean {
    return this.#resent.has(id) && this.#entries.has(`r:${id}`)
  }

  /**
   * A new connection said hello: what went out on earlier ones and is still
   * unconfirmed is a candidate to send again (lines queued meanwhile are sent
   * by the hello itself and are not). Pings of the old connection never get a pong.
   */
  connected (): void {
    this.#pings = 0
    for (const entry of this.#entries.values()) entry.ping = Number.POSITIVE_INFINITY
    this.#candidates = [...this.#entries.keys()]
  }

  /**
   * The replay has caught up: answers given meanwhile have arrived, so the
   * candidates still unconfirmed are the lines to send again, in their order.
   */
  toResend (): Array<{ line: string, requestId: string | null, uuid: string | null }> {
    const out: Array<{ line: string, requestId: string | null, uuid: string | null }> = []
    for (const key of this.#candidates) {
      const entry = this.#entries.get(key)
      if (entry === undefined) continue
      if (entry.requestId !== null) this.#resent.add(entry.requestId)
      out.push({ line: entry.line, requestId: entry.requestId, uuid: entry.uuid })
    }
    this.#candidates = []
    return out
  }
}
