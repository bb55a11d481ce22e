/**
 * The pending CLI control requests of all a tenant's live sessions
 * (`GET /v1/permissions`), each asked of the node running its CLI. Apart
 * from session-manager.ts: a scan across sessions, not one session's
 * lookup, with its own bound and its own answer for nodes that are silent.
 */
import type { PendingRequest } from '../control/pending-requests.js'
import { GatewayError } from '../errors.js'
import { type SessionPage, isFinal } from '../store/store.js'
import type { Session } from './session.js'

/** Session records one scan reads at most. */
const PROMPT_SCAN_MAX = 1000

export interface PendingPromptsSource {
  /** A page of the tenant's session records (SessionManager.list). */
  list: (tenant: string, limit: number, cursor?: string) => Promise<SessionPage>
  /** The session, loaded (SessionManager.get). */
  get: (id: string, tenant: string) => Promise<Session | null>
}

/**
 * Every pending request of the tenant's live sessions, oldest first. Reads
 * at most PROMPT_SCAN_MAX session records. A session whose node does not
 * answer is left out and counted in `unreachable`.
 */
export async function pendingPrompts (tenant: string, source: PendingPromptsSource): Promise<{ prompts: Array<{ sessionId: string, request: PendingRequest }>, unreachable: number }> {
  const live: string[] = []
  let cursor: string | undefined
  for (let read = 0; read < PROMPT_SCAN_MAX;) {
    const page = await source.list(tenant, 100, cursor)
    read += page.sessions.length
    for (const r of page.sessions) if (!isFinal(r.status)) live.push(r.id)
    if (page.next_cursor === null || page.sessions.length === 0) break
    cursor = page.next_cursor
  }
  let unreachable = 0
  const found = await Promise.all(live.map(async (id) => {
    try {
      const session = await source.get(id, tenant)
      return session === null ? [] : (await session.pendingAnywhere()).map((request) => ({ sessionId: id, request }))
    } catch (err) {
      if (!(err instanceof GatewayError)) throw err
      unreachable++
      return []
    }
  }))
  return { prompts: found.flat().sort((a, b) => a.request.createdAt - b.request.createdAt), unreachable }
}
