/**
 * A small typed event emitter (no node:events in browser bundles). A
 * listener that throws must not break the connection's bookkeeping, so its
 * error is reported through 'error' instead of unwinding the emit.
 */
export class Emitter<Events> {
  readonly #listeners = new Map<keyof Events, Set<(payload: never) => void>>()

  /** Adds a listener; returns the function that removes it. */
  on<K extends keyof Events> (event: K, listener: (payload: Events[K]) => void): () => void {
    let set = this.#listeners.get(event)
    if (set === undefined) this.#listeners.set(event, set = new Set())
    set.add(listener as (payload: never) => void)
    return () => { set.delete(listener as (payload: never) => void) }
  }

  /** Calls every listener of `event`; a throwing listener's error goes to `onListenerError`. */
  emit<K extends keyof Events> (event: K, payload: Events[K], onListenerError: (err: unknown, event: K) => void): void {
    const set = this.#listeners.get(event)
    if (set === undefined) return
    for (const listener of [...set]) {
      try {
        (listener as (payload: Events[K]) => void)(payload)
      } catch (err) {
        onListenerError(err, event)
      }
    }
  }

  listenerCount (event: keyof Events): number {
    return this.#listeners.get(event)?.size ?? 0
  }

  clear (): void {
    this.#listeners.clear()
  }
}
