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
  REDIS_PREFIX: 'cgw:',
  EVENTS_MAX_PER_SESSION: 100_000,
  EVENTS_TTL_SECONDS: 7 * 24 * 3600,
  /** Events held in memory while the store is unreachable, per session. */
  STORE_QUEUE_MAX: 100_000,
  /** Browser Origins allowed for WebSocket upgrades and CORS (comma separated). Empty = none. */
  ALLOWED_ORIGINS: '',
  /** Extra Host header values accepted while bound to loopback (DNS-rebinding guard). */
  ALLOWED_HOSTS: '',
  /** Whether clients may ask for permission_mode bypassPermissions. */
  ALLOW_BYPASS_PERMISSIONS: false,
  MAX_SESSIONS_PER_TENANT: 20,
  MAX_CLIENTS_PER_SESSION: 20,
  /** Sustained client frames per second per connection (bursts of twice this are allowed). */
  WS_MAX_FRAMES_PER_SEC: 50,
  /** REST requests per minute per tenant (or per IP before authentication). */
  RATE_LIMIT_PER_MINUTE: 600,
  /** Failed authentications per client IP per minute before it gets 429. */
  AUTH_FAILURES_PER_MINUTE: 30,
  BODY_LIMIT_BYTES: 1024 * 1024,
  /** Lifetime of a single-use WebSocket ticket. */
  WS_TICKET_TTL_MS: 30_000,
  /** Give each tenant its own CLI config dir (CLAUDE_CONFIG_DIR = $DATA_DIR/claude-config/<tenant>). */
  TENANT_CONFIG_DIRS: true,
  /** JWT claim naming the tenant. */
  JWT_TENANT_CLAIM: 'tenant'
} as const
