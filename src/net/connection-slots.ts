/**
 * Connections held at once per key, against one maximum: the sandboxes'
 * egress proxies count, per tenant, every connection a tool has open to its
 * proxy and every one the proxy opened on its behalf. Each is a file
 * descriptor of the one gateway process all tenants share, so without a
 * share one tenant's tools could hold them all (EMFILE for every WebSocket,
 * Redis call and CLI of the others).
 */

export class ConnectionSlots {
  readonly max: number
  readonly #counts = new Map<string, number>()

  constructor (max: number) {
    this.max = max
  }

  count (key: string): number {
    return this.#counts.get(key) ?? 0
  }

  /** A slot of `key`'s, or null when it holds `max` already. The release is idempotent. */
  take (key: string): (() => void) | null {
    const n = this.count(key)
    if (n >= this.max) return null
    this.#counts.set(key, n + 1)
    let released = false
    return () => {
      if (released) return
      released = true
      const left = this.count(key) - 1
      if (left <= 0) this.#counts.delete(key)
      else this.#counts.set(key, left)
    }
  }
}
