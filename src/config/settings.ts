/**
 * Every gateway setting, once: its environment variable, rule, default and
 * meaning (README's settings table is generated from here by
 * scripts/settings-table.ts, and test/unit/config-readme.test.ts holds the
 * two together), and the transform to the camelCase `Config` the app reads,
 * whose type is inferred from it. The settings themselves are defined by
 * concern in src/config/*-settings.ts; here they are put in README's order.
 * Rules that join several settings are start-up rules in src/config.ts.
 */
import { resolve, join } from 'node:path'
import { z } from 'zod'
import { authSettings } from './auth-settings.js'
import { cliSettings } from './cli-settings.js'
import { limitSettings } from './limit-settings.js'
import { listenerSettings } from './listener-settings.js'
import { defaultNodeId } from './node-id.js'
import { sandboxSettings } from './sandbox-settings.js'
import { sessionSettings } from './session-settings.js'
import { settingDocs } from './setting-docs.js'
import { storeSettings } from './store-settings.js'
import { defaultClaudeBin } from './values.js'
import { webhookConfig, webhookSettings } from './webhook-settings.js'

const allSettings = { ...listenerSettings, ...cliSettings, ...storeSettings, ...authSettings, ...sandboxSettings, ...limitSettings, ...sessionSettings, ...webhookSettings }

/**
 * `shape`'s entries in `order`, which must name every one of them: a setting
 * left out is a compile error naming it (README's table follows this order).
 */
function inOrder<S extends Record<string, z.ZodType>, const O extends ReadonlyArray<keyof S>> (
  shape: S,
  order: O & ([Exclude<keyof S, O[number]>] extends [never] ? unknown : { unordered: Exclude<keyof S, O[number]> })
): S {
  const ordered: Partial<S> = {}
  for (const name of order) ordered[name] = shape[name]
  return ordered as S
}

/** Environment variable → rule, default and meaning; in README's order. */
export const envSchema = z.object(inOrder(allSettings, [
  'PORT', 'HOST', 'METRICS_PORT', 'METRICS_TOKEN', 'LOG_LEVEL', 'DATA_DIR', 'CLAUDE_BIN', 'CLAUDE_ARGS_EXTRA', 'WORKSPACE_ROOT', 'REDIS_URL',
  'REDIS_PREFIX', 'REDIS_CLUSTER', 'NODE_ID', 'SESSION_LEASE_MS', 'GATEWAY_TOKENS', 'STORE_SECRET', 'STORE_ACCEPT_UNSIGNED', 'SANDBOX',
  'ALLOW_UNSANDBOXED', 'SANDBOX_EGRESS', 'ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN', 'TENANT_API_KEYS', 'SANDBOX_CREDENTIALS', 'SANDBOX_API_PATHS', 'SANDBOX_EGRESS_CONNECTIONS_PER_TENANT',
  'CLI_MEMORY_MAX_MB', 'CLI_PIDS_MAX', 'CLI_CPUS', 'TENANT_MEMORY_MAX_MB', 'TENANT_PIDS_MAX', 'TENANT_CPUS', 'CLI_CGROUP', 'CLI_ENV_ALLOW',
  'CLIENT_CONTROL_ALLOW', 'CLIENT_MCP_SERVER_TYPES', 'PERMISSION_UPDATE_DESTINATIONS', 'PERMISSION_BROAD_RULE_TOOLS', 'KEEPALIVE_INTERVAL_MS',
  'IDLE_TIMEOUT_MS', 'MAX_SESSIONS', 'SHUTDOWN_GRACE_MS', 'CLI_SPAWN', 'CLI_STOP_TIMEOUT_MS', 'MAX_LINE_BYTES', 'WS_MAX_PAYLOAD_BYTES',
  'WS_MAX_BUFFERED_BYTES', 'PERMISSION_TIMEOUT_MS', 'CONTROL_REQUEST_TIMEOUT_MS', 'INITIALIZE_HOLD_MS', 'CLIENT_REQUEST_TIMEOUT_MS',
  'EVENTS_MAX_PER_SESSION', 'EVENTS_TTL_SECONDS', 'STORE_QUEUE_MAX', 'RESUME_STORE_WAIT_MS', 'ALLOWED_ORIGINS', 'ALLOWED_HOSTS',
  'ALLOW_BYPASS_PERMISSIONS', 'CLAUDE_LAUNCHER', 'TENANT_CONFIG_DIRS', 'MAX_SESSIONS_PER_TENANT', 'MAX_CLIENTS_PER_SESSION', 'WS_MAX_FRAMES_PER_SEC',
  'RATE_LIMIT_PER_MINUTE', 'WS_UPGRADES_PER_MINUTE', 'WS_UPGRADES_PER_MINUTE_PER_ADDRESS', 'AUTH_FAILURES_PER_MINUTE', 'TRUST_PROXY',
  'BODY_LIMIT_BYTES', 'REQUEST_TIMEOUT_MS', 'HEADERS_TIMEOUT_MS', 'KEEPALIVE_TIMEOUT_MS', 'MAX_CONNECTIONS', 'MAX_CONNECTIONS_PER_TENANT',
  'HISTORY_PAGE_MAX_BYTES', 'WS_TICKET_TTL_MS', 'JWT_SECRET', 'JWT_PUBLIC_KEY', 'JWT_TENANT_CLAIM', 'JWT_ISSUER', 'JWT_AUDIENCE',
  'JWT_MAX_TTL_SECONDS', 'JWT_CLOCK_TOLERANCE_SECONDS', 'JWT_EXPIRY_ENDS_CONNECTIONS', 'CREDENTIAL_FILES_POLL_MS', 'WEBHOOK_URL', 'WEBHOOK_SECRET', 'WEBHOOK_EVENTS',
  'WEBHOOK_TIMEOUT_MS', 'WEBHOOK_MAX_ATTEMPTS', 'WEBHOOK_RETRY_BASE_MS', 'WEBHOOK_RETRY_MAX_MS', 'WEBHOOK_CONCURRENCY', 'WEBHOOK_QUEUE_MAX'
]))

/** The settings that may come from `<NAME>_FILE` (Docker and Kubernetes secrets). */
export const SECRET_FILE_VARIABLES: readonly string[] = Object.entries(envSchema.shape)
  .filter(([, schema]) => settingDocs.get(schema)?.fromFile === true)
  .map(([name]) => name)

/** The environment (blanks removed) → the config the app reads. */
export const configSchema = envSchema.transform((e, ctx) => {
  const dataDir = resolve(e.DATA_DIR)
  return {
    port: e.PORT,
    host: e.HOST,
    /** A separate /metrics listener on `host`; 0: /metrics is on `port`. */
    metricsPort: e.METRICS_PORT,
    /** Bearer token /metrics requires; null: none. */
    metricsToken: e.METRICS_TOKEN ?? null,
    logLevel: e.LOG_LEVEL as string, // Config's contract is a string (pino also takes custom level names)
    dataDir,
    claudeBin: e.CLAUDE_BIN ?? defaultClaudeBin(),
    claudeArgsExtra: e.CLAUDE_ARGS_EXTRA,
    workspaceRoot: resolve(e.WORKSPACE_ROOT ?? join(dataDir, 'workspaces')),
    redisUrl: e.REDIS_URL,
    redisPrefix: e.REDIS_PREFIX,
    /** REDIS_URL is a seed node of a Redis Cluster. */
    redisCluster: e.REDIS_CLUSTER || (e.REDIS_URL?.includes(',') ?? false),
    /** This process's name among gateways sharing a store (the root logger's `node`). */
    nodeId: e.NODE_ID ?? defaultNodeId(),
    sessionLeaseMs: e.SESSION_LEASE_MS,
    /** Unsigned node messages and unsealed conversation copies are accepted (an upgrade from an older version). */
    storeAcceptUnsigned: e.STORE_ACCEPT_UNSIGNED,
    /** A connection opened with a JWT ends when it expires (unless a newer one is presented). */
    jwtExpiryEndsConnections: e.JWT_EXPIRY_ENDS_CONNECTIONS,
    /** How often the secrets' `_FILE`s are checked for a change to reload; 0: never (SIGHUP only). */
    credentialFilesPollMs: e.CREDENTIAL_FILES_POLL_MS,
    /** token → tenant. Null means none were configured (a token is generated at start). */
    tokens: e.GATEWAY_TOKENS ?? null,
    keepaliveIntervalMs: e.KEEPALIVE_INTERVAL_MS,
    idleTimeoutMs: e.IDLE_TIMEOUT_MS,
    maxSessions: e.MAX_SESSIONS,
    shutdownGraceMs: e.SHUTDOWN_GRACE_MS,
    cliStopTimeoutMs: e.CLI_STOP_TIMEOUT_MS,
    cliSpawn: e.CLI_SPAWN,
    maxLineBytes: e.MAX_LINE_BYTES,
    wsMaxPayloadBytes: e.WS_MAX_PAYLOAD_BYTES,
    wsMaxBufferedBytes: e.WS_MAX_BUFFERED_BYTES,
    permissionTimeoutMs: e.PERMISSION_TIMEOUT_MS,
    controlRequestTimeoutMs: e.CONTROL_REQUEST_TIMEOUT_MS,
    clientRequestTimeoutMs: e.CLIENT_REQUEST_TIMEOUT_MS,
    initializeHoldMs: e.INITIALIZE_HOLD_MS,
    eventsMaxPerSession: e.EVENTS_MAX_PER_SESSION,
    eventsTtlSeconds: e.EVENTS_TTL_SECONDS,
    storeQueueMax: e.STORE_QUEUE_MAX,
    resumeStoreWaitMs: e.RESUME_STORE_WAIT_MS,
    allowedOrigins: e.ALLOWED_ORIGINS,
    allowedHosts: e.ALLOWED_HOSTS,
    allowBypassPermissions: e.ALLOW_BYPASS_PERMISSIONS,
    /** Client control_request subtypes forwarded to the CLI; `*` = all. */
    clientControlAllow: e.CLIENT_CONTROL_ALLOW,
    /** MCP server types a client may add with mcp_set_servers. */
    clientMcpServerTypes: e.CLIENT_MCP_SERVER_TYPES,
    /** Destinations a permission answer's updatedPermissions may write to. */
    permissionUpdateDestinations: e.PERMISSION_UPDATE_DESTINATIONS,
    /** Tools whose unspecific allow rules are refused while bypass is off. */
    permissionBroadRuleTools: e.PERMISSION_BROAD_RULE_TOOLS,
    /** Command that wraps each CLI (receives workspace, config dir, then the CLI argv). */
    claudeLauncher: e.CLAUDE_LAUNCHER,
    /** Per-CLI cgroup limits (src/limits/): each absent when unset. */
    cliLimits: {
      memoryBytes: e.CLI_MEMORY_MAX_MB === undefined ? undefined : e.CLI_MEMORY_MAX_MB * 1024 * 1024,
      pids: e.CLI_PIDS_MAX,
      cpus: e.CLI_CPUS
    },
    /** Per-tenant cgroup limits: what one tenant's CLIs on this node may use together; each absent when unset. */
    tenantLimits: {
      memoryBytes: e.TENANT_MEMORY_MAX_MB === undefined ? undefined : e.TENANT_MEMORY_MAX_MB * 1024 * 1024,
      pids: e.TENANT_PIDS_MAX,
      cpus: e.TENANT_CPUS
    },
    cliCgroup: e.CLI_CGROUP,
    /** How each CLI is confined when no CLAUDE_LAUNCHER is set. */
    sandbox: e.SANDBOX,
    /** SANDBOX=none accepted although the gateway serves several tenants or listens beyond loopback. */
    allowUnsandboxed: e.ALLOW_UNSANDBOXED,
    /** Where a sandboxed CLI may connect; null: the host of the CLI's ANTHROPIC_BASE_URL, else api.anthropic.com:443. */
    sandboxEgress: e.SANDBOX_EGRESS,
    /** `proxy`: the CLI's API credential never enters its sandbox (src/sandbox/api-credentials.ts). */
    sandboxCredentials: e.SANDBOX_CREDENTIALS,
    /** API paths a sandboxed CLI may call with the held credential. */
    sandboxApiPaths: e.SANDBOX_API_PATHS,
    sandboxEgressConnectionsPerTenant: e.SANDBOX_EGRESS_CONNECTIONS_PER_TENANT,
    /** The CLI's API credential as set on the gateway (or read from its `_FILE`); it goes into the CLI's environment source. */
    anthropicCredentials: {
      ...(e.ANTHROPIC_API_KEY === undefined ? {} : { ANTHROPIC_API_KEY: e.ANTHROPIC_API_KEY }),
      ...(e.ANTHROPIC_AUTH_TOKEN === undefined ? {} : { ANTHROPIC_AUTH_TOKEN: e.ANTHROPIC_AUTH_TOKEN })
    },
    /** Tenants' own API keys (TENANT_API_KEYS), each replacing the shared credential in its CLIs' environment source. */
    tenantApiKeys: e.TENANT_API_KEYS ?? null,
    tenantConfigDirs: e.TENANT_CONFIG_DIRS,
    maxSessionsPerTenant: e.MAX_SESSIONS_PER_TENANT,
    maxClientsPerSession: e.MAX_CLIENTS_PER_SESSION,
    wsMaxFramesPerSec: e.WS_MAX_FRAMES_PER_SEC,
    /** REST requests per tenant per minute; WebSocket upgrades are counted apart. */
    rateLimitPerMinute: e.RATE_LIMIT_PER_MINUTE,
    /** WebSocket upgrades per tenant per minute. */
    wsUpgradesPerMinute: e.WS_UPGRADES_PER_MINUTE,
    /** WebSocket upgrades per client address (`request.ip`) per minute. */
    wsUpgradesPerMinutePerAddress: e.WS_UPGRADES_PER_MINUTE_PER_ADDRESS,
    authFailuresPerMinute: e.AUTH_FAILURES_PER_MINUTE,
    /** Fastify's trustProxy: which peers' X-Forwarded-For decides `request.ip`. */
    trustProxy: e.TRUST_PROXY,
    requestTimeoutMs: e.REQUEST_TIMEOUT_MS,
    headersTimeoutMs: e.HEADERS_TIMEOUT_MS,
    keepAliveTimeoutMs: e.KEEPALIVE_TIMEOUT_MS,
    maxConnections: e.MAX_CONNECTIONS,
    maxConnectionsPerTenant: e.MAX_CONNECTIONS_PER_TENANT,
    historyPageMaxBytes: e.HISTORY_PAGE_MAX_BYTES,
    /** Extra CLI environment names, and prefixes (ending in `_`, or `*` stripped). */
    cliEnvAllow: e.CLI_ENV_ALLOW,
    bodyLimitBytes: e.BODY_LIMIT_BYTES,
    wsTicketTtlMs: e.WS_TICKET_TTL_MS,
    /** Key of the session records' MACs; undefined: generated once and kept in `$DATA_DIR/store-secret`. */
    storeSecret: e.STORE_SECRET,
    /** Where session events are POSTed, and how; null: no webhooks. */
    webhook: webhookConfig(e, ctx),
    jwt: e.JWT_SECRET === undefined && e.JWT_PUBLIC_KEY === undefined
      ? null
      : { secret: e.JWT_SECRET, publicKey: e.JWT_PUBLIC_KEY, tenantClaim: e.JWT_TENANT_CLAIM, issuer: e.JWT_ISSUER, audience: e.JWT_AUDIENCE, maxTtlSeconds: e.JWT_MAX_TTL_SECONDS, clockToleranceSeconds: e.JWT_CLOCK_TOLERANCE_SECONDS }
  }
})

export type Config = z.output<typeof configSchema>
