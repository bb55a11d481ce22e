/**
 * Builds the gateway's Fastify app from a config object and injected parts
 * (store, CLI launcher, authenticator, logger). Does not listen: server.ts
 * does, and tests call `buildApp` with their own parts. The only place that
 * picks implementations; where they are served (routes/gateway-routes.ts),
 * the order they start and stop in (plugins/lifecycle.ts) and the error
 * bodies (plugins/error-replies.ts) are in files of their own.
 */
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import Fastify, { type FastifyInstance } from 'fastify'
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod'
import pino, { type Logger } from 'pino'
import { credentialReload } from './auth/credential-reload.js'
import { AnyOf, JwtAuthenticator, jwtExpiresAt } from './auth/jwt.js'
import { LiveCredentials } from './auth/live-credentials.js'
import { type Authenticator, StaticTokens } from './auth/static-tokens.js'
import { TicketBook } from './auth/tickets.js'
import type { CliLauncher } from './cli/cli-handle.js'
import { CliProcess, forkHelper, runOnce } from './cli/cli-process.js'
import { Spawner } from './cli/spawner.js'
import type { Config } from './config.js'
import { ControlPolicy } from './control/control-policy.js'
import { closeCodes } from './errors.js'
import { Metrics } from './metrics/metrics.js'
import { TimedStore } from './metrics/timed-store.js'
import { isDeadLocalNode } from './cluster/dead-node.js'
import { LeaseKeeper } from './cluster/lease-keeper.js'
import { Placement } from './cluster/placement.js'
import { ClusterRouter } from './cluster/router.js'
import { routerRoute } from './cluster/router-route.js'
import { errorReplies } from './plugins/error-replies.js'
import type { GatewayState } from './plugins/gateway-state.js'
import { lifecycleHooks } from './plugins/lifecycle.js'
import { serverOptions } from './plugins/server-options.js'
import { gatewayRoutes } from './routes/gateway-routes.js'
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
import { gatewayWebhooks } from './webhooks/gateway-webhooks.js'

export type { CredentialsReloaded } from './auth/credential-reload.js'
export type { GatewayState } from './plugins/gateway-state.js'

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
  // WEBHOOK_URL: session events POSTed to the operator, signed; kept in the store until sent when it is Redis.
  const { notifier: webhooks, sweep: outboxSweep } = gatewayWebhooks(config, { store, durable: chosenStore.kind === 'redis', logger })
  const manager: SessionManager = new SessionManager({
    // Several nodes may share this store: each CLI's conversation travels with it.
    carryConversations: chosenStore.kind === 'redis',
    route: routerRoute(router, store.leases, config.nodeId),
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

  const app = Fastify(serverOptions(config, logger))
  app.server.headersTimeout = config.headersTimeoutMs
  // Past this, Node drops new TCP connections at once; established ones are not touched.
  app.server.maxConnections = config.maxConnections
  const reloadCredentials = credentialReload({ authenticator, injected: parts.authenticator !== undefined, generatedToken, authenticatorFor, tenantApiKeys, cliEnv, logger })
  const state: GatewayState = { manager, store, heartbeat, generatedToken, shuttingDown: false, reloadCredentials }
  app.decorate('gateway', state)
  app.decorateRequest('tenant', '')
  // Routes declare zod schemas (src/routes/schemas.ts, src/protocol/): zod checks requests and JSON answers.
  app.setValidatorCompiler(validatorCompiler)
  app.setSerializerCompiler(serializerCompiler)
  errorReplies(app)

  // Clients first (1012: come back later), then every CLI, then the store (plugins/lifecycle.ts).
  // Added before the websocket plugin, whose own preClose closes every socket without a code.
  app.addHook('preClose', async () => {
    state.shuttingDown = true
    heartbeat.stop()
    for (const client of heartbeat.clients()) client.close(closeCodes.serviceRestart, 'gateway shutting down')
  })
  await gatewayRoutes(app, config, { manager, store, heartbeat, placement, authenticator, tickets, metrics, isShuttingDown: () => state.shuttingDown, consoleDir: parts.consoleDir })
  lifecycleHooks(app, config, { limits, spawner, sandbox, metrics, router, placement, webhooks, outboxSweep, manager, store, ownsStore, pidDir, logger })
  return app
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
