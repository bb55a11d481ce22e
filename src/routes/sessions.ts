/**
 * REST: create, list, inspect and stop sessions. Another tenant's session is
 * answered exactly like a missing one (404).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { GatewayError } from '../errors.js'
import { listQuery, sessionOptions } from '../protocol/session-options.js'
import type { Session } from '../session/session.js'
import type { SessionManager } from '../session/session-manager.js'
import { sessionView } from '../session/session-view.js'
import { isSessionId, parseOr400 } from './validate.js'

export interface SessionRoutesOptions {
  manager: SessionManager
}

/** The caller's session or a 404 GatewayError. */
export async function findSession (manager: SessionManager, request: FastifyRequest): Promise<Session> {
  const { id } = request.params as { id: string }
  const session = isSessionId(id) ? await manager.get(id.toLowerCase(), request.tenant) : null
  if (session === null) throw new GatewayError('session_not_found')
  return session
}

export async function sessionRoutes (app: FastifyInstance, { manager }: SessionRoutesOptions): Promise<void> {
  app.post('/v1/sessions', async (request, reply) => {
    const options = parseOr400(sessionOptions, request.body ?? {})
    const session = await manager.create(request.tenant, options)
    return reply.code(201).send(session.snapshot())
  })

  app.get('/v1/sessions', async (request) => {
    const query = parseOr400(listQuery, request.query)
    const page = await manager.list(request.tenant, query.limit, query.cursor)
    const loaded = new Map([...manager.loaded].map((s) => [s.id, s]))
    return {
      sessions: page.sessions.map((r) => loaded.get(r.id)?.snapshot() ?? sessionView(r)),
      next_cursor: page.next_cursor
    }
  })

  app.get('/v1/sessions/:id', async (request) => (await findSession(manager, request)).snapshot())

  app.delete('/v1/sessions/:id', async (request) => {
    const session = await findSession(manager, request)
    await session.stop('deleted')
    return session.snapshot()
  })
}
