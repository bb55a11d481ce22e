/**
 * Pending CLI control requests over HTTP, for callers without a WebSocket
 * (push-notification flows): list them, answer one. Same checks and the same
 * first-answer-wins rule as a holder's `control_response`.
 */
import type { FastifyInstance } from 'fastify'
import type { ZodTypeProvider } from 'fastify-type-provider-zod'
import { z } from 'zod'
import { GatewayError } from '../errors.js'
import { permissionAnswer } from '../protocol/client-frames.js'
import { firstIssue } from '../protocol/first-issue.js'
import type { SessionManager } from '../session/session-manager.js'
import { summariseInput } from '../control/input-summary.js'
import { answerResult, attentionList, authErrors, errorResponses, pendingList, requestParams, sessionParams } from './schemas.js'
import { findSession, sessionErrors } from './sessions.js'
import { jsonBody } from './validate.js'

export interface PermissionRoutesOptions {
  manager: SessionManager
}

/** Either a permission decision as-is, or a generic control_response body. */
const answerBody = z.union([
  z.looseObject({ behavior: z.enum(['allow', 'deny']) }),
  z.strictObject({ subtype: z.literal('success'), response: z.record(z.string(), z.unknown()).optional() }),
  z.strictObject({ subtype: z.literal('error'), error: z.string().min(1).max(10_000) })
])

export async function permissionRoutes (fastify: FastifyInstance, { manager }: PermissionRoutesOptions): Promise<void> {
  const app = fastify.withTypeProvider<ZodTypeProvider>()

  app.get('/v1/permissions', {
    schema: {
      tags: ['permissions'],
      summary: 'Every permission prompt waiting for an answer, across the caller\'s sessions (oldest first)',
      response: { 200: attentionList, ...errorResponses(...authErrors, 'store_unavailable') }
    }
  }, async (request) => {
    const { prompts, unreachable } = await manager.pendingPrompts(request.tenant)
    const now = Date.now()
    return {
      permissions: prompts.filter(({ request: p }) => p.subtype === 'can_use_tool').map(({ sessionId, request: p }) => ({
        session_id: sessionId,
        request_id: p.requestId,
        tool_name: String(p.request.tool_name),
        ...(typeof p.request.display_name === 'string' ? { display_name: p.request.display_name } : {}),
        summary: summariseInput(typeof p.request.input === 'object' && p.request.input !== null ? p.request.input as Record<string, unknown> : {}),
        seq: p.seq,
        created_at: new Date(p.createdAt).toISOString(),
        age_ms: Math.max(0, now - p.createdAt)
      })),
      unreachable_sessions: unreachable
    }
  })

  app.get('/v1/sessions/:id/permissions', {
    schema: { tags: ['permissions'], summary: 'Pending CLI control requests (permission prompts, hooks, …)', params: sessionParams, response: { 200: pendingList.describe('The pending requests, oldest first'), ...sessionErrors, ...errorResponses('node_unavailable') } }
  }, async (request) => {
    const session = await findSession(manager, request)
    return {
      requests: (await session.pendingAnywhere()).map((p) => ({
        request_id: p.requestId,
        subtype: p.subtype,
        request: p.request,
        seq: p.seq,
        created_at: new Date(p.createdAt).toISOString()
      }))
    }
  })

  app.post('/v1/sessions/:id/permissions/:request_id', {
    schema: {
      tags: ['permissions'],
      summary: 'Answer a pending control request (first answer wins)',
      params: requestParams,
      body: answerBody,
      response: {
        200: answerResult.describe('The answer went to the CLI'),
        ...errorResponses(...authErrors, 'bad_request', 'payload_too_large', 'unsupported_media_type', 'broad_rule_not_allowed', 'bypass_not_allowed', 'permission_update_not_allowed', 'session_not_found', 'unknown_request', 'already_resolved', 'session_not_running', 'store_unavailable', 'node_unavailable')
      }
    },
    preValidation: jsonBody
  }, async (request) => {
    const session = await findSession(manager, request)
    const { request_id: requestId } = request.params
    const body = request.body
    if ('behavior' in body) {
      // The fields the answer's behavior names, typed as a holder's answer is (the union above checks only the behavior).
      const typed = permissionAnswer.safeParse(body)
      if (!typed.success) {
        const { path, message } = firstIssue(typed.error)
        throw new GatewayError('bad_request', `${path === '' ? '' : `${path}: `}${message}`)
      }
    }
    const input = 'behavior' in body
      ? { subtype: 'success' as const, response: body as Record<string, unknown> }
      : body
    const result = await session.answerAnywhere(requestId, input, `http:${request.tenant}`)
    // An answer the prompt cannot take is an invalid body here: `invalid_frame` is the WebSocket's word for it.
    if (!result.ok) throw new GatewayError(result.code === 'invalid_frame' ? 'bad_request' : result.code, result.message)
    return { request_id: requestId, decision: result.decision }
  })
}
