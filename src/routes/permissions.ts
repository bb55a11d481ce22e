/**
 * Pending CLI control requests over HTTP, for callers without a WebSocket
 * (push-notification flows): list them, answer one. Same checks and the same
 * first-answer-wins rule as a holder's `control_response`.
 */
import type { FastifyInstance } from 'fastify'
import { z } from 'zod'
import { GatewayError } from '../errors.js'
import type { SessionManager } from '../session/session-manager.js'
import { findSession } from './sessions.js'
import { parseOr400 } from './validate.js'

export interface PermissionRoutesOptions {
  manager: SessionManager
}

/** Either a permission decision as-is, or a generic control_response body. */
const answerBody = z.union([
  z.looseObject({ behavior: z.enum(['allow', 'deny']) }),
  z.strictObject({ subtype: z.literal('success'), response: z.record(z.string(), z.unknown()).optional() }),
  z.strictObject({ subtype: z.literal('error'), error: z.string().min(1).max(10_000) })
])

export async function permissionRoutes (app: FastifyInstance, { manager }: PermissionRoutesOptions): Promise<void> {
  app.get('/v1/sessions/:id/permissions', async (request) => {
    const session = await findSession(manager, request)
    return {
      requests: session.pendingRequests.map((p) => ({
        request_id: p.requestId,
        subtype: p.subtype,
        request: p.request,
        seq: p.seq,
        created_at: new Date(p.createdAt).toISOString()
      }))
    }
  })

  app.post('/v1/sessions/:id/permissions/:request_id', async (request) => {
    const session = await findSession(manager, request)
    const { request_id: requestId } = request.params as { request_id: string }
    const body = parseOr400(answerBody, request.body ?? {})
    const input = 'behavior' in body
      ? { subtype: 'success' as const, response: body as Record<string, unknown> }
      : body
    const result = session.answer(requestId, input, `http:${request.tenant}`)
    if (!result.ok) throw new GatewayError(result.code, result.message)
    return { request_id: requestId, decision: result.decision }
  })
}
