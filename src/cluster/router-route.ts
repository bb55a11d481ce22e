/**
 * The session core's route to other nodes (SessionRoute), made of the
 * cluster router and the store's leases: who owns a session is whoever
 * holds its lease, and clients and calls go there through the router.
 * app.ts and the tests that build sessions on real routers share it.
 */
import type { SessionRoute } from '../session/session-deps.js'
import type { SessionLeases } from '../store/store.js'
import type { ClusterRouter } from './router.js'

export function routerRoute (router: ClusterRouter, leases: SessionLeases, node: string): SessionRoute {
  return {
    node,
    owner: async (id) => (await leases.holder(id))?.node ?? null,
    attach: (owner, id, port, role, options) => { router.attach(owner, id, port, role, options) },
    frame: (port, frame) => router.frame(port, frame),
    detach: (port) => { router.detach(port) },
    unroute: (port) => router.unroute(port),
    dropRemote: (id) => { router.dropRemote(id) },
    call: async (owner, id, op, args) => await router.call(owner, id, op, args)
  }
}
