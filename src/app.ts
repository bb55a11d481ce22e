/**
 * Builds the gateway's Fastify app from a config object and injected parts
 * (store, CLI launcher, authenticator, logger). Does not listen: server.ts
 * does, and tests call `buildApp` with their own parts. The only place that
 * picks implementations.
 */
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import websocket from '@fastify/websocket'
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import pino, { type Logger } from 'pino'
import { type Authenticator, StaticTokens, bearerToken } from './auth/static-tokens.js'
import type { CliLauncher } from './cli/cli-handle.js'
import { CliProcess } from './cli/cli-process.js'
import type { Config } from './config.js'
import { GatewayError, closeCodes } from './errors.js'
import { eventRoutes } from './routes/events.js'
import { healthRoutes } from './routes/health.js'
import { permissionRoutes } from './routes/permissions.js'
import { sessionRoutes } from './routes/sessions.js'
import { wsRoutes } from './routes/ws.js'
import { SessionManager } from './session/session-manager.js'
import { MemoryStore } from './store/memory.js'
import { RedisStore } from './store/redis.js'
import type { EventStore } from './store/store.js'
import { Heartbeat } from './ws/heartbeat.js'

export interface AppParts {
  store?: EventStore
  launch?: CliLauncher
  authenticator?: Authenticator
  logger?: Logger
  /** Environment the CLI's allowlisted env is taken from (default: process.env). */
  env?: NodeJS.ProcessEnv
}

export interface GatewayState {
  manager: SessionManager
  store: EventStore
  heartbeat: Heartbeat
  /** Set when GATEWAY_TOKENS was unset: the token generated for this run (tenant `default`). */
  generatedToken: string | null
  shuttingDown: boolean
}

declare module 'fastify' {
  interface FastifyInstance {
    gateway: GatewayState
  }
  interface FastifyRequest {
    /** The authenticated caller's tenant (set for /v1 routes). */
    tenant: string
  }
}

export async function buildApp (config: Config, parts: AppParts = {}): Promise<FastifyInstance> {
  const logger = parts.logger ?? pino({ level: config.logLevel, redact: ['req.headers.authorization', 'req.headers["sec-websocket-protocol"]'] })
  const ownsStore = parts.store === undefined
  const store = parts.store ?? (config.redisUrl === undefined
    ? new MemoryStore({ retention: retention(config) })
    : new RedisStore({ url: config.redisUrl, prefix: config.redisPrefix, retention: retention(config) }))

  let generatedToken: string | null = null
  let authenticator = parts.authenticator
  if (authenticator === undefined) {
    let tokens = config.tokens
    if (tokens === null) {
      generatedToken = randomBytes(24).toString('base64url')
      tokens = new Map([[generatedToken, 'default']])
    }
    authenticator = new StaticTokens(tokens)
  }

  const launch: CliLauncher = parts.launch ?? ((spec, callbacks) => new CliProcess(spec, callbacks, {
    maxLineBytes: config.maxLineBytes,
    stopTimeoutMs: config.cliStopTimeoutMs,
    logger,
    pidDir: join(config.dataDir, 'pids')
  }))

  const manager = new SessionManager({
    store,
    launch,
    logger,
    claudeBin: config.claudeBin,
    claudeArgsExtra: config.claudeArgsExtra,
    workspaceRoot: config.workspaceRoot,
    maxSessions: config.maxSessions,
    env: parts.env,
    limits: {
      permissionTimeoutMs: config.permissionTimeoutMs,
      controlRequestTimeoutMs: config.controlRequestTimeoutMs,
      clientRequestTimeoutMs: config.clientRequestTimeoutMs,
      idleTimeoutMs: config.idleTimeoutMs,
      storeQueueMax: config.storeQueueMax
    }
  })
  const heartbeat = new Heartbeat(config.keepaliveIntervalMs)

  const app = Fastify({ loggerInstance: logger as FastifyBaseLogger, disableRequestLogging: false, bodyLimit: 1024 * 1024 })
  const state: GatewayState = { manager, store, heartbeat, generatedToken, shuttingDown: false }
  app.decorate('gateway', state)
  app.decorateRequest('tenant', '')

  app.setErrorHandler((err: Error & { statusCode?: number, code?: string }, request, reply) => {
    if (err instanceof GatewayError) return reply.code(err.statusCode).send(err.toJSON())
    const status = err.statusCode ?? 500
    if (status >= 500) {
      request.log.error({ err }, 'request failed')
      return reply.code(500).send(new GatewayError('internal').toJSON())
    }
    const code = status === 413 ? 'payload_too_large' : status === 429 ? 'rate_limited' : 'bad_request'
    return reply.code(status).send({ statusCode: status, code, message: err.message })
  })
  app.setNotFoundHandler((_request, reply) => reply.code(404).send(new GatewayError('not_found').toJSON()))

  app.addHook('onRequest', async (request) => {
    if (!request.url.startsWith('/v1/') && request.url !== '/v1') return
    const token = bearerToken(request.headers.authorization)
    const tenant = token === null ? null : await (authenticator as Authenticator).authenticate(token)
    if (tenant === null) throw new GatewayError('unauthorized')
    request.tenant = tenant
  })

  await app.register(websocket, { options: { maxPayload: config.wsMaxPayloadBytes } })
  await app.register(sessionRoutes, { manager })
  await app.register(permissionRoutes, { manager })
  await app.register(eventRoutes, { manager, keepaliveIntervalMs: config.keepaliveIntervalMs, maxBufferedBytes: config.wsMaxBufferedBytes })
  await app.register(wsRoutes, { manager, heartbeat, maxBufferedBytes: config.wsMaxBufferedBytes })
  await app.register(healthRoutes, { manager, store, maxSessions: config.maxSessions, isShuttingDown: () => state.shuttingDown })

  app.addHook('onReady', async () => {
    try {
      const recovered = await manager.recover()
      if (recovered > 0) logger.warn({ recovered }, 'sessions left running by a previous gateway process marked stopped')
    } catch (err) {
      logger.error({ err }, 'could not recover sessions from the store')
    }
  })

  // Clients first (1012: come back later), then every CLI, then the store.
  app.addHook('preClose', async () => {
    state.shuttingDown = true
    heartbeat.stop()
    for (const client of heartbeat.clients()) client.close(closeCodes.serviceRestart, 'gateway shutting down')
  })
  app.addHook('onClose', async () => {
    await manager.shutdown(config.shutdownGraceMs)
    if (ownsStore) await store.close()
  })

  return app
}

function retention (config: Config): { maxEventsPerSession: number, ttlSecondsAfterEnd: number } {
  return { maxEventsPerSession: config.eventsMaxPerSession, ttlSecondsAfterEnd: config.eventsTtlSeconds }
}
