/**
 * The views of a page of session records, as `GET /v1/sessions` shows them.
 * A session whose CLI runs on another gateway node is shown as that node
 * sees it (pid, holder, clients, a turn running, prompts waiting), asked over
 * the node bus, all of the page's at once: a listing read only from stored
 * records would show a busy session elsewhere as idle with no holder, and a
 * console would badge it wrongly. Sessions owned here come from memory; ended
 * ones, and any whose owner does not answer in time, as stored.
 */
import { type SessionRecord, isFinal } from '../store/store.js'
import { withTimeout } from '../util/with-timeout.js'
import type { SessionRoute } from './session-deps.js'
import { sessionView } from './session-view.js'

export interface ListingDeps {
  /** The session's object on this node, if it is loaded here. */
  loaded: (id: string) => { readonly owned: boolean, snapshot: () => Record<string, unknown> } | undefined
  /** Routing to other nodes; without it every view is this node's. */
  route?: Pick<SessionRoute, 'node' | 'owner' | 'call'> | undefined
  /** How long one owner may take to answer before its session is shown as stored. */
  timeoutMs: number
}

export async function sessionViews (records: SessionRecord[], deps: ListingDeps): Promise<Array<Record<string, unknown>>> {
  return await Promise.all(records.map(async (record) => {
    const loaded = deps.loaded(record.id)
    const here = (): Record<string, unknown> => loaded?.snapshot() ?? sessionView(record)
    const route = deps.route
    if (loaded?.owned === true || isFinal(record.status) || route === undefined) return here()
    try {
      return await withTimeout((async () => {
        const owner = await route.owner(record.id)
        if (owner === null || owner === route.node) return here()
        return await route.call(owner, record.id, 'snapshot', []) as Record<string, unknown>
      })(), deps.timeoutMs, 'the session\'s node did not answer')
    } catch {
      return here()
    }
  }))
}
