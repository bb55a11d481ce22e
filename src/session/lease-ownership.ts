/**
 * How sessions take, keep and give up their leases on this node: through the
 * lease keeper, and at once (without waiting SESSION_LEASE_MS) from a holder
 * known to be dead.
 */
import type { LeaseKeeper } from '../cluster/lease-keeper.js'
import type { SessionLeases } from '../store/store.js'
import type { SessionOwnership } from './session-deps.js'

/**
 * The ownership every session of this node is given. `isDeadNode`: true when
 * a lease holder named `node` is known to be dead (see SessionManagerOptions).
 */
export function leaseOwnership (keeper: LeaseKeeper, leases: SessionLeases, isDeadNode?: (node: string) => boolean): SessionOwnership {
  return {
    acquire: async (id, onFenced) => {
      const lease = await keeper.acquire(id, onFenced)
      if (lease !== null || isDeadNode === undefined) return lease
      // Held: by a node of this host that is gone (a restart under a new pid)? Then it is ours at once.
      const holder = await leases.holder(id)
      return holder !== null && isDeadNode(holder.node) ? await keeper.acquire(id, onFenced, holder.node) : null
    },
    release: async (lease) => await keeper.release(lease),
    forget: (lease) => keeper.forget(lease),
    // Only a lease this node still holds: a write that lands after a release must not bring it back.
    reclaim: async (lease) => await keeper.confirm(lease),
    fresh: (lease) => keeper.fresh(lease)
  }
}
