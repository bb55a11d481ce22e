/**
 * What a node learns from the frames of a session it follows but does not
 * own (appended by another node, read back from the store): the observer
 * rendering of a CLI control request, status changes, the CLI's init, and the
 * uuids of the messages written to the CLI. Only frames that
 * can be one of these are parsed; the text check is a cheap pre-filter.
 */
import type { StoredEvent } from '../store/store.js'
import { isRecord } from '../protocol/is-record.js'
import { pendingNotice } from './frames.js'

/** The `request_pending` notice observers get instead of a stored CLI control_request, else undefined. */
export function observerFrameOf (event: StoredEvent): string | undefined {
  if (!event.frame.includes('"control_request"')) return undefined
  const parsed = parse(event.frame)
  if (parsed?.type !== 'control_request') return undefined
  return pendingNotice(event.seq, String(parsed.request_id), isRecord(parsed.request) ? parsed.request : {})
}

/** A stored gateway `status` frame's fields, else null. */
export function statusOf (event: StoredEvent): Record<string, unknown> | null {
  if (!event.frame.includes('"status"')) return null
  const parsed = parse(event.frame)
  return parsed?.type === 'gateway' && parsed.subtype === 'status' ? parsed : null
}

/** True for the CLI's `system`/`init` line: from then on its conversation is stored and `--resume` finds it. */
export function isInit (event: StoredEvent): boolean {
  if (!event.frame.includes('"init"')) return false
  const parsed = parse(event.frame)
  return parsed?.type === 'system' && parsed.subtype === 'init'
}

/**
 * The `uuid` of a recorded `user_message` (a message the owner wrote to the
 * CLI), else null: a node that takes the session over must not write it again
 * when the client's unconfirmed copy is handled there.
 */
export function askedUuid (event: StoredEvent): string | null {
  if (!event.frame.includes('"user_message"')) return null
  const parsed = parse(event.frame)
  return parsed?.type === 'gateway' && parsed.subtype === 'user_message' && typeof parsed.uuid === 'string' ? parsed.uuid : null
}

function parse (frame: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(frame)
    return isRecord(value) ? value : null
  } catch {
    return null
  }
}
