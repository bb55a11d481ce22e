/**
 * The JSON body of each webhook, built from what the session reports
 * (src/session/session-events.ts). Sizes are bounded whatever the CLI sent:
 * a tool's input may be megabytes (a Write's content), so a permission
 * prompt carries the one-line summary GET /v1/permissions shows and a capped
 * JSON preview of the input, and a turn's result text is cut;
 * building either reads no more of the value than the cap. docs/WEBHOOKS.md
 * documents every field.
 */
import { randomUUID } from 'node:crypto'
import { summariseInput } from '../control/input-summary.js'
import type { PermissionRequested, PermissionResolved, SessionEnded, SessionRef, TurnFinished } from '../session/session-events.js'
import type { WebhookEventType } from './webhook-event-types.js'

/** Characters of a tool input's JSON preview (`input_preview`). */
export const INPUT_PREVIEW_MAX = 1024
/** Characters of a turn's result text (`result`). */
export const RESULT_MAX = 4096

export interface WebhookBody {
  /** The delivery's id: the same on every attempt, so a receiver can drop repeats. */
  id: string
  type: WebhookEventType
  /** When the gateway saw the event (ISO 8601, UTC). */
  created_at: string
  session_id: string
  tenant: string
  data: Record<string, unknown>
}

/** A body for `type` with a new id and the current time. */
export function webhookBody (type: WebhookEventType, session: SessionRef, data: Record<string, unknown>, now = new Date()): WebhookBody {
  return { id: randomUUID(), type, created_at: now.toISOString(), session_id: session.sessionId, tenant: session.tenant, data }
}

/** `summary` is the one line GET /v1/permissions shows; `input_preview` the input's JSON, capped. */
export function permissionRequestedData (e: PermissionRequested): Record<string, unknown> {
  const preview = jsonPreview(e.input, INPUT_PREVIEW_MAX)
  return { request_id: e.requestId, tool_name: e.toolName, summary: summariseInput(e.input), input_preview: preview.text, input_truncated: preview.truncated, seq: e.seq }
}

export function permissionResolvedData (e: PermissionResolved): Record<string, unknown> {
  return { request_id: e.requestId, decision: e.decision, by: e.by, seq: e.seq }
}

export function turnFinishedData (e: TurnFinished): Record<string, unknown> {
  const cut = e.result !== null && e.result.length > RESULT_MAX
  return {
    subtype: e.subtype,
    is_error: e.isError,
    duration_ms: e.durationMs,
    total_cost_usd: e.totalCostUsd,
    result: cut ? `${(e.result as string).slice(0, RESULT_MAX)}…` : e.result,
    result_truncated: cut,
    seq: e.seq
  }
}

export function sessionEndedData (e: SessionEnded): Record<string, unknown> {
  return { status: e.status, reason: e.reason, code: e.code, signal: e.signal, seq: e.seq }
}

/**
 * `value` as JSON, cut to `max` characters (then ending in `…`). Walks only
 * as much of the value as fits: a long string is sliced before it is
 * escaped, and a container stops at the first member past the budget.
 */
export function jsonPreview (value: unknown, max: number): { text: string, truncated: boolean } {
  const out: string[] = []
  let length = 0
  let full = false
  const emit = (s: string): void => {
    if (full) return
    if (length + s.length > max) {
      out.push(s.slice(0, max - length))
      length = max
      full = true
      return
    }
    out.push(s)
    length += s.length
  }
  const walk = (v: unknown, seen: Set<object>): void => {
    if (full) return
    if (typeof v === 'string') {
      // One character past the budget is enough to know it was cut; escaping only lengthens.
      const head = v.length > max - length ? v.slice(0, max - length + 1) : v
      emit(JSON.stringify(head))
      if (head.length < v.length) full = true
    } else if (v === null || typeof v === 'number' || typeof v === 'boolean') {
      emit(JSON.stringify(v))
    } else if (Array.isArray(v)) {
      if (seen.has(v)) return emit('null')
      seen.add(v)
      emit('[')
      v.forEach((item, i) => {
        if (full) return
        if (i > 0) emit(',')
        walk(item === undefined || typeof item === 'function' ? null : item, seen)
      })
      emit(']')
      seen.delete(v)
    } else if (typeof v === 'object') {
      if (seen.has(v)) return emit('null')
      seen.add(v)
      emit('{')
      let first = true
      for (const [k, item] of Object.entries(v)) {
        if (full) break
        if (item === undefined || typeof item === 'function') continue
        emit(`${first ? '' : ','}${JSON.stringify(k)}:`)
        first = false
        walk(item, seen)
      }
      emit('}')
      seen.delete(v)
    } else {
      emit('null') // bigint, symbol, undefined at the top: not JSON
    }
  }
  walk(value, new Set())
  const text = out.join('')
  return full ? { text: `${text}…`, truncated: true } : { text, truncated: false }
}
