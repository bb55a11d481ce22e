/**
 * Callers waiting for one moment of a session (its CLI known to run, its
 * exit recorded). Made only when someone waits: most sessions never have a
 * waiter, and a promise per CLI would cost every idle session (issue 14).
 */
export class Waiters<T> {
  readonly #wake: Array<(value: T) => void> = []

  wait (): Promise<T> {
    return new Promise((resolve) => { this.#wake.push(resolve) })
  }

  /** Settles every wait made so far with `value`. */
  wakeAll (value: T): void {
    for (const wake of this.#wake.splice(0)) wake(value)
  }
}
