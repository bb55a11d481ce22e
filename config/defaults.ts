/**
 * Default configuration values. Every key maps to one environment variable
 * (the same name, upper snake case) read and validated by src/config.ts.
 * README's configuration table lists them; keep the two in step.
 */
export const defaults = {
  PORT: 8080,
  HOST: '127.0.0.1',
  LOG_LEVEL: 'info',
  /** Where the gateway keeps workspaces and pid files when not told otherwise. */
  DATA_DIR: './data',
  CLAUDE_ARGS_EXTRA: '',
  KEEPALIVE_INTERVAL_MS: 15_000,
  IDLE_TIMEOUT_MS: 1_800_000,
  MAX_SESSIONS: 50,
  SHUTDOWN_GRACE_MS: 5_000,
  /** Each stop phase (stdin closed, then SIGTERM) waits this long before the next. */
  CLI_STOP_TIMEOUT_MS: 3_000,
  /** A CLI stdout line longer than this is dropped and reported. */
  MAX_LINE_BYTES: 16 * 1024 * 1024,
  /** Largest WebSocket message a client may send. */
  WS_MAX_PAYLOAD_BYTES: 1024 * 1024,
  /** A client whose unsent backlog passes this is closed with 4008 (it can reconnect and resume). */
  WS_MAX_BUFFERED_BYTES: 8 * 1024 * 1024,
  /** 0 = a permission prompt waits for ever. */
  PERMISSION_TIMEOUT_MS: 0,
  /** Non-permission CLI control requests (hooks, MCP, ...) get an error answer after this. */
  CONTROL_REQUEST_TIMEOUT_MS: 60_000,
  /** A client's own control request gets a gateway error if the CLI has not answered by then. */
  CLIENT_REQUEST_TIMEOUT_MS: 30_000,
  /** A new CLI's initialize waits this long for the holder's own (hooks, systemPrompt, …) before the gateway sends a bare one; 0 = never waits. */
  INITIALIZE_HOLD_MS: 2_000,
  REDIS_PREFIX: 'cgw:',
  EVENTS_MAX_PER_SESSION: 100_000,
  EVENTS_TTL_SECONDS: 7 * 24 * 3600,
  /** Events held in memory while the store is unreachable, per session. */
  STORE_QUEUE_MAX: 100_000,
  /** How long a resume waits for an event store that does not answer before its hello says `unavailable`. */
  RESUME_STORE_WAIT_MS: 3000,
  /** Browser Origins allowed for WebSocket upgrades and CORS (comma separated). Empty = none. */
  ALLOWED_ORIGINS: '',
  /** Extra Host header values accepted while bound to loopback (DNS-rebinding guard). */
  ALLOWED_HOSTS: '',
  /** Whether clients may ask for permission_mode bypassPermissions. */
  ALLOW_BYPASS_PERMISSIONS: false,
  /** Client control_request subtypes forwarded to the CLI (comma list, `*` = all): the Agent SDK's ordinary calls, nothing that runs commands, reads files or rewrites settings. */
  CLIENT_CONTROL_ALLOW: 'interrupt,set_permission_mode,set_model,set_max_thinking_tokens,mcp_status,mcp_set_servers,mcp_reconnect,mcp_toggle,mcp_read_resource,get_context_usage,get_session_cost,list_models,get_binary_version,rewind_files,stop_task,background_tasks,get_task_output,cancel_async_message,rename_session,reload_skills,reload_output_styles',
  /** MCP server types a client may add with mcp_set_servers (`sdk` runs in the client; `stdio` would be a command the CLI runs). */
  CLIENT_MCP_SERVER_TYPES: 'sdk',
  /** Where a permission answer's updatedPermissions may be written. */
  PERMISSION_UPDATE_DESTINATIONS: 'session,localSettings,projectSettings',
  /** Tools for which an allow rule with no specifier (`Bash`, `Bash(*)`) is refused while bypass is off. */
  PERMISSION_BROAD_RULE_TOOLS: 'Bash',
  MAX_SESSIONS_PER_TENANT: 20,
  MAX_CLIENTS_PER_SESSION: 20,
  /** Sustained client frames per second per connection (bursts of twice this are allowed). */
  WS_MAX_FRAMES_PER_SEC: 50,
  /** REST requests per minute per tenant (or per IP before authentication). */
  RATE_LIMIT_PER_MINUTE: 600,
  /** WebSocket upgrades per tenant per minute (apart from RATE_LIMIT_PER_MINUTE, so a reconnect storm never blocks REST). */
  WS_UPGRADES_PER_MINUTE: 1200,
  /** WebSocket upgrades per client address per minute, across tenants. */
  WS_UPGRADES_PER_MINUTE_PER_ADDRESS: 600,
  /** Failed authentications per client IP per minute before it gets 429. */
  AUTH_FAILURES_PER_MINUTE: 30,
  /** Fastify's trustProxy: `true`, `false`, a hop count, or a comma list of proxy addresses/CIDRs whose X-Forwarded-For is believed. */
  TRUST_PROXY: 'false',
  /** A request (headers and body) must arrive within this; 0 = no limit. WebSockets and event streams are not cut by it. */
  REQUEST_TIMEOUT_MS: 30_000,
  /** The request headers must arrive within this (at most REQUEST_TIMEOUT_MS). */
  HEADERS_TIMEOUT_MS: 10_000,
  /** An idle keep-alive connection is closed after this (keep it above a reverse proxy's idle timeout). */
  KEEPALIVE_TIMEOUT_MS: 72_000,
  /** Open TCP connections to the gateway; further ones are dropped at once. */
  MAX_CONNECTIONS: 2_000,
  /** WebSocket and event-stream (SSE) clients of one tenant, across all its sessions. */
  MAX_CONNECTIONS_PER_TENANT: 100,
  /** A history page (GET /v1/sessions/:id/events) stops before passing this many bytes (always at least one event). */
  HISTORY_PAGE_MAX_BYTES: 4 * 1024 * 1024,
  /** Extra variables passed to the CLI: names, or prefixes ending in `_` or `*` (e.g. `AWS_,GOOGLE_`). */
  CLI_ENV_ALLOW: '',
  /** Longest JWT lifetime accepted (exp - iat, or exp - now without iat). */
  JWT_MAX_TTL_SECONDS: 86_400,
  BODY_LIMIT_BYTES: 1024 * 1024,
  /** Lifetime of a single-use WebSocket ticket. */
  WS_TICKET_TTL_MS: 30_000,
  /** How each CLI is confined (unless CLAUDE_LAUNCHER is set): `bwrap` (bubblewrap + an egress proxy) or `none`. */
  SANDBOX: 'bwrap',
  /** Let SANDBOX=none start although the gateway serves several tenants (or JWTs) or listens beyond loopback. */
  ALLOW_UNSANDBOXED: false,
  /** Give each tenant its own CLI config dir (CLAUDE_CONFIG_DIR = $DATA_DIR/claude-config/<tenant>). */
  TENANT_CONFIG_DIRS: true,
  /** JWT claim naming the tenant. */
  JWT_TENANT_CLAIM: 'tenant'
} as const
