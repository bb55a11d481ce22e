/**
 * Node-wide batching of event-log appends on one Redis connection (issue 14,
 * "one write path for the whole node").
 *
 * Each session already keeps at most one append in flight (EventLog), so a
 * loud session batches by itself. Many quiet sessions do not: at 100
 * sessions × 100 lines/s, lines of different sessions rarely arrive in the
 * same tick, and each went to Redis as its own write, each waking Redis (and
 * the gateway for its reply) once per line. The gate clocks appends by the
 * connection's round trip instead: while one append is in flight, appends of
 * other sessions wait; when it is answered, every waiting one is released in
 * the same tick with the socket corked, so they reach Redis in one write and
 * their replies come back together. A line waits at most one round trip more
 * than before, and per session order is unchanged (the gate only delays the
 * start of a session's single append in flight).
 *
 * Not a lock: nothing here is exclusive, and a failed append releases the
 * gate like a successful one.
 */

/** The writable side of the connection, corked while the released appends are written. */
export interface CorkableStream {
  cork: () => void
  uncork: () => void
}

export class AppendGate {
  readonly #stream: () => CorkableStream | null
  #inFlight = 0
  #waiting: Array<() => void> = []

  /**
   * @param stream the connection's socket now (a reconnect replaces it), or
   *   null when there is none to cork (the appends are then only clocked)
   */
  constructor (stream: () => CorkableStream | null) {
    this.#stream = stream
  }

  /** Appends waiting for the one in flight. */
  get waiting (): number {
    return this.#waiting.length
  }

  /**
   * Runs `write` (one append: its command(s) are issued synchronously at its
   * start) once no other append is in flight, or together with the others
   * released when the one in flight is answered.
   */
  async run<T> (write: () => Promise<T>): Promise<T> {
    if (this.#inFlight > 0) await new Promise<void>((resolve) => this.#waiting.push(resolve))
    this.#inFlight++
    try {
      return await write()
    } finally {
      if (--this.#inFlight === 0 && this.#waiting.length > 0) this.#release()
    }
  }

  #release (): void {
    const waiting = this.#waiting
    this.#waiting = []
    const stream = this.#stream()
    stream?.cork()
    for (const resume of waiting) resume()
    // The resumed appends issue their commands in the microtasks that follow;
    // a tick callback runs after those, so every command leaves in one writev.
    if (stream !== null) process.nextTick(() => { stream.uncork() })
  }
}
