/**
 * The session as REST callers see it: the stored record plus, for a session
 * loaded in this process, its live state. One shape for both, so a listed
 * session that is not loaded looks exactly like a loaded one at rest.
 */
import type { SessionRecord } from '../store/store.js'

export interface LiveState {
  last_seq: number
  clients: number
  holder: string | null
  pid: number | null
  turn_running: boolean
  pending_requests: number
  store: 'ok' | 'degraded'
}

export function sessionView (r: SessionRecord, live: LiveState | null = null): Record<string, unknown> {
  return {
    id: r.id,
    status: r.status,
    created_at: r.created_at,
    updated_at: r.updated_at,
    last_seq: live?.last_seq ?? r.last_seq,
    clients: live?.clients ?? 0,
    holder: live?.holder ?? null,
    pid: live?.pid ?? null,
    turn_running: live?.turn_running ?? false,
    pending_requests: live?.pending_requests ?? 0,
    store: live?.store ?? 'ok',
    exit: r.exit,
    options: r.options,
    metadata: r.metadata
  }
}
