/**
 * Configuration from environment variables, validated with zod. A bad value
 * stops the gateway at start with a message naming the variable.
 */
import { existsSync, readFileSync } from 'node:fs'
import { isIP } from 'node:net'
import { createRequire } from 'node:module'
import { dirname, join, resolve, sep } from 'node:path'
import { z } from 'zod'
import { defaults } from '../config/defaults.js'
import { isLoopback } from './net/loopback.js'
import { type Destination, parseDestinations } from './sandbox/destinations.js'

const int = (min: number) => z.coerce.number().int().min(min)
/** A comma list whose every entry matches `entry` (an empty value is an empty list). */
const listOf = (entry: RegExp, what: string, fallback: string) => z.string().default(fallback)
  .transform((v) => v.split(',').map((x) => x.trim()).filter((x) => x !== ''))
  .refine((items) => items.every((x) => entry.test(x)), `expected a comma list of ${what}`)

const envSchema = z.object({
  PORT: int(0).max(65535).default(defaults.PORT),
  HOST: z.string().min(1).default(defaults.HOST),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default(defaults.LOG_LEVEL),
  DATA_DIR: z.string().min(1).default(defaults.DATA_DIR),
  CLAUDE_BIN: z.string().min(1).optional(),
  CLAUDE_ARGS_EXTRA: z.string().default(defaults.CLAUDE_ARGS_EXTRA),
  WORKSPACE_ROOT: z.string().min(1).optional(),
  REDIS_URL: z.string().regex(/^rediss?:\/\//, 'must be a redis:// or rediss:// URL').optional(),
  REDIS_PREFIX: z.string().min(1).default(defaults.REDIS_PREFIX),
  GATEWAY_TOKENS: z.string().optional(),
  KEEPALIVE_INTERVAL_MS: int(100).default(defaults.KEEPALIVE_INTERVAL_MS),
  IDLE_TIMEOUT_MS: int(0).default(defaults.IDLE_TIMEOUT_MS),
  MAX_SESSIONS: int(1).default(defaults.MAX_SESSIONS),
  SHUTDOWN_GRACE_MS: int(0).default(defaults.SHUTDOWN_GRACE_MS),
  CLI_STOP_TIMEOUT_MS: int(0).default(defaults.CLI_STOP_TIMEOUT_MS),
  MAX_LINE_BYTES: int(1024).default(defaults.MAX_LINE_BYTES),
  WS_MAX_PAYLOAD_BYTES: int(1024).default(defaults.WS_MAX_PAYLOAD_BYTES),
  WS_MAX_BUFFERED_BYTES: int(1024).default(defaults.WS_MAX_BUFFERED_BYTES),
  PERMISSION_TIMEOUT_MS: int(0).default(defaults.PERMISSION_TIMEOUT_MS),
  CONTROL_REQUEST_TIMEOUT_MS: int(1).default(defaults.CONTROL_REQUEST_TIMEOUT_MS),
  CLIENT_REQUEST_TIMEOUT_MS: int(1).default(defaults.CLIENT_REQUEST_TIMEOUT_MS),
  INITIALIZE_HOLD_MS: int(0).default(defaults.INITIALIZE_HOLD_MS),
  EVENTS_MAX_PER_SESSION: int(1).default(defaults.EVENTS_MAX_PER_SESSION),
  EVENTS_TTL_SECONDS: int(0).default(defaults.EVENTS_TTL_SECONDS),
  STORE_QUEUE_MAX: int(1).default(defaults.STORE_QUEUE_MAX),
  RESUME_STORE_WAIT_MS: int(0).default(defaults.RESUME_STORE_WAIT_MS),
  ALLOWED_ORIGINS: z.string().default(defaults.ALLOWED_ORIGINS),
  ALLOWED_HOSTS: z.string().default(defaults.ALLOWED_HOSTS),
  ALLOW_BYPASS_PERMISSIONS: z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1').default(defaults.ALLOW_BYPASS_PERMISSIONS),
  CLIENT_CONTROL_ALLOW: listOf(/^(\*|[a-z][a-z0-9_]{0,99})$/, 'control subtypes (lower_snake_case) or *', defaults.CLIENT_CONTROL_ALLOW),
  CLIENT_MCP_SERVER_TYPES: listOf(/^(sdk|http|sse|stdio)$/, 'MCP server types among sdk, http, sse, stdio', defaults.CLIENT_MCP_SERVER_TYPES),
  PERMISSION_UPDATE_DESTINATIONS: listOf(/^(session|localSettings|projectSettings|userSettings|cliArg)$/, 'destinations among session, localSettings, projectSettings, userSettings, cliArg', defaults.PERMISSION_UPDATE_DESTINATIONS),
  PERMISSION_BROAD_RULE_TOOLS: listOf(/^[A-Za-z0-9_.-]{1,200}$/, 'tool names', defaults.PERMISSION_BROAD_RULE_TOOLS),
  CLAUDE_LAUNCHER: z.string().min(1).optional(),
  SANDBOX: z.enum(['bwrap', 'none']).default(defaults.SANDBOX),
  ALLOW_UNSANDBOXED: z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1').default(defaults.ALLOW_UNSANDBOXED),
  SANDBOX_EGRESS: z.string().optional().transform((v, ctx) => {
    if (v === undefined) return null
    try {
      return parseDestinations(v)
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: `${(err as Error).message}; expected comma-separated host[:port]` })
      return null
    }
  }),
  TENANT_CONFIG_DIRS: z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1').default(defaults.TENANT_CONFIG_DIRS),
  MAX_SESSIONS_PER_TENANT: int(1).default(defaults.MAX_SESSIONS_PER_TENANT),
  MAX_CLIENTS_PER_SESSION: int(1).default(defaults.MAX_CLIENTS_PER_SESSION),
  WS_MAX_FRAMES_PER_SEC: int(1).default(defaults.WS_MAX_FRAMES_PER_SEC),
  RATE_LIMIT_PER_MINUTE: int(1).default(defaults.RATE_LIMIT_PER_MINUTE),
  WS_UPGRADES_PER_MINUTE: int(1).default(defaults.WS_UPGRADES_PER_MINUTE),
  WS_UPGRADES_PER_MINUTE_PER_ADDRESS: int(1).default(defaults.WS_UPGRADES_PER_MINUTE_PER_ADDRESS),
  AUTH_FAILURES_PER_MINUTE: int(1).default(defaults.AUTH_FAILURES_PER_MINUTE),
  TRUST_PROXY: z.string().default(defaults.TRUST_PROXY).transform((v, ctx) => {
    const parsed = parseTrustProxy(v)
    if (parsed === null) ctx.addIssue({ code: 'custom', message: 'expected true, false, a hop count, or a comma list of IP addresses/CIDRs (or loopback, linklocal, uniquelocal)' })
    return parsed ?? false
  }),
  REQUEST_TIMEOUT_MS: int(0).default(defaults.REQUEST_TIMEOUT_MS),
  HEADERS_TIMEOUT_MS: int(0).default(defaults.HEADERS_TIMEOUT_MS),
  KEEPALIVE_TIMEOUT_MS: int(1).default(defaults.KEEPALIVE_TIMEOUT_MS),
  MAX_CONNECTIONS: int(1).default(defaults.MAX_CONNECTIONS),
  MAX_CONNECTIONS_PER_TENANT: int(1).default(defaults.MAX_CONNECTIONS_PER_TENANT),
  HISTORY_PAGE_MAX_BYTES: int(1024).default(defaults.HISTORY_PAGE_MAX_BYTES),
  CLI_ENV_ALLOW: z.string().default(defaults.CLI_ENV_ALLOW),
  JWT_MAX_TTL_SECONDS: int(1).default(defaults.JWT_MAX_TTL_SECONDS),
  BODY_LIMIT_BYTES: int(1024).default(defaults.BODY_LIMIT_BYTES),
  WS_TICKET_TTL_MS: int(1000).default(defaults.WS_TICKET_TTL_MS),
  JWT_SECRET: z.string().min(32, 'must be at least 32 characters').optional(),
  STORE_SECRET: z.string().min(32, 'must be at least 32 characters').optional(),
  JWT_PUBLIC_KEY: z.string().min(1).optional(),
  JWT_TENANT_CLAIM: z.string().min(1).default(defaults.JWT_TENANT_CLAIM),
  JWT_ISSUER: z.string().min(1).optional(),
  JWT_AUDIENCE: z.string().min(1).optional()
})

export interface Config {
  port: number
  host: string
  logLevel: string
  dataDir: string
  claudeBin: string
  claudeArgsExtra: string[]
  workspaceRoot: string
  redisUrl: string | undefined
  redisPrefix: string
  /** token → tenant. Null means none were configured (a token is generated at start). */
  tokens: Map<string, string> | null
  keepaliveIntervalMs: number
  idleTimeoutMs: number
  maxSessions: number
  shutdownGraceMs: number
  cliStopTimeoutMs: number
  maxLineBytes: number
  wsMaxPayloadBytes: number
  wsMaxBufferedBytes: number
  permissionTimeoutMs: number
  controlRequestTimeoutMs: number
  clientRequestTimeoutMs: number
  initializeHoldMs: number
  eventsMaxPerSession: number
  eventsTtlSeconds: number
  storeQueueMax: number
  resumeStoreWaitMs: number
  allowedOrigins: string[]
  allowedHosts: string[]
  allowBypassPermissions: boolean
  /** Client control_request subtypes forwarded to the CLI; `*` = all. */
  clientControlAllow: string[]
  /** MCP server types a client may add with mcp_set_servers. */
  clientMcpServerTypes: string[]
  /** Destinations a permission answer's updatedPermissions may write to. */
  permissionUpdateDestinations: string[]
  /** Tools whose unspecific allow rules are refused while bypass is off. */
  permissionBroadRuleTools: string[]
  /** Command that wraps each CLI (receives workspace, config dir, then the CLI argv). */
  claudeLauncher: string | undefined
  /** How each CLI is confined when no CLAUDE_LAUNCHER is set. */
  sandbox: 'bwrap' | 'none'
  /** SANDBOX=none accepted although the gateway serves several tenants or listens beyond loopback. */
  allowUnsandboxed: boolean
  /** Where a sandboxed CLI may connect; null: the host of the CLI's ANTHROPIC_BASE_URL, else api.anthropic.com:443. */
  sandboxEgress: Destination[] | null
  tenantConfigDirs: boolean
  maxSessionsPerTenant: number
  maxClientsPerSession: number
  wsMaxFramesPerSec: number
  /** REST requests per tenant per minute; WebSocket upgrades are counted apart. */
  rateLimitPerMinute: number
  /** WebSocket upgrades per tenant per minute. */
  wsUpgradesPerMinute: number
  /** WebSocket upgrades per client address (`request.ip`) per minute. */
  wsUpgradesPerMinutePerAddress: number
  authFailuresPerMinute: number
  /** Fastify's trustProxy: which peers' X-Forwarded-For decides `request.ip`. */
  trustProxy: boolean | number | string[]
  requestTimeoutMs: number
  headersTimeoutMs: number
  keepAliveTimeoutMs: number
  maxConnections: number
  maxConnectionsPerTenant: number
  historyPageMaxBytes: number
  /** Extra CLI environment names, and prefixes (ending in `_`, or `*` stripped). */
  cliEnvAllow: string[]
  bodyLimitBytes: number
  wsTicketTtlMs: number
  /** Key of the session records' MACs; undefined: generated once and kept in `$DATA_DIR/store-secret`. */
  storeSecret: string | undefined
  jwt: { secret?: string | undefined, publicKey?: string | undefined, tenantClaim: string, issuer?: string | undefined, audience?: string | undefined, maxTtlSeconds: number } | null
}

export class ConfigError extends Error {
  override name = 'ConfigError'
}

/**
 * Secrets that may come from a file instead (`<NAME>_FILE`, the convention of
 * Docker and Kubernetes secrets), so they need not sit in the gateway's
 * environment, which any process of the same user can read in /proc.
 */
export const SECRET_FILE_VARIABLES = ['GATEWAY_TOKENS', 'JWT_SECRET', 'JWT_PUBLIC_KEY', 'REDIS_URL', 'STORE_SECRET'] as const

export interface LoadConfigOptions {
  /** Reads a `<NAME>_FILE` secret (default: the file system, as UTF-8). */
  readFile?: (path: string) => string
}

/** Reads and validates the environment; throws ConfigError listing every bad variable. */
export function loadConfig (env: NodeJS.ProcessEnv = process.env, options: LoadConfigOptions = {}): Config {
  const blanksRemoved = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''))
  const fromFiles = readSecretFiles(blanksRemoved, options.readFile ?? ((path) => readFileSync(path, 'utf8')))
  const parsed = envSchema.safeParse(blanksRemoved)
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => {
      const name = i.path.join('.')
      return `  ${fromFiles.has(name) ? `${name} (read from ${name}_FILE)` : name}: ${i.message}`
    })
    throw new ConfigError(`invalid configuration:\n${lines.join('\n')}`)
  }
  const e = parsed.data
  if (e.REQUEST_TIMEOUT_MS > 0 && e.HEADERS_TIMEOUT_MS > e.REQUEST_TIMEOUT_MS) {
    throw new ConfigError('invalid configuration:\n  HEADERS_TIMEOUT_MS: must not be greater than REQUEST_TIMEOUT_MS')
  }
  const dataDir = resolve(e.DATA_DIR)
  const config: Config = {
    port: e.PORT,
    host: e.HOST,
    logLevel: e.LOG_LEVEL,
    dataDir,
    claudeBin: e.CLAUDE_BIN ?? defaultClaudeBin(),
    claudeArgsExtra: e.CLAUDE_ARGS_EXTRA.split(/\s+/).filter((a) => a !== ''),
    workspaceRoot: resolve(e.WORKSPACE_ROOT ?? join(dataDir, 'workspaces')),
    redisUrl: e.REDIS_URL,
    redisPrefix: e.REDIS_PREFIX,
    tokens: e.GATEWAY_TOKENS === undefined ? null : parseTokens(e.GATEWAY_TOKENS),
    keepaliveIntervalMs: e.KEEPALIVE_INTERVAL_MS,
    idleTimeoutMs: e.IDLE_TIMEOUT_MS,
    maxSessions: e.MAX_SESSIONS,
    shutdownGraceMs: e.SHUTDOWN_GRACE_MS,
    cliStopTimeoutMs: e.CLI_STOP_TIMEOUT_MS,
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
    allowedOrigins: list(e.ALLOWED_ORIGINS),
    allowedHosts: list(e.ALLOWED_HOSTS),
    allowBypassPermissions: e.ALLOW_BYPASS_PERMISSIONS,
    clientControlAllow: e.CLIENT_CONTROL_ALLOW,
    clientMcpServerTypes: e.CLIENT_MCP_SERVER_TYPES,
    permissionUpdateDestinations: e.PERMISSION_UPDATE_DESTINATIONS,
    permissionBroadRuleTools: e.PERMISSION_BROAD_RULE_TOOLS,
    claudeLauncher: e.CLAUDE_LAUNCHER,
    sandbox: e.SANDBOX,
    allowUnsandboxed: e.ALLOW_UNSANDBOXED,
    sandboxEgress: e.SANDBOX_EGRESS,
    tenantConfigDirs: e.TENANT_CONFIG_DIRS,
    maxSessionsPerTenant: e.MAX_SESSIONS_PER_TENANT,
    maxClientsPerSession: e.MAX_CLIENTS_PER_SESSION,
    wsMaxFramesPerSec: e.WS_MAX_FRAMES_PER_SEC,
    rateLimitPerMinute: e.RATE_LIMIT_PER_MINUTE,
    wsUpgradesPerMinute: e.WS_UPGRADES_PER_MINUTE,
    wsUpgradesPerMinutePerAddress: e.WS_UPGRADES_PER_MINUTE_PER_ADDRESS,
    authFailuresPerMinute: e.AUTH_FAILURES_PER_MINUTE,
    trustProxy: e.TRUST_PROXY,
    requestTimeoutMs: e.REQUEST_TIMEOUT_MS,
    headersTimeoutMs: e.HEADERS_TIMEOUT_MS,
    keepAliveTimeoutMs: e.KEEPALIVE_TIMEOUT_MS,
    maxConnections: e.MAX_CONNECTIONS,
    maxConnectionsPerTenant: e.MAX_CONNECTIONS_PER_TENANT,
    historyPageMaxBytes: e.HISTORY_PAGE_MAX_BYTES,
    cliEnvAllow: list(e.CLI_ENV_ALLOW),
    bodyLimitBytes: e.BODY_LIMIT_BYTES,
    wsTicketTtlMs: e.WS_TICKET_TTL_MS,
    storeSecret: e.STORE_SECRET,
    jwt: e.JWT_SECRET === undefined && e.JWT_PUBLIC_KEY === undefined
      ? null
      : { secret: e.JWT_SECRET, publicKey: e.JWT_PUBLIC_KEY, tenantClaim: e.JWT_TENANT_CLAIM, issuer: e.JWT_ISSUER, audience: e.JWT_AUDIENCE, maxTtlSeconds: e.JWT_MAX_TTL_SECONDS }
  }
  const open = openHostProblem(config)
  if (open !== null) throw new ConfigError(`invalid configuration:\n  ${open}`)
  const unsandboxed = unsandboxedProblem(config)
  if (unsandboxed !== null) throw new ConfigError(`invalid configuration:\n  ${unsandboxed}`)
  const overlap = dataDirProblem(config)
  if (overlap !== null) throw new ConfigError(`invalid configuration:\n  ${overlap}`)
  return config
}

/**
 * Each tenant's root is `<WORKSPACE_ROOT>/<tenant>`, mounted read-write into
 * its sandbox. With DATA_DIR at or under WORKSPACE_ROOT, a tenant named after
 * a folder on the way (`data`, or `claude-config` when the two are equal)
 * would get the gateway's own data (pid files, the store secret, every
 * tenant's CLI config) as its workspace.
 */
function dataDirProblem (config: Config): string | null {
  const root = config.workspaceRoot
  const data = config.dataDir
  if (data !== root && !data.startsWith(root.endsWith(sep) ? root : root + sep)) return null
  return `WORKSPACE_ROOT: ${root} holds DATA_DIR (${data}); a tenant's workspace could then be the gateway's data. ` +
    'Put WORKSPACE_ROOT beside or inside DATA_DIR (the default is $DATA_DIR/workspaces)'
}

/**
 * With neither GATEWAY_TOKENS nor a JWT key the gateway makes up a token and
 * prints it to its terminal: fine for one person on this machine, not for a
 * listener others reach. Any configured credential (tokens or JWTs) will do.
 */
function openHostProblem (config: Config): string | null {
  if (isLoopback(config.host) || config.tokens !== null || config.jwt !== null) return null
  return `HOST: ${config.host} is not loopback; set GATEWAY_TOKENS (or GATEWAY_TOKENS_FILE) or JWT_SECRET/JWT_PUBLIC_KEY to listen beyond this machine`
}

/**
 * SANDBOX=none (with no CLAUDE_LAUNCHER) is for one tenant on this machine:
 * every tool then runs as the gateway's user, beside its secrets, Redis and
 * the other tenants' files. Anything wider needs ALLOW_UNSANDBOXED=true.
 */
function unsandboxedProblem (config: Config): string | null {
  if (config.sandbox !== 'none' || config.claudeLauncher !== undefined || config.allowUnsandboxed) return null
  const why: string[] = []
  const tenants = new Set(config.tokens?.values() ?? [])
  if (tenants.size > 1) why.push(`GATEWAY_TOKENS names ${tenants.size} tenants`)
  if (config.jwt !== null) why.push('JWT_SECRET/JWT_PUBLIC_KEY lets any tenant in')
  if (!isLoopback(config.host)) why.push(`HOST ${config.host} is not loopback`)
  if (why.length === 0) return null
  return `SANDBOX: none runs every tool unconfined, but ${why.join(' and ')}; ` +
    'use SANDBOX=bwrap (or a CLAUDE_LAUNCHER), or set ALLOW_UNSANDBOXED=true to accept the risk'
}

/**
 * TRUST_PROXY in Fastify's terms: `true`/`false`, a hop count, or a list of
 * addresses/CIDRs (and proxy-addr's names); null when not valid, so a typo
 * stops the gateway instead of making Fastify throw later.
 */
export function parseTrustProxy (text: string): boolean | number | string[] | null {
  const v = text.trim().toLowerCase()
  if (v === 'true') return true
  if (v === 'false' || v === '') return false
  if (/^\d+$/.test(v)) return Number(v)
  const entries = list(v)
  const named = new Set(['loopback', 'linklocal', 'uniquelocal'])
  const valid = entries.length > 0 && entries.every((entry) => {
    if (named.has(entry)) return true
    const [address, bits, ...rest] = entry.split('/')
    const family = isIP(address ?? '')
    if (family === 0 || rest.length > 0) return false
    return bits === undefined || (/^\d+$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128))
  })
  return valid ? entries : null
}

/**
 * Replaces each `<NAME>_FILE` of SECRET_FILE_VARIABLES in `env` (blanks
 * already removed) by `<NAME>` holding the file's content, one trailing
 * newline trimmed. Both set, or an unreadable file, is a ConfigError naming
 * the variables. Returns the names that came from files.
 */
function readSecretFiles (env: Record<string, string | undefined>, readFile: (path: string) => string): Set<string> {
  const problems: string[] = []
  const fromFiles = new Set<string>()
  for (const name of SECRET_FILE_VARIABLES) {
    const path = env[`${name}_FILE`]
    delete env[`${name}_FILE`]
    if (path === undefined) continue
    if (env[name] !== undefined) {
      problems.push(`  ${name}, ${name}_FILE: both are set; set one`)
      continue
    }
    let text: string
    try {
      text = readFile(path)
    } catch (err) {
      problems.push(`  ${name}_FILE: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`)
      continue
    }
    const value = text.replace(/\r?\n$/, '')
    // An empty file is a mistake (a secret not yet written), not "unset".
    if (value === '') {
      problems.push(`  ${name}_FILE: ${path} is empty`)
      continue
    }
    env[name] = value
    fromFiles.add(name)
  }
  if (problems.length > 0) throw new ConfigError(`invalid configuration:\n${problems.join('\n')}`)
  return fromFiles
}

function list (text: string): string[] {
  return text.split(',').map((v) => v.trim()).filter((v) => v !== '')
}

/** `token=tenant,token2=tenant2` → Map. Tokens shorter than 16 characters are refused. */
export function parseTokens (text: string): Map<string, string> {
  const tokens = new Map<string, string>()
  for (const pair of text.split(',').map((p) => p.trim()).filter((p) => p !== '')) {
    const at = pair.lastIndexOf('=')
    const token = pair.slice(0, at)
    const tenant = pair.slice(at + 1)
    if (at < 1 || !/^(?!\.\.?$)[A-Za-z0-9._-]{1,64}$/.test(tenant)) { // `.`/`..` would name a parent folder
      throw new ConfigError('invalid configuration:\n  GATEWAY_TOKENS: expected token=tenant[,token=tenant...] with tenant of [A-Za-z0-9._-]')
    }
    if (token.length < 16) throw new ConfigError(`invalid configuration:\n  GATEWAY_TOKENS: token for tenant ${tenant} is shorter than 16 characters`)
    tokens.set(token, tenant)
  }
  if (tokens.size === 0) throw new ConfigError('invalid configuration:\n  GATEWAY_TOKENS: no token=tenant pair')
  return tokens
}

/** The `claude` binary of the @anthropic-ai/claude-code dependency, else `claude` on PATH. */
export function defaultClaudeBin (): string {
  try {
    const pkg = createRequire(import.meta.url).resolve('@anthropic-ai/claude-code/package.json')
    const bin = join(dirname(pkg), 'bin', 'claude.exe')
    if (existsSync(bin)) return bin
  } catch {
    // not installed as a dependency: fall back to PATH
  }
  return 'claude'
}
