/**
 * Tells whether a lease holder is a gateway of this host that is gone: its
 * NODE_ID has the default form `<this hostname>-<pid>` and no process has
 * that pid now. A gateway restarted under a new pid then takes its previous
 * process's sessions over at once instead of waiting SESSION_LEASE_MS. A pid
 * reused by another process reads as alive: the lease just lapses, safely.
 */
import { defaultNodeId } from '../config/node-id.js'
import { pidGone } from '../util/pid-gone.js'

export function isDeadLocalNode (node: string): boolean {
  const dash = node.lastIndexOf('-')
  const pid = Number(node.slice(dash + 1))
  if (dash < 0 || !Number.isInteger(pid) || pid <= 1 || pid === process.pid) return false
  return node === defaultNodeId(pid) && pidGone(pid)
}
