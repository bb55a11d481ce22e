/**
 * Frame predicates and labels shared by the integration tests (fake CLI
 * behind a real gateway): what a TestClient waits for, and the INDEX.md-style
 * labels used to compare what a client saw with the recorded transcripts of
 * the real CLI 2.1.332 in test/fixtures/recorded.
 */
import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** A frame as received: loosely typed JSON. */
export type Frame = Record<string, any>

/** Recorded stdout/stdin of the real CLI 2.1.332 (see its INDEX.md). */
export const RECORDED = fileURLToPath(new URL('../fixtures/recorded/claude-code-2.1.332/', import.meta.url))

// ---- predicates ----

export const isHello = (f: Frame): boolean => f.type === 'gateway' && f.subtype === 'hello'
/** A can_use_tool permission prompt from the CLI. */
export const isPrompt = (f: Frame): boolean => f.type === 'control_request' && f.request?.subtype === 'can_use_tool'
/** A hook callback request from the CLI. */
export const isHook = (f: Frame): boolean => f.type === 'control_request' && f.request?.subtype === 'hook_callback'
export const isResult = (f: Frame): boolean => f.type === 'result'
export const isIdle = (f: Frame): boolean => f.type === 'system' && f.subtype === 'session_state_changed' && f.state === 'idle'
/** A gateway error frame with that code. */
export const isError = (code: string) => (f: Frame): boolean => f.type === 'gateway' && f.subtype === 'error' && f.code === code
/** The gateway's refusal of a client control_request: a control_response error with its request_id and that code (never recorded: no seq). */
export const isRefusal = (code: string, requestId?: string) => (f: Frame): boolean =>
  f.type === 'control_response' && f.response?.subtype === 'error' && f.response.code === code &&
  (requestId === undefined || f.response.request_id === requestId)
/** The code of a gateway error frame (undefined for any other frame). */
export const errorCode = (f: Frame): string | undefined => f.type === 'gateway' && f.subtype === 'error' ? f.code : undefined
/** A gateway status frame announcing that status. */
export const isStatus = (status: string) => (f: Frame): boolean => f.type === 'gateway' && f.subtype === 'status' && f.status === status
/** The gateway frame of that subtype (permission_resolved, request_resolved) for a request. */
export const resolvedFrame = (subtype: string, requestId: string) => (f: Frame): boolean =>
  f.type === 'gateway' && f.subtype === subtype && f.request_id === requestId
/** The `permission_resolved` frame of a request. */
export const resolved = (requestId: string): ((f: Frame) => boolean) => resolvedFrame('permission_resolved', requestId)

// ---- INDEX.md labels ----

/** The labels of INDEX.md (type, /subtype of the message or its request/response, :state), plus gateway frames. */
export function label (m: Frame): string {
  if (m.type === 'gateway') return `gateway/${String(m.subtype)}${typeof m.decision === 'string' ? `:${m.decision}` : ''}`
  const sub = m.subtype ?? m.response?.subtype ?? m.request?.subtype
  let s = String(m.type)
  if (typeof sub === 'string' && m.type !== 'assistant' && m.type !== 'user') s += `/${sub}`
  if (m.subtype === 'session_state_changed') s += `:${String(m.state)}`
  return s
}

/** Labels from the first can_use_tool request to the first result after it. */
export function promptToResult (frames: Frame[]): string[] {
  const start = frames.findIndex(isPrompt)
  const end = frames.findIndex((f, i) => i > start && isResult(f))
  assert.ok(start >= 0 && end > start, 'a prompt and a result after it')
  return frames.slice(start, end + 1).map(label)
}

/** The same window in a recorded stdout of the real CLI; the inline copy keeps the test usable without the fixtures. */
export function referenceWindow (name: string, fallback: string[]): string[] {
  const file = join(RECORDED, `${name}.stdout.ndjson`)
  if (!existsSync(file)) return fallback
  const lines = readFileSync(file, 'utf8').split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as Frame)
  return promptToResult(lines)
}
