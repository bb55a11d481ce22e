/**
 * Waiting on a stream of arrivals without sleeps: whoever receives data calls
 * `wake()`, and `until()` re-checks its condition on every wake, up to a
 * deadline whose error message says what was awaited and what came last.
 */
export class Waiters {
  readonly #waiters = new Set<() => void>()

  wake (): void {
    for (const w of this.#waiters) w()
  }

  /** Resolves with the first value of `check` that is neither undefined nor false. */
  until<T> (check: () => T | undefined | false, timeoutMs: number, what: string, lastSeen: () => string): Promise<T> {
    return new Promise((resolve, reject) => {
      const attempt = (): boolean => {
        const value = check()
        if (value === undefined || value === false) return false
        cleanup()
        resolve(value)
        return true
      }
      const timer = setTimeout(() => {
        cleanup()
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}; ${lastSeen()}`))
      }, timeoutMs)
      const cleanup = (): void => { clearTimeout(timer); this.#waiters.delete(waiter) }
      const waiter = (): void => { attempt() }
      if (!attempt()) this.#waiters.add(waiter)
    })
  }
}

/** Polls `check` on a short interval until it holds (for state outside any event stream: the process table, a key's TTL). */
export async function eventually<T> (check: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 10_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value !== undefined && value !== false) return value
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

/**
 * Resolves with `p`, or fails naming `what` after `ms`. The deadline's timer
 * also holds the event loop open while nothing else does (e.g. only unref'd
 * timers of the code under test would settle `p`).
 */
export async function within<T> (p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  try {
    return await Promise.race([p, new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms)
    })])
  } finally {
    clearTimeout(timer)
  }
}
