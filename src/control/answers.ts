/**
 * How an answer to a pending CLI request becomes the control_response the CLI
 * reads: validated, completed where the CLI needs fields the holder may leave
 * out, and otherwise passed as the holder sent it (hook outputs, MCP JSON-RPC
 * payloads, fields of newer SDKs). Also the gateway's own answer when nobody
 * answered in time.
 */
import { type PermissionAnswer, permissionAnswer } from '../protocol/client-frames.js'
import type { AnswerInput } from './control-effects.js'
import type { PendingRequest } from './pending-requests.js'
import { isRecord } from '../protocol/is-record.js'

export const DEFAULT_DENY_MESSAGE = 'The user denied this tool use.'

/** The control_response body for the CLI and the decision to record, or why the answer is not valid. */
export type CompletedAnswer = { response: Record<string, unknown>, decision: string } | { invalid: string }

export function completeAnswer (pending: PendingRequest, input: AnswerInput): CompletedAnswer {
  const requestId = pending.requestId
  if (input.subtype === 'error') {
    return {
      response: { ...input, subtype: 'error', request_id: requestId, error: input.error ?? 'error' },
      decision: pending.subtype === 'can_use_tool' ? 'denied' : 'answered'
    }
  }
  if (pending.subtype === 'can_use_tool') {
    const parsed = permissionAnswer.safeParse(input.response)
    if (!parsed.success) return { invalid: 'A can_use_tool answer needs response.behavior "allow" or "deny"' }
    return {
      response: { ...input, subtype: 'success', request_id: requestId, response: completePermissionAnswer(parsed.data, pending.request) },
      decision: parsed.data.behavior === 'allow' ? 'allowed' : 'denied'
    }
  }
  return { response: { ...input, subtype: 'success', request_id: requestId, response: input.response ?? {} }, decision: 'answered' }
}

/**
 * Completes a holder's answer to `can_use_tool` the way the CLI needs it:
 * an allow always carries `updatedInput` (CLIs since 2.1.112 deny without it),
 * a deny always carries a `message`, and both carry `toolUseID` so the CLI
 * can match the answer even if it no longer knows the request_id.
 */
export function completePermissionAnswer (answer: PermissionAnswer, request: Record<string, unknown>): Record<string, unknown> {
  const toolUseID = typeof request.tool_use_id === 'string' ? request.tool_use_id : undefined
  if (answer.behavior === 'allow') {
    const input = isRecord(request.input) ? request.input : {}
    return { ...answer, updatedInput: answer.updatedInput ?? input, ...(toolUseID === undefined ? {} : { toolUseID }) }
  }
  return {
    ...answer,
    message: answer.message === undefined || answer.message === '' ? DEFAULT_DENY_MESSAGE : answer.message,
    ...(toolUseID === undefined ? {} : { toolUseID })
  }
}

/** What the gateway answers when nobody answered a request in time: a prompt is denied with an interrupt, anything else is an error. */
export function timeoutAnswer (pending: PendingRequest, permissionTimeoutMs: number, controlTimeoutMs: number): Record<string, unknown> {
  return pending.subtype === 'can_use_tool'
    ? { subtype: 'success', request_id: pending.requestId, response: timeoutDenial(pending.request, permissionTimeoutMs) }
    : { subtype: 'error', request_id: pending.requestId, error: `No client answered within ${controlTimeoutMs} ms` }
}

/** The answer the gateway gives when nobody answered a prompt in time. */
export function timeoutDenial (request: Record<string, unknown>, timeoutMs: number): Record<string, unknown> {
  const toolUseID = typeof request.tool_use_id === 'string' ? request.tool_use_id : undefined
  return {
    behavior: 'deny',
    message: `No client answered this permission prompt within ${timeoutMs} ms (PERMISSION_TIMEOUT_MS); the gateway denied it and interrupted the turn. The user did not deny it.`,
    interrupt: true,
    ...(toolUseID === undefined ? {} : { toolUseID })
  }
}

