/**
 * Builds the gateway's Fastify app from a config object and injected parts
 * (store, CLI launcher, authenticator, logger). Does not listen: server.ts
 * does, and tests call `buildApp` with their own parts. The only place that
 * picks implementations.
 */
import { randomBytes } from 'node:crypto'
import type { Server } from 'node:http'
import { join } from 'node:path'
import websocket from '@fastify/websocket'
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply } from 'fastify'
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod'
import pino, { type Logger } from 'pino'
import { AnyOf, JwtAuthenticator, jwtExpiresAt } from './auth/jwt.js'
import { LiveCredentials } from './auth/live-credentials.js'
import { type Authenticator, StaticTokens } from './auth/static-tokens.js'
import { TicketBook } from './auth/tickets.js'
import type { CliLauncher } from './cli/cli-handle.js'
import { CliProcess, forkHelper, runOnce } from './cli/cli-process.js'
import { Spawner } from './cli/spawner.js'
import { reapOrphans } from './cli/reaper.js'
import { type Config, ConfigError } from './config.js'
import { ControlPolicy } from './control/control-policy.js'
import { type ErrorCode, GatewayError, closeCodes, errorTable } from './errors.js'
import { Metrics } from './metrics/metrics.js'
import { listenMetrics } from './metrics/metrics-server.js'
import { TimedStore } from './metrics/timed-store.js'
import { isDeadLocalNode } from './cluster/dead-node.js'
import { LeaseKeeper } from './cluster/lease-keeper.js'
import { Placement } from './cluster/placement.js'
import { ClusterRouter } from './cluster/router.js'
import { isLoopback } from './net/loopback.js'
import { redactedRequest } from './net/redact.js'
import { TenantConnections } from './net/tenant-connections.js'
import security, { GATEWAY_PROTOCOL } from './plugins/security.js'
import { consoleRoutes } from './routes/console.js'
import { eventRoutes } from './routes/events.js'
import { healthRoutes } from './routes/health.js'
import { metricsRoutes } from './routes/metrics.js'
import openapi from './routes/openapi.js'
import { permissionRoutes } from './routes/permissions.js'
import { sessionRoutes } from './routes/sessions.js'
import { validationError } from './routes/validate.js'
import { wsRoutes } from './routes/ws.js'
import { gatewayLimits } from './limits/gateway-limits.js'
import { gatewaySandbox } from './sandbox/gateway-sandbox.js'
import type { ProbeRunner } from './sandbox/probe.js'
import type { SessionOptions } from './protocol/session-options.js'
import { SessionManager } from './session/session-manager.js'
import { MemoryStore } from './store/memory.js'
import { RedisStore } from './store/redis.js'
import { SignedStore } from './store/signed-records.js'
import { loadStoreSecret } from './store/store-secret.js'
import type { EventStore } from './store/store.js'
import { Heartbeat } from './ws/heartbeat.js'
import { OutboxSweep } from './webhooks/outbox-sweep.js'
import { WebhookNotifier } from './webhooks/webhook-notifier.js'

/** The table's code for each status Fastify's own client errors carry (the rest are `bad_request`). */
const CLIENT_ERRORS: Partial<Record<number, ErrorCode>> = { 404: 'not_found', 413: 'payload_too_large', 415: 'unsupported_media_type', 429: 'rate_limited' }

export interface AppParts {
  store?: EventStore
  launch?: CliLauncher
  authenticator?: Authenticator
  logger?: Logger
  /** Environment the CLI's allowlisted env is taken from (default: process.env). */
  env?: NodeJS.ProcessEnv
  /** SANDBOX=bwrap start-up probe: how to run it (default: runOnce), or false to skip it. */
  probeSandbox?: ProbeRunner | false
  /** The built web console served at `/` (default: dist/console of this package). */
  consoleDir?: string
}

export interface GatewayState {
  manager: SessionManager
  store: EventStore
  heartbeat: Heartbeat
  /** Set when GATEWAY_TOKENS was unset: the token generated for this run (tenant `default`). */
  generatedToken: string | null
  shuttingDown: boolean
  /**
   * Applies the credentials of `next` (a configuration read again: SIGHUP):
   * the tokens and JWT keys requests are checked with, ending each
   * connection opened with a credential they no longer admit, and the
   * shared and the tenants' API credentials for CLIs started from now on. Everything else in
   * `next` is ignored (it needs a restart). Throws ConfigError, changing
   * nothing, when `next` would leave no way to authenticate.
   */
  reloadCredentials: (next: Config) => Promise<CredentialsReloaded>
}

/** What a credential reload changed. */
export interface CredentialsReloaded {
  /** False when the authenticator was passed in (AppParts): only the tenants' API keys were applied. */
  authenticators: boolean
  /** Whether a shared ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN is set now (for CLIs started from now on). */
  sharedApiCredential: boolean
  /** Connections (WebSockets, event streams) ended because their credential no longer holds. */
  ended: number
  tenantApiKeys: number
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
  const logger = (parts.logger ?? pino({ level: config.logLevel, redact: ['req.headers.authorization', 'req.headers["sec-websocket-protocol"]'] })).child({ node: config.nodeId })
  const ownsStore = parts.store === undefined
  const chosenStore = parts.store ?? (config.redisUrl === undefined
    ? new MemoryStore({ retention: retention(config) })
    : new RedisStore({ url: config.redisUrl, cluster: config.redisCluster, prefix: config.redisPrefix, retention: retention(config) }))
  // Whatever store was chosen or injected: records are signed on write and checked on every read.
  const storeSecret = config.storeSecret ?? loadStoreSecret(config.dataDir)
  const metrics = new Metrics()
  const store: EventStore = new SignedStore(chosenStore, {
    secret: storeSecret,
    allowBypassPermissions: config.allowBypassPermissions,
    logger,
    acceptUnsigned: config.storeAcceptUnsigned,
    onBusRefused: (why) => { metrics.nodeBusRefused(why) },
    onRefused: (kind, why) => { metrics.storeRefused(kind, why) }
  })

  let generatedToken: string | null = null
  let initial = parts.authenticator
  if (initial === undefined) {
    if (config.tokens === null && config.jwt === null) {
      generatedToken = `cgw_${randomBytes(24).toString('base64url')}` // a prefix: never starts with '-', easy to spot in a leak
    }
    initial = authenticatorFor(config, generatedToken)
  }
  const authenticator = new LiveCredentials(initial, { expiresAt: config.jwtExpiryEndsConnections ? jwtExpiresAt : undefined })
  // Read by CliPlan at each CLI start; a reload replaces what it holds.
  const tenantApiKeys = new Map(config.tenantApiKeys ?? [])
  // Signed with the secret every node shares and spent in the store: redeemable on any node, once.
  const tickets = new TicketBook({ ttlMs: config.wsTicketTtlMs, secret: storeSecret, claimOnce: async (key, ttlMs) => await store.claimOnce(key, ttlMs) })
  const pidDir = join(config.dataDir, 'pids')

  // Forked at onReady, while the gateway is small: after that no CLI start forks the gateway.
  const spawner = parts.launch === undefined && config.cliSpawn === 'helper'
    ? new Spawner({ logger, stopTimeoutMs: config.cliStopTimeoutMs, fork: forkHelper })
    : undefined
  const launch: CliLauncher = parts.launch ?? ((spec, callbacks) => new CliProcess(spec, callbacks, {
    maxLineBytes: config.maxLineBytes,
    stopTimeoutMs: config.cliStopTimeoutMs,
    logger,
    pidDir,
    onSpawn: (seconds) => { metrics.cliSpawned(seconds) },
    spawner
  }))

  // The CLIs' environment source, with the credential loadConfig read (ANTHROPIC_API_KEY, or its
  // _FILE: then it is in no environment); a credential reload replaces that credential in it.
  const cliEnv: NodeJS.ProcessEnv = { ...(parts.env ?? process.env), ...config.anthropicCredentials }
  // Limits wrap the sandbox from outside: bwrap, its init and socat count against them too.
  const limits = gatewayLimits(config, { inner: launch, logger, probe: runOnce })
  const sandbox = gatewaySandbox(config, { inner: limits.launch, logger, cliEnv, probe: parts.probeSandbox ?? runOnce, metrics })

  // Client frames for sessions whose CLI runs on another node go there through the store's node bus.
  const router = new ClusterRouter({
    bus: store.bus,
    node: config.nodeId,
    logger,
    find: (id) => manager.loadedSession(id),
    heartbeatMs: Math.max(100, Math.floor(config.sessionLeaseMs / 3)),
    owner: async (id) => (await store.leases.holder(id))?.node ?? null,
    onCreate: async (tenant, options) => (await manager.create(tenant, options as SessionOptions)).snapshot()
  })
  // Creates this node is too full for go to the least loaded node with room.
  const placement = new Placement({
    store,
    node: config.nodeId,
    load: () => manager.load,
    everyMs: Math.max(100, Math.floor(config.sessionLeaseMs / 3)),
    createOn: async (node, tenant, options) => await router.call(node, '', 'create', [tenant, options]) as Record<string, unknown>,
    logger
  })
  // WEBHOOK_URL: session events POSTed to the operator, signed, queued off the relay's path; with
  // Redis, kept there until sent, so a node that stops or dies leaves them to another node.
  const outbox = config.webhook !== null && chosenStore.kind === 'redis' ? { store: store.outbox, node: config.nodeId } : undefined
  const webhooks = config.webhook === null ? null : new WebhookNotifier({ ...config.webhook, logger, ...(outbox === undefined ? {} : { outbox }) })
  // A Redis that answers again may have lost what it held (no persistence): what is still to send is kept again.
  if (webhooks !== null && outbox !== undefined) store.onReconnect?.(() => { webhooks.keepAgain() })
  const outboxSweep = webhooks === null || outbox === undefined
    ? null
    : new OutboxSweep({
      outbox: outbox.store,
      node: config.nodeId,
      liveNodes: async () => (await store.listNodes()).map((n) => n.node),
      isDead: isDeadLocalNode,
      everyMs: config.sessionLeaseMs,
      onTaken: (entries, from) => { webhooks.adopt(entries, from) },
      logger
    })
  const manager: SessionManager = new SessionManager({
    // Several nodes may share this store: each CLI's conversation travels with it.
    carryConversations: chosenStore.kind === 'redis',
    route: {
      node: config.nodeId,
      owner: async (id) => (await store.leases.holder(id))?.node ?? null,
      attach: (owner, id, port, role, options) => { router.attach(owner, id, port, role, options) },
      frame: (port, frame) => router.frame(port, frame),
      detach: (port) => { router.detach(port) },
      unroute: (port) => router.unroute(port),
      dropRemote: (id) => { router.dropRemote(id) },
      call: async (owner, id, op, args) => await router.call(owner, id, op, args)
    },
    store: new TimedStore(store, metrics),
    keeper: new LeaseKeeper({ leases: store.leases, node: config.nodeId, ttlMs: config.sessionLeaseMs, logger }),
    isDeadNode: isDeadLocalNode,
    metrics,
    ...(webhooks === null ? {} : { events: webhooks }),
    launch: sandbox.launch,
    sandboxed: sandbox.active,
    logger,
    claudeBin: config.claudeBin,
    claudeArgsExtra: config.claudeArgsExtra,
    workspaceRoot: config.workspaceRoot,
    maxSessions: config.maxSessions,
    maxSessionsPerTenant: config.maxSessionsPerTenant,
    // Counted over every node that shares the store (the reports placement reads and writes).
    tenants: placement,
    policy: new ControlPolicy({
      clientControlAllow: config.clientControlAllow,
      mcpServerTypes: config.clientMcpServerTypes,
      permissionUpdateDestinations: config.permissionUpdateDestinations,
      broadRuleTools: config.permissionBroadRuleTools,
      allowBypassPermissions: config.allowBypassPermissions
    }),
    // A sandbox shows no shared HOME: its CLI always gets its tenant's own config dir.
    configRoot: config.tenantConfigDirs || sandbox.active ? join(config.dataDir, 'claude-config') : null,
    launcher: config.claudeLauncher,
    env: cliEnv,
    cliEnvAllow: config.cliEnvAllow,
    tenantApiKeys,
    limits: {
      permissionTimeoutMs: config.permissionTimeoutMs,
      controlRequestTimeoutMs: config.controlRequestTimeoutMs,
      clientRequestTimeoutMs: config.clientRequestTimeoutMs,
      initializeHoldMs: config.initializeHoldMs,
      idleTimeoutMs: config.idleTimeoutMs,
      storeQueueMax: config.storeQueueMax,
      resumeWaitMs: config.resumeStoreWaitMs
    }
  })
  metrics.observe(manager)
  if (webhooks !== null) metrics.observeWebhooks(() => webhooks.stats)
  const heartbeat = new Heartbeat(config.keepaliveIntervalMs)

  const app = Fastify({
    // Request lines are logged with `?token=` / `?ticket=` values redacted, whatever logger was passed in.
    loggerInstance: logger.child({}, { serializers: { req: redactedRequest } }) as FastifyBaseLogger,
    bodyLimit: config.bodyLimitBytes,
    trustProxy: trustProxy(config.trustProxy),
    // A slow or trickled request is answered 408 and closed. Upgraded WebSockets and
    // event streams are past their request, so these never cut them.
    requestTimeout: config.requestTimeoutMs,
    keepAliveTimeout: config.keepAliveTimeoutMs,
    http: { connectionsCheckingInterval: connectionsCheckingInterval(config) },
    // The router's own errors (a malformed %-escape in the URL) get the same body as every other error.
    frameworkErrors: (_err, request, reply) => {
      // An upgrade's socket belongs to no HTTP connection, and no hook runs here to end it (as
      // @fastify/websocket's onResponse does): it would stay open, holding a MAX_CONNECTIONS place.
      if ((request.raw as { upgrade?: boolean }).upgrade === true) reply.raw.once('finish', () => request.raw.socket.destroy())
      void (reply as FastifyReply).code(400).send(new GatewayError('bad_request', 'The URL is not valid').toJSON())
    }
  })
  app.server.headersTimeout = config.headersTimeoutMs
  // Past this, Node drops new TCP connections at once; established ones are not touched.
  app.server.maxConnections = config.maxConnections
  const reloadCredentials = async (next: Config): Promise<CredentialsReloaded> => {
    if (parts.authenticator === undefined && next.tokens === null && next.jwt === null && generatedToken === null) {
      throw new ConfigError('credentials not reloaded: neither GATEWAY_TOKENS nor a JWT key is set now, so no one could sign in')
    }
    tenantApiKeys.clear()
    for (const [tenant, key] of next.tenantApiKeys ?? []) tenantApiKeys.set(tenant, key)
    delete cliEnv.ANTHROPIC_API_KEY
    delete cliEnv.ANTHROPIC_AUTH_TOKEN
    Object.assign(cliEnv, next.anthropicCredentials)
    // Without tokens or a JWT key now, the token generated at start stays (the only one anyone has).
    const ended = parts.authenticator === undefined ? await authenticator.replace(authenticatorFor(next, generatedToken)) : 0
    const result = { authenticators: parts.authenticator === undefined, sharedApiCredential: Object.keys(next.anthropicCredentials).length > 0, ended, tenantApiKeys: tenantApiKeys.size }
    logger.info(result, 'credentials reloaded')
    return result
  }
  const state: GatewayState = { manager, store, heartbeat, generatedToken, shuttingDown: false, reloadCredentials }
  app.decorate('gateway', state)
  app.decorateRequest('tenant', '')
  // Routes declare zod schemas (src/routes/schemas.ts, src/protocol/): zod checks requests and JSON answers.
  app.setValidatorCompiler(validatorCompiler)
  app.setSerializerCompiler(serializerCompiler)

  app.setErrorHandler((err: Error & { statusCode?: number, code?: string }, request, reply) => {
    if (err instanceof GatewayError) return reply.code(err.statusCode).send(err.toJSON())
    // A request that fails its route schema: 400 `bad_request` naming the first offending field.
    const invalid = validationError(err)
    if (invalid !== null) return reply.code(invalid.statusCode).send(invalid.toJSON())
    const status = err.statusCode ?? 500
    if (status >= 500) {
      request.log.error({ err }, 'request failed')
      return reply.code(500).send(new GatewayError('internal').toJSON())
    }
    // Fastify's own 4xx errors, each under the table's code for its status: a client reads the two together.
    const code = CLIENT_ERRORS[status] ?? 'bad_request'
    const known = errorTable[code].statusCode
    return reply.code(known).send({ statusCode: known, code, message: err.message })
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
    loopbackOnly: isLoopback(config.host),
    rateLimitPerMinute: config.rateLimitPerMinute,
    authFailuresPerMinute: config.authFailuresPerMinute,
    wsUpgradesPerMinute: config.wsUpgradesPerMinute,
    wsUpgradesPerMinutePerAddress: config.wsUpgradesPerMinutePerAddress,
    metrics
  })
  await app.register(openapi) // before the routes: it documents those registered after it
  await app.register(sessionRoutes, { manager, placement })
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
  await app.register(healthRoutes, { manager, store, maxSessions: config.maxSessions, isShuttingDown: () => state.shuttingDown })
  await app.register(consoleRoutes, { dir: parts.consoleDir })
  // METRICS_PORT 0: on this server; else a listener of its own, opened when the app is ready.
  const { metricsPort, metricsToken } = config
  const scrape = (): Promise<{ contentType: string, body: string }> => metrics.scrape()
  if (metricsPort === 0) await app.register(metricsRoutes, { scrape, token: metricsToken })
  let metricsServer: Server | null = null

  app.addHook('onReady', async () => {
    await limits.start() // before the spawn helper: with cgroup v2 the gateway may move into a leaf first
    spawner?.start()
    await sandbox.start() // refuses to start when SANDBOX=bwrap cannot run here
    if (metricsPort !== 0) {
      // Beyond loopback loadConfig requires METRICS_TOKEN for this listener.
      metricsServer = await listenMetrics({ host: config.host, port: metricsPort, token: metricsToken, scrape, metrics })
    }
    await router.start()
    await placement.start()
    await outboxSweep?.start() // after placement's first report: listed itself before it judges which nodes are gone
    const reaped = await reapOrphans(pidDir, config.cliStopTimeoutMs)
    if (reaped.length > 0) logger.warn({ pids: reaped }, 'ended CLIs left running by a previous gateway process')
    try {
      const recovered = await manager.recover()
      if (recovered > 0) logger.warn({ recovered }, 'sessions left running by a gateway node that is gone marked stopped')
    } catch (err) {
      logger.error({ err }, 'could not recover sessions from the store')
    }
    // Nodes die at any time, not only before a start: each node looks for lapsed leases.
    manager.startSweeping(config.sessionLeaseMs)
  })

  app.addHook('onClose', async () => {
    metricsServer?.closeAllConnections()
    metricsServer?.close()
    await outboxSweep?.close()
    await placement.drain() // no creates placed here any more; still listed, so its webhook outbox is not taken over while it sends
    await manager.shutdown(config.shutdownGraceMs)
    await webhooks?.close() // after the sessions' stops, so their session.ended get their chance; what is left stays kept
    await placement.close() // gone for the other nodes: they take over what its webhooks left
    await router.close()
    await spawner?.close() // after the sessions' stops: it reports their CLIs' exits
    await limits.close() // their cgroups emptied and removed
    sandbox.close()
    if (ownsStore) await store.close()
  })

  return app
}

/**
 * Fastify takes `true`, addresses/CIDRs, or a function; a bare number it
 * treats as "trust nothing". A hop count is read as Express reads it: the
 * peer and the next n-1 addresses of X-Forwarded-For are proxies. It cannot
 * tell a proxy from a client that connects directly, hence addresses are
 * preferred (docs/SECURITY.md).
 */
function trustProxy (setting: Config['trustProxy']): boolean | string[] | ((address: string, hop: number) => boolean) {
  return typeof setting === 'number' ? (_address, hop) => hop < setting : setting
}

/** How often Node looks for requests past their timeouts: a fraction of the shortest, so one is ended close to its time. */
function connectionsCheckingInterval (config: Config): number {
  const timeouts = [config.requestTimeoutMs, config.headersTimeoutMs].filter((ms) => ms > 0)
  return timeouts.length === 0 ? 30_000 : Math.min(5000, Math.max(100, Math.floor(Math.min(...timeouts) / 4)))
}

function retention (config: Config): { maxEventsPerSession: number, ttlSecondsAfterEnd: number } {
  return { maxEventsPerSession: config.eventsMaxPerSession, ttlSecondsAfterEnd: config.eventsTtlSeconds }
}

/** Tokens (or the token generated at start, when none are set) and JWT keys, as one authenticator. */
function authenticatorFor (config: Config, generatedToken: string | null): Authenticator {
  const tokens = config.tokens ?? (config.jwt === null && generatedToken !== null ? new Map([[generatedToken, 'default']]) : null)
  const all: Authenticator[] = []
  if (tokens !== null) all.push(new StaticTokens(tokens))
  if (config.jwt !== null) all.push(new JwtAuthenticator(config.jwt))
  return all.length === 1 ? all[0] as Authenticator : new AnyOf(all)
}
