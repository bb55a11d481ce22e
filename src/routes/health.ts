/**
 * Liveness and readiness. `/healthz` answers while the process runs;
 * `/readyz` says whether new sessions can be taken and the store answers.
 * The container healthcheck (docker/healthcheck.mjs) reads `/readyz`'s body,
 * not its status: `store.state` and `shutting_down` decide health, while a
 * gateway at MAX_SESSIONS (503 here) is full, not unhealthy.
 */
import type { FastifyInstance } from 'fastify'
import type { SessionManager } from '../session/session-manager.js'
import type { EventStore } from '../store/store.js'

export interface HealthRoutesOptions {
  manager: SessionManager
  store: EventStore
  maxSessions: number
  isShuttingDown: () => boolean
}

export async function healthRoutes (app: FastifyInstance, options: HealthRoutesOptions): Promise<void> {
  app.get('/healthz', async () => ({ status: 'ok' }))

  app.get('/readyz', async (_request, reply) => {
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

function withTimeout<T> (promise: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('timeout')), ms)
    promise.then((v) => { clearTimeout(timer); resolve(v) }, (e: unknown) => { clearTimeout(timer); reject(e as Error) })
  })
}
