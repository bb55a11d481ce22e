/**
 * Long-lived connections (WebSockets and event streams) per tenant, across
 * all its sessions: MAX_CONNECTIONS_PER_TENANT. Without it one tenant could
 * hold every socket the server takes (MAX_CONNECTIONS) and lock the others
 * out. A slot is taken before the upgrade or stream starts and given back
 * exactly once, whichever way the connection ends.
 */
import { GatewayError } from '../errors.js'

export class TenantConnections {
  readonly #max: number
  readonly #counts = new Map<string, number>()

  constructor (maxPerTenant: number) {
    this.#max = maxPerTenant
  }

  count (tenant: string): number {
    return this.#counts.get(tenant) ?? 0
  }

  /** Takes a slot, or throws 429 `tenant_connection_limit`. The returned release is idempotent. */
  acquire (tenant: string): () => void {
    const n = this.count(tenant)
    if (n >= this.#max) {
      throw new GatewayError('tenant_connection_limit', `This tenant has MAX_CONNECTIONS_PER_TENANT (${this.#max}) WebSocket and event-stream connections already`)
    }
    this.#counts.set(tenant, n + 1)
    let released = false
    return () => {
      if (released) return
      released = true
      const left = this.count(tenant) - 1
      if (left <= 0) this.#counts.delete(tenant)
      else this.#counts.set(tenant, left)
    }
  }
}
