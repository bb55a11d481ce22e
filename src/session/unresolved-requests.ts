/**
 * The CLI control requests a session's log leaves open: asked (a
 * `control_request` line of the CLI) and never ended (no
 * `permission_resolved` or `request_resolved` record, no
 * `control_cancel_request`). Read when a session is recorded lost: the
 * process that held them is gone (crashed, killed, fenced off), so nothing
 * else would ever end them, and history, event streams, webhooks and
 * clients on other nodes would keep a prompt open for good.
 */
import type { EventStore } from '../store/store.js'
import { isRecord } from '../protocol/is-record.js'

/**
 * How far back from the log's end to look. A pending prompt holds the
 * CLI's turn, so little follows it; a scan this long stays a few store
 * round trips at the rare moment a session is found lost.
 */
export const LOST_SCAN_EVENTS = 2000
const PAGE = 500

export interface OpenRequest {
  requestId: string
  /** `can_use_tool`, `hook_callback`, … */
  subtype: string
}

/** The requests asked in the last LOST_SCAN_EVENTS events of the log and not ended there, oldest first. */
export async function unresolvedRequests (store: Pick<EventStore, 'read' | 'lastSeq'>, sessionId: string): Promise<OpenRequest[]> {
  const last = await store.lastSeq(sessionId)
  if (last === null) return []
  const open = new Map<string, string>()
  let after = Math.max(0, last - LOST_SCAN_EVENTS)
  for (;;) {
    const events = await store.read(sessionId, after, PAGE)
    for (const event of events) {
      after = event.seq
      note(open, event.frame)
    }
    if (events.length < PAGE) break
  }
  return [...open].map(([requestId, subtype]) => ({ requestId, subtype }))
}

function note (open: Map<string, string>, frame: string): void {
  let f: unknown
  try {
    f = JSON.parse(frame)
  } catch {
    return
  }
  if (!isRecord(f)) return
  const id = typeof f.request_id === 'string' ? f.request_id : null
  if (f.type === 'control_request' && id !== null && isRecord(f.request)) {
    open.set(id, String(f.request.subtype))
  } else if (f.type === 'control_cancel_request' && id !== null) {
    open.delete(id)
  } else if (f.type === 'gateway' && (f.subtype === 'permission_resolved' || f.subtype === 'request_resolved') && id !== null) {
    open.delete(id)
  } else if (f.type === 'gateway' && f.subtype === 'status' && (f.status === 'stopped' || f.status === 'exited')) {
    // A CLI that ended ended its requests with it (recorded just before).
    open.clear()
  }
}
