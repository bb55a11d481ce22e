/**
 * Permission prompts: turning the frames that announce one into a
 * PermissionRequest, and a decision into what the gateway expects, over the
 * WebSocket (a control_response) or HTTP (the decision itself).
 */
import type { PermissionDecision, PermissionRequest } from './connection-types.js'
import type { Recorded, RequestPendingFrame } from './frames.js'

/** An allow; `updatedInput` replaces the tool's input (the gateway otherwise sends the request's own). */
export function allowDecision (updatedInput?: Record<string, unknown>, updatedPermissions?: unknown[]): PermissionDecision {
  return { behavior: 'allow', ...(updatedInput === undefined ? {} : { updatedInput }), ...(updatedPermissions === undefined ? {} : { updatedPermissions }) }
}

/** A deny; `interrupt` also ends the turn. */
export function denyDecision (message: string, interrupt?: boolean): PermissionDecision {
  return { behavior: 'deny', message, ...(interrupt === undefined ? {} : { interrupt }) }
}

/**
 * An allow that also grants what the CLI suggested (permission_suggestions:
 * rules, directories, a mode), so the same request is not asked again. The
 * gateway checks the grant (PROTOCOL.md, Control policy) and may refuse it.
 */
export function alwaysAllowDecision (request: PermissionRequest): PermissionDecision {
  return allowDecision(undefined, request.suggestions)
}

/** The PermissionRequest of a CLI `can_use_tool` control_request, or null for other frames. */
export function permissionFromControlRequest (frame: { seq: number, request_id?: unknown, request?: unknown }, canAnswer: boolean): PermissionRequest | null {
  const r = frame.request
  if (!isObject(r) || r.subtype !== 'can_use_tool' || typeof frame.request_id !== 'string') return null
  return {
    requestId: frame.request_id,
    toolName: typeof r.tool_name === 'string' ? r.tool_name : 'unknown',
    ...(typeof r.display_name === 'string' ? { displayName: r.display_name } : {}),
    ...(typeof r.description === 'string' ? { description: r.description } : {}),
    input: isObject(r.input) ? r.input : {},
    suggestions: Array.isArray(r.permission_suggestions) ? r.permission_suggestions : [],
    ...(typeof r.tool_use_id === 'string' ? { toolUseId: r.tool_use_id } : {}),
    ...(typeof r.blocked_path === 'string' ? { blockedPath: r.blocked_path } : {}),
    seq: frame.seq,
    canAnswer
  }
}

/** The PermissionRequest an observer can know from `request_pending` (no input, no suggestions), or null for other subtypes. */
export function permissionFromPending (frame: Recorded<RequestPendingFrame>): PermissionRequest | null {
  if (frame.request_subtype !== 'can_use_tool') return null
  return {
    requestId: frame.request_id,
    toolName: frame.tool_name ?? 'unknown',
    ...(frame.display_name === undefined ? {} : { displayName: frame.display_name }),
    ...(frame.description === undefined ? {} : { description: frame.description }),
    input: {},
    suggestions: [],
    seq: frame.seq,
    canAnswer: false
  }
}

/** The holder's control_response answering a can_use_tool prompt. */
export function permissionAnswerFrame (requestId: string, decision: PermissionDecision): Record<string, unknown> {
  return { type: 'control_response', response: { subtype: 'success', request_id: requestId, response: decision } }
}

function isObject (value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
