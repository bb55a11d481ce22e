/**
 * Frames a WebSocket client may send to the gateway. Everything that reaches
 * the CLI's stdin passes through these schemas and is re-serialised, so a
 * client can never write invalid JSON, `\r\n` or an unexpected type to the CLI
 * (either kills it).
 */
import { z } from 'zod'

const contentBlock = z.looseObject({ type: z.string().min(1) })

export const userFrame = z.object({
  type: z.literal('user'),
  message: z.object({
    role: z.literal('user'),
    content: z.union([z.string(), z.array(contentBlock).min(1)])
  }),
  /** Set by clients that retry: a uuid already forwarded is not forwarded twice. */
  uuid: z.string().min(1).max(128).optional(),
  parent_tool_use_id: z.string().nullable().optional(),
  /** Ignored: the gateway fills the session's id. */
  session_id: z.string().optional()
})

export const permissionModes = ['default', 'acceptEdits', 'bypassPermissions', 'plan', 'dontAsk', 'auto'] as const

const requestId = z.string().min(1).max(200)

/** Control requests with a known shape are checked; other subtypes pass through as objects. */
const knownControl = z.discriminatedUnion('subtype', [
  z.object({ subtype: z.literal('interrupt') }),
  z.object({ subtype: z.literal('set_model'), model: z.string().max(200).nullable().optional() }),
  z.object({ subtype: z.literal('set_permission_mode'), mode: z.enum(permissionModes) }),
  z.object({ subtype: z.literal('set_max_thinking_tokens'), max_thinking_tokens: z.number().int().min(0).nullable() })
])
const knownSubtypes = new Set(['interrupt', 'set_model', 'set_permission_mode', 'set_max_thinking_tokens'])
const otherControl = z.looseObject({ subtype: z.string().min(1).max(100) })
  .refine((r) => !knownSubtypes.has(r.subtype), { message: 'invalid fields for this subtype' })
  .refine((r) => r.subtype !== 'initialize', { message: 'initialize is sent by the gateway itself' })

export const controlRequestFrame = z.object({
  type: z.literal('control_request'),
  request_id: requestId,
  request: z.union([knownControl, otherControl])
})

export const controlResponseFrame = z.object({
  type: z.literal('control_response'),
  response: z.union([
    z.object({ subtype: z.literal('success'), request_id: requestId, response: z.record(z.string(), z.unknown()).optional() }),
    z.object({ subtype: z.literal('error'), request_id: requestId, error: z.string().max(10_000) })
  ])
})

export const keepAliveFrame = z.object({ type: z.literal('keep_alive') })

export const clientFrame = z.discriminatedUnion('type', [userFrame, controlRequestFrame, controlResponseFrame, keepAliveFrame])

export type ClientFrame = z.infer<typeof clientFrame>
export type UserFrame = z.infer<typeof userFrame>
export type ControlRequestFrame = z.infer<typeof controlRequestFrame>
export type ControlResponseFrame = z.infer<typeof controlResponseFrame>

/** Answer to a `can_use_tool` prompt, as the holder sends it inside `control_response.response`. */
export const permissionAnswer = z.discriminatedUnion('behavior', [
  z.looseObject({
    behavior: z.literal('allow'),
    updatedInput: z.record(z.string(), z.unknown()).optional(),
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

/** True when `value` nests objects/arrays more than `max` levels deep (checked without recursion). */
export function tooDeep (value: unknown, max: number = MAX_JSON_DEPTH): boolean {
  const stack: Array<[unknown, number]> = [[value, 1]]
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    const [v, depth] = top
    if (typeof v !== 'object' || v === null) continue
    if (depth > max) return true
    for (const child of Object.values(v)) stack.push([child, depth + 1])
  }
  return false
}

/** Parses a text frame; returns a typed error code instead of throwing. */
export function parseClientFrame (text: string):
  { ok: true, frame: ClientFrame } | { ok: false, code: 'invalid_json' | 'invalid_frame', message: string } {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return { ok: false, code: 'invalid_json', message: 'The frame is not valid JSON' }
  }
  if (tooDeep(value)) return { ok: false, code: 'invalid_frame', message: `The frame nests more than ${MAX_JSON_DEPTH} levels deep` }
  const parsed = clientFrame.safeParse(value)
  if (!parsed.success) {
    const first = parsed.error.issues[0]
    const where = first === undefined || first.path.length === 0 ? '' : ` at ${first.path.join('.')}`
    return { ok: false, code: 'invalid_frame', message: `${first?.message ?? 'invalid'}${where}` }
  }
  return { ok: true, frame: parsed.data }
}
