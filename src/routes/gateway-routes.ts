/**
 * Registers the gateway's plugins and routes on the app, in the order they
 * depend on (the websocket plugin before security, OpenAPI before the
 * routes it documents). Apart from app.ts, which picks the parts; this
 * file only says where each is served.
 */
import websocket from '@fastify/websocket'
import type { FastifyInstance } from 'fastify'
import type { LiveCredentials } from '../auth/live-credentials.js'
import type { TicketBook } from '../auth/tickets.js'
import type { Placement } from '../cluster/placement.js'
import type { Config } from '../config.js'
import type { Metrics } from '../metrics/metrics.js'
import { isLoopback } from '../net/loopback.js'
import { TenantConnections } from '../net/tenant-connections.js'
import security, { GATEWAY_PROTOCOL } from '../plugins/security.js'
import type { SessionManager } from '../session/session-manager.js'
import type { EventStore } from '../store/store.js'
import type { Heartbeat } from '../ws/heartbeat.js'
import { consoleRoutes } from './console.js'
import { eventRoutes } from './events.js'
import { healthRoutes } from './health.js'
import { metricsRoutes } from './metrics.js'
import openapi from './openapi.js'
import { permissionRoutes } from './permissions.js'
import { sessionRoutes } from './sessions.js'
import { wsRoutes } from './ws.js'

export interface GatewayRoutesParts {
  manager: SessionManager
  store: EventStore
  heartbeat: Heartbeat
  placement: Placement
  authenticator: LiveCredentials
  tickets: TicketBook
  metrics: Metrics
  isShuttingDown: () => boolean
  /** The built web console served at `/` (default: dist/console of this package). */
  consoleDir: string | undefined
}

export async function gatewayRoutes (app: FastifyInstance, config: Config, parts: GatewayRoutesParts): Promise<void> {
  const { manager, heartbeat, tickets, metrics, authenticator } = parts
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
    loopbackOnly: isLoopback(config.host),
    rateLimitPerMinute: config.rateLimitPerMinute,
    authFailuresPerMinute: config.authFailuresPerMinute,
    wsUpgradesPerMinute: config.wsUpgradesPerMinute,
    wsUpgradesPerMinutePerAddress: config.wsUpgradesPerMinutePerAddress,
    metrics
  })
  await app.register(openapi) // before the routes: it documents those registered after it
  await app.register(sessionRoutes, { manager, placement: parts.placement })
  await app.register(permissionRoutes, { manager })
  const tenantConnections = new TenantConnections(config.maxConnectionsPerTenant)
  await app.register(eventRoutes, { manager, keepaliveIntervalMs: config.keepaliveIntervalMs, maxBufferedBytes: config.wsMaxBufferedBytes, maxClientsPerSession: config.maxClientsPerSession, tenantConnections, historyPageMaxBytes: config.historyPageMaxBytes, credentials: authenticator })
  await app.register(wsRoutes, {
    manager,
    heartbeat,
    tickets,
    maxBufferedBytes: config.wsMaxBufferedBytes,
    maxClientsPerSession: config.maxClientsPerSession,
    maxFramesPerSec: config.wsMaxFramesPerSec,
    tenantConnections,
    credentials: authenticator
  })
  await app.register(healthRoutes, { manager, store: parts.store, maxSessions: config.maxSessions, isShuttingDown: parts.isShuttingDown })
  await app.register(consoleRoutes, { dir: parts.consoleDir })
  // METRICS_PORT 0: on this server; else a listener of its own, opened when the app is ready (lifecycle.ts).
  if (config.metricsPort === 0) await app.register(metricsRoutes, { scrape: () => metrics.scrape(), token: config.metricsToken })
}
