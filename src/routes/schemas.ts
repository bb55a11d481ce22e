/**
 * The shapes of the REST answers and path parameters, as zod schemas for the
 * route `schema`s: Fastify serializes the JSON answers through them and
 * @fastify/swagger documents them (GET /openapi.json). Request bodies and
 * queries live in src/protocol/session-options.ts. Error answers are built
 * from the one error table, so each route lists the codes it can answer with.
 */
import { z } from 'zod'
import { type ErrorCode, errorTable } from '../errors.js'

const errorCodes = Object.keys(errorTable) as [ErrorCode, ...ErrorCode[]]

/** `{statusCode, code, message}`: every error answer (src/errors.ts). */
export const errorBody = z.object({
  statusCode: z.number().int(),
  // Any code of the table, whatever the status: a narrower enum would turn an unlisted one into a 500.
  code: z.enum(errorCodes),
  message: z.string()
})

/**
 * Response schemas for the given error codes, grouped by status, each
 * described by the codes it carries (OpenAPI `responses`). Codes every
 * authenticated route may answer with are added by `authErrors`.
 */
export function errorResponses (...codes: ErrorCode[]): Record<number, typeof errorBody> {
  const byStatus = new Map<number, ErrorCode[]>()
  for (const code of codes) {
    const status = errorTable[code].statusCode
    byStatus.set(status, [...(byStatus.get(status) ?? []), code])
  }
  const responses: Record<number, typeof errorBody> = {}
  for (const [status, list] of byStatus) {
    responses[status] = errorBody.describe(list.map((c) => `\`${c}\`: ${errorTable[c].message}`).join('; '))
  }
  return responses
}

/** What any route behind authentication and the security plugin's checks may answer. */
export const authErrors: ErrorCode[] = ['unauthorized', 'forbidden_origin', 'forbidden_host', 'rate_limited', 'internal']

/** `:id`. Not checked as a UUID here: a malformed id is a session that does not exist (404, as another tenant's). */
export const sessionParams = z.object({
  id: z.string().describe('Session id (a UUID; anything else is answered 404 session_not_found)')
})

export const requestParams = sessionParams.extend({
  request_id: z.string().describe('The pending control request\'s request_id')
})

const exitInfo = z.object({
  code: z.number().int().nullable(),
  signal: z.string().nullable(),
  stderr_tail: z.array(z.string()),
  reason: z.enum(['exited', 'stopped', 'spawn_failed', 'lost']),
  at: z.string(),
  error: z.string().optional(),
  oom_kills: z.number().int().optional().describe('Processes of the CLI (it or its tools) the kernel killed at its memory limit (CLI_MEMORY_MAX_MB); absent when none')
})

/** src/session/session-view.ts: a session as REST callers see it. */
export const sessionBody = z.object({
  id: z.string(),
  status: z.enum(['starting', 'running', 'stopping', 'stopped', 'exited']),
  created_at: z.string(),
  updated_at: z.string(),
  last_seq: z.number().int(),
  clients: z.number().int(),
  holder: z.string().nullable().describe('Id of the client holding the session'),
  pid: z.number().int().nullable(),
  turn_running: z.boolean(),
  pending_requests: z.number().int(),
  store: z.enum(['ok', 'degraded']),
  exit: exitInfo.nullable(),
  options: z.record(z.string(), z.unknown()).describe('The options the session was created with'),
  metadata: z.unknown()
})

export const sessionPage = z.object({
  sessions: z.array(sessionBody),
  next_cursor: z.string().nullable()
})

export const wsTicketBody = z.object({
  ticket: z.string().describe('Single-use credential for GET /v1/sessions/:id/ws?ticket='),
  expires_at: z.string()
})

/** Documentation only: the route sends the page as prebuilt bytes (src/routes/history-body.ts), never through this. */
export const historyPage = z.object({
  events: z.array(z.record(z.string(), z.unknown())).describe('Recorded frames exactly as sent live, with `seq`, ascending'),
  has_more: z.boolean(),
  next_after: z.number().int().nullable().describe('Last seq of the page; pass it as `after` to continue')
})

export const pendingList = z.object({
  requests: z.array(z.object({
    request_id: z.string(),
    subtype: z.string(),
    request: z.record(z.string(), z.unknown()),
    seq: z.number().int(),
    created_at: z.string()
  }))
})

export const attentionList = z.object({
  permissions: z.array(z.object({
    session_id: z.string(),
    request_id: z.string(),
    tool_name: z.string(),
    display_name: z.string().optional(),
    summary: z.string().describe('What the tool will do, in one line (its command, path, URL …), cut to 160 characters'),
    seq: z.number().int(),
    created_at: z.string(),
    age_ms: z.number().int()
  })),
  unreachable_sessions: z.number().int().describe('Live sessions whose node did not answer (left out of the list)')
})

export const answerResult = z.object({
  request_id: z.string(),
  decision: z.string()
})

export const healthBody = z.object({ status: z.literal('ok') })

export const readyBody = z.object({
  status: z.enum(['ok', 'degraded', 'unavailable']),
  store: z.object({ kind: z.string(), state: z.enum(['ok', 'degraded']) }),
  sessions: z.object({ running: z.number().int(), max: z.number().int() }),
  shutting_down: z.boolean()
})
