/**
 * Long-lived connections (WebSockets and event streams) per tenant, across
 * all its sessions: MAX_CONNECTIONS_PER_TENANT. Without it one tenant could
 * hold every socket the server takes (MAX_CONNECTIONS) and lock the others
 * out. A slot is taken before the upgrade or stream starts and given back
 * exactly once, whichever way the connection ends.
 */
import { GatewayError } from '../errors.js'
import { ConnectionSlots } from './connection-slots.js'

export class TenantConnections {
  readonly #slots: ConnectionSlots

  constructor (maxPerTenant: number) {
    this.#slots = new ConnectionSlots(maxPerTenant)
  }

  count (tenant: string): number {
    return this.#slots.count(tenant)
  }

  /** Takes a slot, or throws 429 `tenant_connection_limit`. The returned release is idempotent. */
  acquire (tenant: string): () => void {
    const release = this.#slots.take(tenant)
    if (release === null) {
      throw new GatewayError('tenant_connection_limit', `This tenant has MAX_CONNECTIONS_PER_TENANT (${this.#slots.max}) WebSocket and event-stream connections already`)
    }
    return release
  }
}
