/**
 * Configuration from environment variables, validated with zod. A bad value
 * stops the gateway at start with a message naming the variable.
 */
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, resolve } from 'node:path'
import { z } from 'zod'
import { defaults } from '../config/defaults.js'

const int = (min: number) => z.coerce.number().int().min(min)

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
  EVENTS_MAX_PER_SESSION: int(1).default(defaults.EVENTS_MAX_PER_SESSION),
  EVENTS_TTL_SECONDS: int(0).default(defaults.EVENTS_TTL_SECONDS),
  STORE_QUEUE_MAX: int(1).default(defaults.STORE_QUEUE_MAX),
  ALLOWED_ORIGINS: z.string().default(defaults.ALLOWED_ORIGINS),
  ALLOWED_HOSTS: z.string().default(defaults.ALLOWED_HOSTS),
  ALLOW_BYPASS_PERMISSIONS: z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1').default(defaults.ALLOW_BYPASS_PERMISSIONS),
  CLAUDE_LAUNCHER: z.string().min(1).optional(),
  TENANT_CONFIG_DIRS: z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1').default(defaults.TENANT_CONFIG_DIRS),
  MAX_SESSIONS_PER_TENANT: int(1).default(defaults.MAX_SESSIONS_PER_TENANT),
  MAX_CLIENTS_PER_SESSION: int(1).default(defaults.MAX_CLIENTS_PER_SESSION),
  WS_MAX_FRAMES_PER_SEC: int(1).default(defaults.WS_MAX_FRAMES_PER_SEC),
  RATE_LIMIT_PER_MINUTE: int(1).default(defaults.RATE_LIMIT_PER_MINUTE),
  AUTH_FAILURES_PER_MINUTE: int(1).default(defaults.AUTH_FAILURES_PER_MINUTE),
  BODY_LIMIT_BYTES: int(1024).default(defaults.BODY_LIMIT_BYTES),
  WS_TICKET_TTL_MS: int(1000).default(defaults.WS_TICKET_TTL_MS),
  JWT_SECRET: z.string().min(32, 'must be at least 32 characters').optional(),
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
  eventsMaxPerSession: number
  eventsTtlSeconds: number
  storeQueueMax: number
  allowedOrigins: string[]
  allowedHosts: string[]
  allowBypassPermissions: boolean
  /** Command that wraps each CLI (receives workspace, config dir, then the CLI argv). */
  claudeLauncher: string | undefined
  tenantConfigDirs: boolean
  maxSessionsPerTenant: number
  maxClientsPerSession: number
  wsMaxFramesPerSec: number
  rateLimitPerMinute: number
  authFailuresPerMinute: number
  bodyLimitBytes: number
  wsTicketTtlMs: number
  jwt: { secret?: string | undefined, publicKey?: string | undefined, tenantClaim: string, issuer?: string | undefined, audience?: string | undefined } | null
}

export class ConfigError extends Error {
  override name = 'ConfigError'
}

/** Reads and validates the environment; throws ConfigError listing every bad variable. */
export function loadConfig (env: NodeJS.ProcessEnv = process.env): Config {
  const blanksRemoved = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''))
  const parsed = envSchema.safeParse(blanksRemoved)
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`)
    throw new ConfigError(`invalid configuration:\n${lines.join('\n')}`)
  }
  const e = parsed.data
  const dataDir = resolve(e.DATA_DIR)
  return {
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
    eventsMaxPerSession: e.EVENTS_MAX_PER_SESSION,
    eventsTtlSeconds: e.EVENTS_TTL_SECONDS,
    storeQueueMax: e.STORE_QUEUE_MAX,
    allowedOrigins: list(e.ALLOWED_ORIGINS),
    allowedHosts: list(e.ALLOWED_HOSTS),
    allowBypassPermissions: e.ALLOW_BYPASS_PERMISSIONS,
    claudeLauncher: e.CLAUDE_LAUNCHER,
    tenantConfigDirs: e.TENANT_CONFIG_DIRS,
    maxSessionsPerTenant: e.MAX_SESSIONS_PER_TENANT,
    maxClientsPerSession: e.MAX_CLIENTS_PER_SESSION,
    wsMaxFramesPerSec: e.WS_MAX_FRAMES_PER_SEC,
    rateLimitPerMinute: e.RATE_LIMIT_PER_MINUTE,
    authFailuresPerMinute: e.AUTH_FAILURES_PER_MINUTE,
    bodyLimitBytes: e.BODY_LIMIT_BYTES,
    wsTicketTtlMs: e.WS_TICKET_TTL_MS,
    jwt: e.JWT_SECRET === undefined && e.JWT_PUBLIC_KEY === undefined
      ? null
      : { secret: e.JWT_SECRET, publicKey: e.JWT_PUBLIC_KEY, tenantClaim: e.JWT_TENANT_CLAIM, issuer: e.JWT_ISSUER, audience: e.JWT_AUDIENCE }
  }
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
