/**
 * Frames a WebSocket client may send to the gateway. They are checked for what
 * security needs (type, ids, the fields the gateway acts on) and otherwise
 * passed on as sent: unknown fields stay, so what a newer Agent SDK adds still
 * reaches the CLI. What reaches the CLI's stdin is always the parsed value
 * re-serialised, so a client can never write invalid JSON or `\r\n` to it
 * (either kills it).
 */
import { z } from 'zod'
import { firstIssue } from './first-issue.js'
import { isRecord } from './is-record.js'

/**
 * Any JSON object (not an array), as parsed. Keys of parsed JSON are strings
 * already: `z.record(z.string(), z.unknown())` checked each and built a copy
 * that was thrown away, most of what a permission answer's check cost
 * (docs/PERFORMANCE.md §21).
 */
const jsonObject = z.custom<Record<string, unknown>>(isRecord, { message: 'Invalid input: expected object' })

const contentBlock = z.looseObject({ type: z.string().min(1) })

export const userFrame = z.looseObject({
  type: z.literal('user'),
  message: z.looseObject({
    role: z.literal('user'),
    content: z.union([z.string(), z.array(contentBlock).min(1)])
  }),
  /** Set by clients that retry: a uuid already forwarded is not forwarded twice. */
  uuid: z.string().min(1).max(128).optional(),
  parent_tool_use_id: z.string().nullable().optional(),
  /** Replaced: the gateway fills the session's id. */
  session_id: z.string().optional()
})

export const permissionModes = ['default', 'acceptEdits', 'bypassPermissions', 'plan', 'dontAsk', 'auto'] as const

const requestId = z.string().min(1).max(200)

/** Control requests whose fields the gateway checks; extra fields pass. Other subtypes pass as objects. */
const knownControl = z.discriminatedUnion('subtype', [
  z.looseObject({ subtype: z.literal('interrupt') }),
  z.looseObject({ subtype: z.literal('set_model'), model: z.string().max(200).nullable().optional() }),
  z.looseObject({ subtype: z.literal('set_permission_mode'), mode: z.enum(permissionModes) }),
  z.looseObject({ subtype: z.literal('set_max_thinking_tokens'), max_thinking_tokens: z.number().int().min(0).nullable() }),
  // The holder's handshake: hooks, systemPrompt, sdkMcpServers, agents, jsonSchema, … (vetted by the control policy).
  z.looseObject({ subtype: z.literal('initialize') })
])
const knownSubtypes = new Set(['interrupt', 'set_model', 'set_permission_mode', 'set_max_thinking_tokens', 'initialize'])
const otherControl = z.looseObject({ subtype: z.string().min(1).max(100) })
  .refine((r) => !knownSubtypes.has(r.subtype), { message: 'invalid fields for this subtype' })

export const controlRequestFrame = z.looseObject({
  type: z.literal('control_request'),
  request_id: requestId,
  request: z.union([knownControl, otherControl])
})

export const controlResponseFrame = z.looseObject({
  type: z.literal('control_response'),
  response: z.union([
    z.looseObject({ subtype: z.literal('success'), request_id: requestId, response: jsonObject.optional() }),
    z.looseObject({ subtype: z.literal('error'), request_id: requestId, error: z.string().max(10_000) })
  ])
})

/** The SDK withdraws one of its own requests (e.g. an aborted `mcpServerStatus()`). */
export const controlCancelFrame = z.looseObject({ type: z.literal('control_cancel_request'), request_id: requestId })

export const keepAliveFrame = z.looseObject({ type: z.literal('keep_alive') })

/**
 * A newer bearer credential for the connection (a JWT before it expires, a
 * rotated token). Handled by the gateway's WebSocket route, never forwarded:
 * it comes through parseClientFrame as an `other_type` frame.
 */
export const credentialFrame = z.strictObject({ type: z.literal('credential'), token: z.string().min(1).max(16_384) })

const knownFrames = {
  user: userFrame,
  control_request: controlRequestFrame,
  control_response: controlResponseFrame,
  control_cancel_request: controlCancelFrame,
  keep_alive: keepAliveFrame
} as const

/** A frame of a type the gateway does not know: `value` is the frame as sent (`value.type` a string). */
export interface OtherTypeFrame { type: 'other_type', value: Record<string, unknown> & { type: string } }

export type UserFrame = z.infer<typeof userFrame>
export type ControlRequestFrame = z.infer<typeof controlRequestFrame>
export type ControlResponseFrame = z.infer<typeof controlResponseFrame>
export type ControlCancelFrame = z.infer<typeof controlCancelFrame>
export type KeepAliveFrame = z.infer<typeof keepAliveFrame>
export type ClientFrame = UserFrame | ControlRequestFrame | ControlResponseFrame | ControlCancelFrame | KeepAliveFrame | OtherTypeFrame

/** Answer to a `can_use_tool` prompt, as the holder sends it inside `control_response.response`. */
export const permissionAnswer = z.discriminatedUnion('behavior', [
  z.looseObject({
    behavior: z.literal('allow'),
    updatedInput: jsonObject.optional(),
    updatedPermissions: z.array(z.unknown()).optional()
  }),
  z.looseObject({
    behavior: z.literal('deny'),
    message: z.string().max(10_000).optional(),
    interrupt: z.boolean().optional()
  })
])

export type PermissionAnswer = z.infer<typeof permissionAnswer>

/**
 * Deepest object/array nesting accepted from a client. Frames are re-serialised
 * with JSON.stringify, which recurses: a few KB of `[[[[...` would overflow the
 * stack on the way to the CLI (an uncaught RangeError ends the gateway).
 */
export const MAX_JSON_DEPTH = 64

/**
 * What would keep a parsed value from reaching the CLI as sent, found in one
 * walk without recursion: `too_deep` (nesting more than `max` levels, checked
 * first), or `non_finite` (JSON text such as `1e999` parses to Infinity, which
 * JSON.stringify writes as `null`, so the CLI would get another value than the
 * client sent); null when neither.
 */
export function jsonProblem (value: unknown, max: number = MAX_JSON_DEPTH): 'too_deep' | 'non_finite' | null {
  // Two stacks, not one of [value, depth] pairs: nothing allocated per member.
  const values: unknown[] = [value]
  const depths: number[] = [1]
  let nonFinite = false
  while (values.length > 0) {
    const v = values.pop()
    const depth = depths.pop() as number
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) nonFinite = true
      continue
    }
    if (typeof v !== 'object' || v === null) continue
    if (depth > max) return 'too_deep'
    for (const child of Array.isArray(v) ? v : Object.values(v)) {
      values.push(child)
      depths.push(depth + 1)
    }
  }
  return nonFinite ? 'non_finite' : null
}

/** True when `value` nests objects/arrays more than `max` levels deep. */
export function tooDeep (value: unknown, max: number = MAX_JSON_DEPTH): boolean {
  return jsonProblem(value, max) === 'too_deep'
}

export type ParsedClientFrame =
  | { ok: true, frame: ClientFrame }
  | { ok: false, code: 'invalid_json' | 'invalid_frame', message: string, requestId?: string }

/**
 * Parses a text frame; returns a typed error code instead of throwing. A
 * refused `control_request` whose `request_id` can be read carries it, so the
 * refusal can be the control_response error an SDK waits for.
 */
export function parseClientFrame (text: string): ParsedClientFrame {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return { ok: false, code: 'invalid_json', message: 'The frame is not valid JSON' }
  }
  const refuse = (message: string): ParsedClientFrame => {
    const id = readableRequestId(value)
    return { ok: false, code: 'invalid_frame', message, ...(id === undefined ? {} : { requestId: id }) }
  }
  const problem = jsonProblem(value)
  if (problem === 'too_deep') return refuse(`The frame nests more than ${MAX_JSON_DEPTH} levels deep`)
  if (problem === 'non_finite') return refuse('A number in the frame is too large to pass on exactly (it would reach the CLI as null)')
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return refuse('A frame is a JSON object')
  const type = (value as { type?: unknown }).type
  if (typeof type !== 'string' || type === '' || type.length > 100) return refuse('A frame needs a "type" string')
  const schema = Object.hasOwn(knownFrames, type) ? knownFrames[type as keyof typeof knownFrames] : undefined
  // The value as sent, not zod's copy: fields the schemas do not name pass unchanged.
  if (schema === undefined) return { ok: true, frame: { type: 'other_type', value: value as OtherTypeFrame['value'] } }
  const parsed = schema.safeParse(value)
  if (!parsed.success) {
    const { path, message } = firstIssue(parsed.error)
    return refuse(`${message}${path === '' ? '' : ` at ${path}`}`)
  }
  return { ok: true, frame: value as ClientFrame }
}

/** The request_id of a control_request frame, if it is a usable one (whatever else is wrong with the frame). */
function readableRequestId (value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined
  const frame = value as { type?: unknown, request_id?: unknown }
  if (frame.type !== 'control_request') return undefined
  return requestId.safeParse(frame.request_id).success ? frame.request_id as string : undefined
}
