/**
 * Every gateway setting, once: its environment variable, rule, default and
 * meaning (README's settings table is generated from here by
 * scripts/settings-table.ts, and test/unit/config-readme.test.ts holds the
 * two together), and the transform to the camelCase `Config` the app reads,
 * whose type is inferred from it. Rules that join several settings are
 * start-up rules in src/config.ts.
 */
import { hostname } from 'node:os'
import { resolve, join } from 'node:path'
import { z } from 'zod'
import { parseDestinations } from '../sandbox/destinations.js'
import { DEFAULT_API_PATHS, apiPathProblem } from '../sandbox/api-paths.js'
import { type WebhookEventType, WEBHOOK_EVENT_TYPES } from '../webhooks/webhook-event-types.js'
import { defaultClaudeBin, isJwtPublicKey, list, parseTrustProxy, tenantKeysOrProblem, tokensOrProblem } from './values.js'

/** What README's table says of one variable. */
export interface SettingDoc {
  /** The "meaning" column. */
  about: string
  /** The value used when the variable is unset or empty, as written in the environment. */
  default?: string
  /** For a variable with no fixed default: what leaving it unset means. */
  unset?: string
  /** A secret that may come from the file named by `<NAME>_FILE` instead. */
  fromFile?: boolean
}

export const settingDocs = z.registry<SettingDoc>()

/** `schema`, documented, with `fallback` (the value as the environment would spell it) when unset. */
function defaulted<S extends z.ZodType> (schema: S, fallback: z.input<S> & (string | number), about: string) {
  return documented(schema.prefault(fallback), { about, default: String(fallback) })
}

/** `schema`, documented, undefined when unset (what that means is `unset`). */
function optional<S extends z.ZodType> (schema: S, unset: string, about: string, fromFile = false) {
  return documented(schema.optional(), { about, unset, ...(fromFile ? { fromFile } : {}) })
}

/** Records `doc` for `schema` in settingDocs, where the README table and its test read it. */
function documented<S extends z.ZodType> (schema: S, doc: SettingDoc): S {
  settingDocs.add(schema, doc)
  return schema
}

const int = (min: number, max?: number) => {
  const n = z.coerce.number().int().min(min)
  // Number() reads blanks as 0 (PORT=" ": any port); as NaN they are refused instead.
  return z.preprocess((v) => typeof v === 'string' && v.trim() === '' ? NaN : v, max === undefined ? n : n.max(max))
}
/**
 * setTimeout's longest delay: Node fires a longer one after 1 ms (with a
 * TimeoutOverflowWarning), so "about a month" would mean "at once".
 */
export const MAX_TIMER_MS = 2 ** 31 - 1
/** A duration in ms that ends up as a timer's delay. */
const ms = (min: number) => int(min, MAX_TIMER_MS)
const flag = () => z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1')
/** A comma list (an empty value is an empty list). */
const commaList = () => z.string().transform(list)
/** A comma list whose every entry matches `entry`. */
/** `https://host[:port]` as a browser sends it in Origin (lower case, no default port, no path). */
function isOrigin (entry: string): boolean {
  try {
    const url = new URL(entry)
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.origin === entry
  } catch {
    return false
  }
}
const listOf = (entry: RegExp, what: string) => commaList().refine((items) => items.every((x) => entry.test(x)), `expected a comma list of ${what}`)
const secret = () => z.string().min(32, 'must be at least 32 characters')

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const

/** Environment variable → rule, default and meaning; in README's order. */
export const envSchema = z.object({
  PORT: defaulted(int(0, 65535), 8080, 'listen port'),
  HOST: defaulted(z.string().min(1), '127.0.0.1', 'listen address; anything but loopback needs `GATEWAY_TOKENS` or a JWT key (`JWT_SECRET`/`JWT_PUBLIC_KEY`)'),
  METRICS_PORT: defaulted(int(0, 65535), 0,
    '`/metrics` on a listener of its own on this port and `HOST` (not `PORT`, which then answers 404 for it); 0 = on `PORT` (docs/API.md, Metrics)'),
  METRICS_TOKEN: optional(z.string().min(16, 'must be at least 16 characters'), '(unset: a tenant\'s token on `PORT`; no credential on `METRICS_PORT`)',
    'when set (≥ 16 characters), the only credential `/metrics` accepts: `Authorization: Bearer <METRICS_TOKEN>`', true),
  LOG_LEVEL: defaulted(z.enum(LOG_LEVELS), 'info', 'pino level'),
  DATA_DIR: defaulted(z.string().min(1), './data', 'gateway data (workspaces, pid files, the store secret, CLI config dirs)'),
  CLAUDE_BIN: optional(z.string().min(1), 'the `@anthropic-ai/claude-code` dependency\'s binary, else `claude` on PATH', 'the CLI to spawn'),
  CLAUDE_ARGS_EXTRA: defaulted(z.string().transform((v) => v.split(/\s+/).filter((a) => a !== '')), '', 'operator-only extra CLI flags, space separated'),
  WORKSPACE_ROOT: optional(z.string().min(1), '`$DATA_DIR/workspaces`', 'sessions run in `<root>/<tenant>/<cwd or session id>`; must not hold `DATA_DIR`'),
  REDIS_URL: optional(z.string().regex(/^rediss?:\/\/[^,\s]+(,\s*rediss?:\/\/[^,\s]+)*$/, 'must be a redis:// or rediss:// URL, or a comma-separated list of them (Cluster seed nodes)'), '(unset: in-memory store)',
    '`redis://…` to keep event logs in Redis; a comma-separated list names seed nodes of a Redis Cluster (implies `REDIS_CLUSTER`; the first one\'s credentials and TLS apply to all)', true),
  REDIS_PREFIX: defaulted(z.string().min(1).regex(/^[^{}]*$/, 'must not contain { or } (they would break the per-session hash tag)'), 'cgw:',
    'key prefix in Redis (no `{` or `}`)'),
  REDIS_CLUSTER: defaulted(flag(), 'false',
    '`REDIS_URL` names one seed node of a Redis Cluster (its credentials and TLS apply to every node); needs `REDIS_URL`'),
  NODE_ID: optional(z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, 'expected 1 to 64 of A-Z a-z 0-9 . _ -'), '`<hostname>-<pid>`',
    'this gateway\'s name among several sharing a store; logged as `node` on every line'),
  SESSION_LEASE_MS: defaulted(int(300, 600_000), 10_000,
    'how long a node\'s hold on a session outlives its last renewal (renewed every third of it): after a node dies, its sessions are recorded `lost` and may resume elsewhere within about this long (docs/SCALING.md)'),
  GATEWAY_TOKENS: optional(z.string().transform((v, ctx) => {
    const tokens = tokensOrProblem(v)
    if (typeof tokens !== 'string') return tokens
    ctx.addIssue({ code: 'custom', message: tokens })
    return z.NEVER
  }), '(unset: a token is generated and printed at start; loopback only)', '`token=tenant,token2=tenant2` (tokens ≥ 16 characters)', true),
  STORE_SECRET: optional(secret(), '(generated once into `$DATA_DIR/store-secret`, mode 0600)',
    'key (≥ 32 characters) of the HMACs on stored session records, messages between nodes, node load reports, conversation copies and webhook outbox entries; gateways sharing a Redis must share it', true),
  STORE_ACCEPT_UNSIGNED: defaulted(flag(), 'false',
    'accept node messages and node load reports without a signature and conversation copies without a seal, logged at warn (messages, reports: the first one): what a version before they were signed wrote; on only for an upgrade from one (docs/SCALING.md)'),
  SANDBOX: defaulted(z.enum(['bwrap', 'none']), 'bwrap',
    'how each CLI is confined when `CLAUDE_LAUNCHER` is unset: `bwrap` (bubblewrap + egress proxy; `bwrap` and `socat` checked at start) or `none`'),
  ALLOW_UNSANDBOXED: defaulted(flag(), 'false', 'lets `SANDBOX=none` start although the gateway serves several tenants (or JWTs) or `HOST` is not loopback'),
  SANDBOX_EGRESS: documented(z.string().optional().transform((v, ctx) => {
    if (v === undefined) return null
    try {
      return parseDestinations(v)
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: `${(err as Error).message}; expected comma-separated host[:port]` })
      return null
    }
  }), {
    unset: 'host:port of `ANTHROPIC_BASE_URL`, else `api.anthropic.com:443`',
    about: '`host[:port]` list: the only destinations a sandboxed CLI reaches (through the proxy)'
  }),
  ANTHROPIC_API_KEY: optional(z.string(), '(none)',
    'the CLI\'s Anthropic API key (from `_FILE`, it is in no process\'s environment); in the sandbox only the CLI\'s egress proxy holds it (`SANDBOX_CREDENTIALS`)', true),
  ANTHROPIC_AUTH_TOKEN: optional(z.string(), '(none)', 'a bearer token for the CLI instead of a key (an LLM gateway\'s), held like the key', true),
  TENANT_API_KEYS: optional(z.string().transform((v, ctx) => {
    const keys = tenantKeysOrProblem(v)
    if (typeof keys !== 'string') return keys
    ctx.addIssue({ code: 'custom', message: keys })
    return z.NEVER
  }), '(none: every tenant\'s CLI gets `ANTHROPIC_API_KEY`)',
  '`tenant=key,tenant2=key2`: a tenant\'s own Anthropic API key for its CLIs, in place of `ANTHROPIC_API_KEY` / `ANTHROPIC_AUTH_TOKEN` (held like them): its usage, rate limits and Files stay in its own workspace', true),
  SANDBOX_CREDENTIALS: defaulted(z.enum(['proxy', 'env']), 'proxy',
    'where a sandboxed CLI\'s `ANTHROPIC_API_KEY` / `ANTHROPIC_AUTH_TOKEN` is: `proxy` (held by its egress proxy, which adds it to each API request; the CLI sees a placeholder) or `env` (in its environment, readable by its tools)'),
  SANDBOX_API_PATHS: defaulted(commaList().superRefine((items, ctx) => {
    for (const problem of items.map(apiPathProblem)) if (problem !== null) ctx.addIssue({ code: 'custom', message: problem })
  }), DEFAULT_API_PATHS.join(','),
  'API paths a sandboxed CLI may call with the credential its proxy holds (`*`: one segment); others get 403, so one tenant\'s tools cannot reach the key\'s Files or Batches (HEAD passes on any path)'),
  CLI_MEMORY_MAX_MB: optional(int(32), '(no limit)',
    'memory (RAM, no swap) of each CLI with every process it starts, in MiB; past it the kernel kills the largest of them (a tool, usually) and the exit says `oom_kills`. Needs a writable cgroup (`CLI_CGROUP`), checked at start'),
  CLI_PIDS_MAX: optional(int(8), '(no limit)', 'processes and threads each CLI may have at once, its tools\' included: a fork bomb fails inside its session'),
  CLI_CPUS: optional(z.coerce.number().min(0.01).max(1024), '(no limit)', 'CPU time each CLI with its tools may use, in cores (`0.5` = half of one core per 100 ms period)'),
  TENANT_MEMORY_MAX_MB: optional(int(32), '(no limit)',
    'memory (RAM, no swap) of all of one tenant\'s CLIs on this node together, in MiB; past it the kernel kills the largest process among them. Not below `CLI_MEMORY_MAX_MB`'),
  TENANT_PIDS_MAX: optional(int(8), '(no limit)', 'processes and threads all of one tenant\'s CLIs on this node may have together. Not below `CLI_PIDS_MAX`'),
  TENANT_CPUS: optional(z.coerce.number().min(0.01).max(1024), '(no limit)', 'CPU time all of one tenant\'s CLIs on this node may use together, in cores. Not below `CLI_CPUS`'),
  CLI_CGROUP: optional(z.string().regex(/^\/[^\0]*$/, 'must be a cgroup path starting with /'), 'the gateway\'s own cgroup',
    'cgroup (path as in `/proc/self/cgroup`) under which each CLI gets its own (inside one per tenant with a `TENANT_` limit) when a `CLI_` or `TENANT_` limit is set; cgroup v2 if it offers the controllers, else v1 (docs/SECURITY.md, Resource limits)'),
  CLI_ENV_ALLOW: defaulted(commaList(), '',
    'extra variables for the CLI besides the documented list: names, or prefixes ending in `_` or `*` (e.g. `AWS_,GOOGLE_` for Bedrock/Vertex)'),
  CLIENT_CONTROL_ALLOW: defaulted(listOf(/^(\*|[a-z][a-z0-9_]{0,99})$/, 'control subtypes (lower_snake_case) or *'),
    'interrupt,set_permission_mode,set_model,set_max_thinking_tokens,mcp_status,mcp_set_servers,mcp_reconnect,mcp_toggle,mcp_read_resource,get_context_usage,get_session_cost,list_models,get_binary_version,rewind_files,stop_task,background_tasks,get_task_output,cancel_async_message,rename_session,reload_skills,reload_output_styles',
    'client control subtypes forwarded to the CLI (docs/PROTOCOL.md, Control policy); `*` = all. The default is the Agent SDK\'s ordinary calls: nothing that runs commands, reads files or rewrites settings'),
  CLIENT_MCP_SERVER_TYPES: defaulted(listOf(/^(sdk|http|sse|stdio)$/, 'MCP server types among sdk, http, sse, stdio'), 'sdk',
    'server types a client may add with `mcp_set_servers` (`sdk`, `http`, `sse`, `stdio`); `sdk` runs in the client, `stdio` would be a command the CLI runs'),
  PERMISSION_UPDATE_DESTINATIONS: defaulted(listOf(/^(session|localSettings|projectSettings|userSettings|cliArg)$/, 'destinations among session, localSettings, projectSettings, userSettings, cliArg'),
    'session,localSettings,projectSettings', 'where a permission answer\'s `updatedPermissions` may write'),
  PERMISSION_BROAD_RULE_TOOLS: defaulted(listOf(/^[A-Za-z0-9_.-]{1,200}$/, 'tool names'), 'Bash',
    'tools whose allow rule without a specifier (`Bash`, `Bash(*)`) counts as bypass (refused while `ALLOW_BYPASS_PERMISSIONS=false`)'),
  KEEPALIVE_INTERVAL_MS: defaulted(ms(100), 15_000, '`keep_alive` frame and ping to every client'),
  IDLE_TIMEOUT_MS: defaulted(ms(0), 1_800_000, 'stop a CLI with no client, no turn and no prompt for this long (0 = never)'),
  MAX_SESSIONS: defaulted(int(1), 50, 'CLIs running at once'),
  SHUTDOWN_GRACE_MS: defaulted(ms(0), 5_000, 'at shutdown (SIGTERM), time running turns get to finish before their CLIs are stopped, and the store to take the last frames (docs/SCALING.md, draining)'),
  CLI_SPAWN: defaulted(z.enum(['helper', 'direct']), 'helper',
    'how CLIs are started: `helper` (a small process forked at start starts each one and hands its pipes over, so a start never holds the gateway\'s event loop) or `direct` (spawn() from the gateway, which forks it: the event loop waits longer the more memory the gateway has)'),
  CLI_STOP_TIMEOUT_MS: defaulted(ms(0), 3_000, 'each stop step (stdin closed, SIGTERM) waits this long before the next'),
  MAX_LINE_BYTES: defaulted(int(1024), 16 * 1024 * 1024, 'longer CLI stdout lines are dropped and reported'),
  WS_MAX_PAYLOAD_BYTES: defaulted(int(1024), 1024 * 1024, 'largest client frame (close 1009 past it)'),
  WS_MAX_BUFFERED_BYTES: defaulted(int(1024), 8 * 1024 * 1024, 'a client\'s unsent backlog past this closes it with 4008 (it can reconnect and resume)'),
  PERMISSION_TIMEOUT_MS: defaulted(ms(0), 0, 'unanswered permission prompts are denied (with interrupt) after this; 0 = wait for ever'),
  CONTROL_REQUEST_TIMEOUT_MS: defaulted(ms(1), 60_000, 'other CLI control requests (hooks, MCP) get an error answer after this'),
  INITIALIZE_HOLD_MS: defaulted(ms(0), 2_000,
    'a new CLI waits this long for the holder\'s own `initialize` (the SDK\'s: hooks, system prompt, …) before the gateway sends a bare one; 0 = no wait'),
  CLIENT_REQUEST_TIMEOUT_MS: defaulted(ms(1), 30_000, 'a client\'s control request the CLI does not answer gets `request_timeout`'),
  EVENTS_MAX_PER_SESSION: defaulted(int(1), 100_000, 'events kept per session'),
  EVENTS_TTL_SECONDS: defaulted(int(0), 7 * 24 * 3600, 'how long a finished session\'s history is kept'),
  STORE_QUEUE_MAX: defaulted(int(1), 100_000, 'events held in memory per session while the store is down'),
  RESUME_STORE_WAIT_MS: defaulted(ms(0), 3_000,
    'how long a resuming client\'s hello waits for a store that does not answer before it says `resume: "unavailable"` and closes with 1013 (PROTOCOL.md, Resume)'),
  // A browser's Origin is scheme://host[:port] exactly: an entry with a path or a trailing slash would never match.
  ALLOWED_ORIGINS: defaulted(commaList().refine((items) => items.every(isOrigin), 'expected a comma list of origins such as https://app.example.com (scheme, host and port only: no path, no trailing slash)'),
    '', 'browser Origins allowed (WebSocket and CORS), comma separated; others get 403'),
  ALLOWED_HOSTS: defaulted(commaList(), '', 'extra Host names accepted while bound to loopback (DNS-rebinding guard)'),
  ALLOW_BYPASS_PERMISSIONS: defaulted(flag(), 'false', 'whether clients may use `permission_mode` `bypassPermissions`'),
  CLAUDE_LAUNCHER: optional(z.string().min(1), '(none)',
    'command wrapping each CLI instead of `SANDBOX`: `<launcher> <workspace> <config dir> -- <cli> <args…>`; it is then responsible for isolation'),
  TENANT_CONFIG_DIRS: defaulted(flag(), 'true', 'each tenant\'s CLI config dir is `$DATA_DIR/claude-config/<tenant>` (`CLAUDE_CONFIG_DIR`); always on in the sandbox'),
  MAX_SESSIONS_PER_TENANT: defaulted(int(1), 20, 'CLIs one tenant may run at once, on all nodes together (429)'),
  MAX_CLIENTS_PER_SESSION: defaulted(int(1), 20, 'WebSocket and SSE clients per session (429)'),
  WS_MAX_FRAMES_PER_SEC: defaulted(int(1), 50, 'client frames per second per connection (bursts of 2×); a sustained flood is closed with 4029'),
  RATE_LIMIT_PER_MINUTE: defaulted(int(1), 600, 'REST requests per tenant (or per address before authentication) per minute (429); WebSocket upgrades are not counted here'),
  WS_UPGRADES_PER_MINUTE: defaulted(int(1), 1200,
    'WebSocket upgrades per tenant per minute (429 before the upgrade, with `retry-after`); apart from the REST limit, so a reconnect storm never blocks the tenant\'s REST calls'),
  WS_UPGRADES_PER_MINUTE_PER_ADDRESS: defaulted(int(1), 600, 'WebSocket upgrades per client address per minute, across tenants (the address as `TRUST_PROXY` decides it)'),
  AUTH_FAILURES_PER_MINUTE: defaulted(int(1), 30, 'failed authentications per client address per minute before 429'),
  TRUST_PROXY: defaulted(z.string().transform((v, ctx) => {
    const parsed = parseTrustProxy(v)
    if (parsed === null) ctx.addIssue({ code: 'custom', message: 'expected true, false, a hop count, or a comma list of IP addresses/CIDRs (or loopback, linklocal, uniquelocal)' })
    return parsed ?? false
  }), 'false', 'proxies whose `X-Forwarded-For` decides the client address: `true`, `false`, a hop count, or addresses/CIDRs (`loopback`, `linklocal`, `uniquelocal` allowed)'),
  BODY_LIMIT_BYTES: defaulted(int(1024), 1024 * 1024, 'largest REST body'),
  REQUEST_TIMEOUT_MS: defaulted(int(0), 30_000, 'headers and body must arrive within this, else 408 (0 = off); WebSockets and event streams are not cut'),
  HEADERS_TIMEOUT_MS: defaulted(int(0), 10_000, 'request headers must arrive within this (at most `REQUEST_TIMEOUT_MS`)'),
  KEEPALIVE_TIMEOUT_MS: defaulted(ms(1), 72_000, 'idle keep-alive connections are closed after this (keep it above a reverse proxy\'s idle timeout)'),
  MAX_CONNECTIONS: defaulted(int(1), 2_000, 'open TCP connections; further ones are dropped at once'),
  MAX_CONNECTIONS_PER_TENANT: defaulted(int(1), 100, 'WebSockets plus event streams of one tenant across its sessions (429 `tenant_connection_limit`)'),
  HISTORY_PAGE_MAX_BYTES: defaulted(int(1024), 4 * 1024 * 1024, 'a history page stops before passing this many bytes, with `has_more` (at least one event)'),
  WS_TICKET_TTL_MS: defaulted(ms(1000), 30_000, 'lifetime of a single-use WebSocket ticket'),
  JWT_SECRET: optional(secret(), '(none)', 'accept HS256 JWTs signed with this (≥ 32 characters) besides `GATEWAY_TOKENS`', true),
  JWT_PUBLIC_KEY: optional(z.string().refine(isJwtPublicKey, 'must be an SPKI PEM public key (-----BEGIN PUBLIC KEY-----) of RSA, EC P-256/P-384/P-521 or Ed25519'), '(none)',
    'accept JWTs signed by this PEM public key (RSA, EC P-256/P-384/P-521 or Ed25519) besides `GATEWAY_TOKENS`', true),
  JWT_TENANT_CLAIM: defaulted(z.string().min(1), 'tenant', 'JWT claim naming the tenant'),
  JWT_ISSUER: optional(z.string().min(1), '(none)', 'expected JWT `iss`'),
  JWT_AUDIENCE: optional(z.string().min(1), '(none)', 'expected JWT `aud`'),
  JWT_MAX_TTL_SECONDS: defaulted(int(1), 86_400, 'longest JWT lifetime accepted (`exp − iat`, or `exp − now` without `iat`)'),
  JWT_EXPIRY_ENDS_CONNECTIONS: defaulted(flag(), 'false',
    'end a WebSocket (close 4401) or event stream (`credential_expired`) when the JWT it was opened with expires, unless the WebSocket client presents a newer one first (a `credential` frame, docs/PROTOCOL.md); off: a connection outlives its JWT'),
  CREDENTIAL_FILES_POLL_MS: defaulted(ms(0), 0,
    'read the `_FILE`s of secrets this often and reload the credentials (as `SIGHUP` does) once a change reads the same at two polls in a row: a Kubernetes Secret volume is updated with no signal to the process; 0: only `SIGHUP` reloads'),
  WEBHOOK_URL: optional(z.string().refine(isWebhookUrl, 'must be an http:// or https:// URL'), '(unset: no webhooks)',
    'an `http(s)://` URL that gets a signed POST for each session event (docs/WEBHOOKS.md); needs `WEBHOOK_SECRET`', true),
  WEBHOOK_SECRET: optional(secret(), '(none; required with `WEBHOOK_URL`)',
    'key (≥ 32 characters) of the HMAC-SHA256 in each webhook\'s `Webhook-Signature` header', true),
  WEBHOOK_EVENTS: defaulted(listOf(new RegExp(`^(${WEBHOOK_EVENT_TYPES.join('|').replaceAll('.', '\\.')})$`), `event types among ${WEBHOOK_EVENT_TYPES.join(', ')}`),
    WEBHOOK_EVENT_TYPES.join(','), 'event types sent to `WEBHOOK_URL`'),
  WEBHOOK_TIMEOUT_MS: defaulted(int(100, 600_000), 10_000, 'one webhook attempt (connect, send, answer headers) is abandoned after this and retried'),
  WEBHOOK_MAX_ATTEMPTS: defaulted(int(1, 100), 8, 'attempts per webhook (the first included) on network errors, timeouts, 408, 429 and 5xx; other answers are never retried'),
  WEBHOOK_RETRY_BASE_MS: defaulted(int(1, 3_600_000), 1_000, 'delay before the first retry, doubled for each further one (with jitter: each delay is between half and all of it)'),
  WEBHOOK_RETRY_MAX_MS: defaulted(int(1, 86_400_000), 60_000, 'longest delay between attempts, a receiver\'s `Retry-After` included'),
  WEBHOOK_CONCURRENCY: defaulted(int(1, 256), 4, 'webhook requests in flight at once (one at a time per session, in order)'),
  WEBHOOK_QUEUE_MAX: defaulted(int(1), 10_000, 'webhooks waiting to be sent or retried; past it the oldest is dropped (logged and counted)')
})

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
      : { secret: e.JWT_SECRET, publicKey: e.JWT_PUBLIC_KEY, tenantClaim: e.JWT_TENANT_CLAIM, issuer: e.JWT_ISSUER, audience: e.JWT_AUDIENCE, maxTtlSeconds: e.JWT_MAX_TTL_SECONDS }
  }
})

export type Config = z.output<typeof configSchema>

/**
 * The webhook settings, or null without WEBHOOK_URL. A URL without a secret
 * is refused here rather than among loadConfig's start-up rules: the
 * receiver could not tell our POSTs from anyone's, so it never starts.
 */
function webhookConfig (e: z.output<typeof envSchema>, ctx: z.core.$RefinementCtx) {
  if (e.WEBHOOK_URL === undefined) return null
  if (e.WEBHOOK_SECRET === undefined) {
    ctx.addIssue({ code: 'custom', path: ['WEBHOOK_SECRET'], message: 'required when WEBHOOK_URL is set (or WEBHOOK_SECRET_FILE)' })
    return null
  }
  return {
    url: e.WEBHOOK_URL,
    secret: e.WEBHOOK_SECRET,
    events: e.WEBHOOK_EVENTS as WebhookEventType[],
    timeoutMs: e.WEBHOOK_TIMEOUT_MS,
    maxAttempts: e.WEBHOOK_MAX_ATTEMPTS,
    retryBaseMs: e.WEBHOOK_RETRY_BASE_MS,
    retryMaxMs: e.WEBHOOK_RETRY_MAX_MS,
    concurrency: e.WEBHOOK_CONCURRENCY,
    queueMax: e.WEBHOOK_QUEUE_MAX
  }
}

/** An absolute http: or https: URL (it may hold credentials: it is never logged whole). */
function isWebhookUrl (text: string): boolean {
  try {
    const url = new URL(text)
    return url.protocol === 'http:' || url.protocol === 'https:'
  } catch {
    return false
  }
}

/** `<hostname>-<pid>`, in NODE_ID's charset and length (a hostname may hold other characters or be long). */
export function defaultNodeId (pidNumber = process.pid): string {
  const pid = `-${pidNumber}`
  const host = hostname().replace(/[^A-Za-z0-9._-]/g, '-').slice(0, 64 - pid.length)
  return `${host === '' ? 'node' : host}${pid}`
}
