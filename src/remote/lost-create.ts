/**
 * A create whose answer never came (claude-remote's bound passed, or the
 * connection broke after the request went out) may still have made a
 * session on the gateway and started its CLI. Its id is unknown, so the
 * create carries a key of claude-remote's own in its `metadata`; this finds
 * the session holding that key and stops it, so no CLI runs on, listed and
 * counted against the tenant, with nobody to end it.
 */
import { randomUUID } from 'node:crypto'
import { isRecord } from '../protocol/is-record.js'
import type { GatewayApi } from './gateway-api.js'

/** The `metadata` field that names claude-remote's create. */
export const CREATE_KEY_FIELD = 'claude_remote_create'
/** Each look-up and the DELETE: bounded like a SIGTERM's stop (the host is already waiting on a failure). */
const CALL_MS = 3_000
/** Pages of 100 looked through: the session is among the newest unless that many were created meanwhile. */
const MAX_PAGES = 3

export function newCreateKey (): string {
  return randomUUID()
}

/** The session made by the create carrying `key`, stopped; its id, or null when none is found (or the look-up failed: said on stderr). */
export async function stopLostCreate (api: GatewayApi, key: string, warn: (message: string) => void): Promise<string | null> {
  let id: string | null = null
  try {
    let cursor: string | null = null
    for (let page = 0; page < MAX_PAGES && id === null; page++) {
      const listed = await api.listSessions(cursor, CALL_MS)
      const sessions = Array.isArray(listed.sessions) ? listed.sessions as unknown[] : []
      const found = sessions.find((s) => isRecord(s) && isRecord(s.metadata) && s.metadata[CREATE_KEY_FIELD] === key)
      if (isRecord(found)) id = String(found.id)
      cursor = typeof listed.next_cursor === 'string' ? listed.next_cursor : null
      if (cursor === null) break
    }
    if (id === null) return null
    await api.deleteSession(id, CALL_MS)
    warn(`the gateway made session ${id} for that create after all: stopped it`)
    return id
  } catch (err) {
    warn(`could not look for the session that create may have made${id === null ? '' : ` (${id})`}: ${err instanceof Error ? err.message : String(err)}`)
    return null
  }
}
