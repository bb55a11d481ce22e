/**
 * Builds the gateway's Fastify app from a config object and injected parts
 * (store, CLI launcher, authenticator, logger). Does not listen: server.ts
 * does, and tests call `buildApp` with their own parts. The only place that
 * picks implementations.
 */
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import websocket from '@fastify/websocket'
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply } from 'fastify'
import pino, { type Logger } from 'pino'
import { AnyOf, JwtAuthenticator } from './auth/jwt.js'
import { type Authenticator, StaticTokens } from './auth/static-tokens.js'
import { TicketBook } from './auth/tickets.js'
import type { CliLauncher } from './cli/cli-handle.js'
import { CliProcess } from './cli/cli-process.js'
import { reapOrphans } from './cli/reaper.js'
import type { Config } from './config.js'
import { GatewayError, closeCodes } from './errors.js'
import security, { GATEWAY_PROTOCOL } from './plugins/security.js'
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
    if (tokens === null && config.jwt === null) {
      generatedToken = randomBytes(24).toString('base64url')
      tokens = new Map([[generatedToken, 'default']])
    }
    const all: Authenticator[] = []
    if (tokens !== null) all.push(new StaticTokens(tokens))
    if (config.jwt !== null) all.push(new JwtAuthenticator(config.jwt))
    authenticator = all.length === 1 ? all[0] as Authenticator : new AnyOf(all)
  }
  const tickets = new TicketBook({ ttlMs: config.wsTicketTtlMs })
  const pidDir = join(config.dataDir, 'pids')

  const launch: CliLauncher = parts.launch ?? ((spec, callbacks) => new CliProcess(spec, callbacks, {
    maxLineBytes: config.maxLineBytes,
    stopTimeoutMs: config.cliStopTimeoutMs,
    logger,
    pidDir
  }))

  const manager = new SessionManager({
    store,
    launch,
    logger,
    claudeBin: config.claudeBin,
    claudeArgsExtra: config.claudeArgsExtra,
    workspaceRoot: config.workspaceRoot,
    maxSessions: config.maxSessions,
    maxSessionsPerTenant: config.maxSessionsPerTenant,
    allowBypassPermissions: config.allowBypassPermissions,
    configRoot: config.tenantConfigDirs ? join(config.dataDir, 'claude-config') : null,
    launcher: config.claudeLauncher,
    env: parts.env,
    limits: {
      permissionTimeoutMs: config.permissionTimeoutMs,
      controlRequestTimeoutMs: config.controlRequestTimeoutMs,
      clientRequestTimeoutMs: config.clientRequestTimeoutMs,
      idleTimeoutMs: config.idleTimeoutMs,
      storeQueueMax: config.storeQueueMax,
      allowBypassPermissions: config.allowBypassPermissions
    }
  })
  const heartbeat = new Heartbeat(config.keepaliveIntervalMs)

  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    bodyLimit: config.bodyLimitBytes,
    // The router's own errors (a malformed %-escape in the URL) get the same body as every other error.
    frameworkErrors: (_err, _request, reply) => { void (reply as FastifyReply).code(400).send(new GatewayError('bad_request', 'The URL is not valid').toJSON()) }
  })
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

  // Clients first (1012: come back later), then every CLI, then the store.
  // Added before the websocket plugin, whose own preClose closes every socket without a code.
  app.addHook('preClose', async () => {
    state.shuttingDown = true
    heartbeat.stop()
    for (const client of heartbeat.clients()) client.close(closeCodes.serviceRestart, 'gateway shutting down')
  })

  // Before security: its onRequest hook marks upgrade requests, so an upgrade
  // refused by a later hook (401, 403) has its socket closed after the answer
  // instead of left open (which also stalled app.close()).
  await app.register(websocket, {
    options: {
      maxPayload: config.wsMaxPayloadBytes,
      // Select our protocol name, never echo the `bearer.<token>` entry back.
      handleProtocols: (protocols) => protocols.has(GATEWAY_PROTOCOL) ? GATEWAY_PROTOCOL : false
    }
  })

  await app.register(security, {
    authenticator,
    tickets,
    allowedOrigins: config.allowedOrigins,
    allowedHosts: config.allowedHosts,
    loopbackOnly: LOOPBACK.has(config.host),
    rateLimitPerMinute: config.rateLimitPerMinute,
    authFailuresPerMinute: config.authFailuresPerMinute
  })
  await app.register(sessionRoutes, { manager })
  await app.register(permissionRoutes, { manager })
  await app.register(eventRoutes, { manager, keepaliveIntervalMs: config.keepaliveIntervalMs, maxBufferedBytes: config.wsMaxBufferedBytes, maxClientsPerSession: config.maxClientsPerSession })
  await app.register(wsRoutes, {
    manager,
    heartbeat,
    tickets,
    maxBufferedBytes: config.wsMaxBufferedBytes,
    maxClientsPerSession: config.maxClientsPerSession,
    maxFramesPerSec: config.wsMaxFramesPerSec
  })
  await app.register(healthRoutes, { manager, store, maxSessions: config.maxSessions, isShuttingDown: () => state.shuttingDown })

  app.addHook('onReady', async () => {
    const reaped = await reapOrphans(pidDir, config.cliStopTimeoutMs)
    if (reaped.length > 0) logger.warn({ pids: reaped }, 'ended CLIs left running by a previous gateway process')
    try {
      const recovered = await manager.recover()
      if (recovered > 0) logger.warn({ recovered }, 'sessions left running by a previous gateway process marked stopped')
    } catch (err) {
      logger.error({ err }, 'could not recover sessions from the store')
    }
  })

  app.addHook('onClose', async () => {
    await manager.shutdown(config.shutdownGraceMs)
    if (ownsStore) await store.close()
  })

  return app
}

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost'])

function retention (config: Config): { maxEventsPerSession: number, ttlSecondsAfterEnd: number } {
  return { maxEventsPerSession: config.eventsMaxPerSession, ttlSecondsAfterEnd: config.eventsTtlSeconds }
}
