/**
 * Liveness and readiness. `/healthz` answers while the process runs;
 * `/readyz` says whether new sessions can be taken and the store answers.
 * The container healthcheck (docker/healthcheck.mjs) reads `/readyz`'s body,
 * not its status: `store.state` and `shutting_down` decide health, while a
 * gateway at MAX_SESSIONS (503 here) is full, not unhealthy.
 */
import type { FastifyInstance } from 'fastify'
import type { ZodTypeProvider } from 'fastify-type-provider-zod'
import type { SessionManager } from '../session/session-manager.js'
import type { EventStore } from '../store/store.js'
import { withTimeout } from '../util/with-timeout.js'
import { errorResponses, healthBody, readyBody } from './schemas.js'

export interface HealthRoutesOptions {
  manager: SessionManager
  store: EventStore
  maxSessions: number
  isShuttingDown: () => boolean
}

export async function healthRoutes (fastify: FastifyInstance, options: HealthRoutesOptions): Promise<void> {
  const app = fastify.withTypeProvider<ZodTypeProvider>()

  // Public (no security): see src/plugins/security.ts.
  app.get('/healthz', {
    schema: { tags: ['health'], summary: 'Liveness', security: [], response: { 200: healthBody.describe('The process runs'), ...errorResponses('forbidden_origin', 'forbidden_host') } }
  }, async () => ({ status: 'ok' as const }))

  app.get('/readyz', {
    schema: {
      tags: ['health'],
      summary: 'Readiness: 503 when full, shutting down or the store does not answer (the body says which)',
      security: [],
      response: { 200: readyBody.describe('Ready'), 503: readyBody.describe('Full, shutting down, or the store does not answer'), ...errorResponses('forbidden_origin', 'forbidden_host') }
    }
  }, async (_request, reply) => {
    let storeOk = true
    try {
      await withTimeout(options.store.ping(), 1000)
    } catch {
      storeOk = false
    }
    const degraded = !storeOk || options.manager.degraded
    const full = options.manager.runningCount >= options.maxSessions
    const ready = storeOk && !full && !options.isShuttingDown()
    return reply.code(ready ? 200 : 503).send({
      status: full || options.isShuttingDown() ? 'unavailable' : degraded ? 'degraded' : 'ok',
      store: { kind: options.store.kind, state: degraded ? 'degraded' : 'ok' },
      sessions: { running: options.manager.runningCount, max: options.maxSessions },
      shutting_down: options.isShuttingDown()
    })
  })
}
