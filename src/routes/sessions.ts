/**
 * REST: create, list, inspect and stop sessions. Another tenant's session is
 * answered exactly like a missing one (404).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { ZodTypeProvider } from 'fastify-type-provider-zod'
import type { z } from 'zod'
import { GatewayError } from '../errors.js'
import { listQuery, sessionOptions } from '../protocol/session-options.js'
import type { Session } from '../session/session.js'
import type { SessionManager } from '../session/session-manager.js'
import type { Placement } from '../cluster/placement.js'
import { incomingCursor, outgoingCursor } from './list-cursor.js'
import { authErrors, errorResponses, sessionBody, sessionPage, sessionParams } from './schemas.js'
import { emptyJsonIsNoBody, isSessionId, jsonBody } from './validate.js'

export interface SessionRoutesOptions {
  manager: SessionManager
  /** Other nodes with room, for creates this node is too full to take. */
  placement?: Pick<Placement, 'elsewhere'>
}

/** Answers of every route under /v1/sessions/:id besides its own. */
export const sessionErrors = errorResponses(...authErrors, 'session_not_found', 'store_unavailable')

/** The caller's session or a 404 GatewayError. */
export async function findSession (manager: SessionManager, request: FastifyRequest): Promise<Session> {
  const { id } = request.params as { id: string }
  const session = isSessionId(id) ? await manager.get(id.toLowerCase(), request.tenant) : null
  if (session === null) throw new GatewayError('session_not_found')
  return session
}

export async function sessionRoutes (fastify: FastifyInstance, { manager, placement }: SessionRoutesOptions): Promise<void> {
  const app = fastify.withTypeProvider<ZodTypeProvider>()
  emptyJsonIsNoBody(app)

  app.post('/v1/sessions', {
    schema: {
      tags: ['sessions'],
      summary: 'Create a session and start its CLI',
      description: 'Every body field is optional and maps to one CLI flag (docs/API.md); no body is the same as `{}`.',
      body: sessionOptions,
      response: {
        201: sessionBody.describe('The new session'),
        ...errorResponses(...authErrors, 'bad_request', 'payload_too_large', 'unsupported_media_type', 'broad_rule_not_allowed', 'bypass_not_allowed', 'tenant_session_limit', 'cli_start_failed', 'too_many_sessions', 'shutting_down', 'store_unavailable')
      }
    },
    preValidation: jsonBody
  }, async (request, reply) => {
    let session
    try {
      session = await manager.create(request.tenant, request.body)
    } catch (err) {
      // This node is full: another with room starts the CLI (several nodes, docs/SCALING.md).
      const placed = err instanceof GatewayError && err.code === 'too_many_sessions' ? await placement?.elsewhere(request.tenant, request.body) : null
      if (placed == null) throw err
      return reply.code(201).send(placed as z.output<typeof sessionBody>)
    }
    return reply.code(201).send(session.snapshot() as z.output<typeof sessionBody>)
  })

  app.get('/v1/sessions', {
    schema: {
      tags: ['sessions'],
      summary: 'The caller\'s sessions, newest first',
      querystring: listQuery,
      response: { 200: sessionPage.describe('A page of sessions; pass next_cursor back as cursor'), ...errorResponses(...authErrors, 'bad_request', 'store_unavailable') }
    }
  }, async (request) => {
    const page = await manager.listViews(request.tenant, request.query.limit, incomingCursor(request.tenant, request.query.cursor))
    return { sessions: page.sessions as Array<z.output<typeof sessionBody>>, next_cursor: outgoingCursor(request.tenant, page.next_cursor) }
  })

  app.get('/v1/sessions/:id', {
    schema: { tags: ['sessions'], summary: 'One session (as the node running its CLI sees it)', params: sessionParams, response: { 200: sessionBody.describe('The session'), ...sessionErrors, ...errorResponses('node_unavailable') } }
  }, async (request) => await (await findSession(manager, request)).snapshotAnywhere() as z.output<typeof sessionBody>)

  app.delete('/v1/sessions/:id', {
    schema: { tags: ['sessions'], summary: 'Stop the session\'s CLI (history is kept), on whichever node runs it', params: sessionParams, response: { 200: sessionBody.describe('The session, stopping'), ...sessionErrors, ...errorResponses('node_unavailable') } }
  }, async (request) => {
    const session = await findSession(manager, request)
    const here = session.owned
    await session.stopAnywhere('deleted')
    if (here && session.owned) return session.snapshot() as z.output<typeof sessionBody>
    // Stopped by another node: this node's copy predates the stop, so it is read again, as GET reads it.
    return await (await findSession(manager, request)).snapshotAnywhere() as z.output<typeof sessionBody>
  })
}
