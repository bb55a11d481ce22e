/**
 * What the gateway's parts tell the metrics about, as plain method calls.
 * The session, control and security code is given a `MetricsSink` and never
 * sees prom-client (src/metrics/metrics.ts implements it); `noopMetrics` is
 * the default wherever none is passed, so parts built without metrics (unit
 * tests) behave the same.
 *
 * Every label value is from a small fixed set: never a session, client or
 * tenant id.
 */

/** How a permission prompt (`can_use_tool`) ended. */
export type PermissionOutcome = 'allow' | 'deny' | 'timeout' | 'cancelled' | 'error'

/**
 * Which limit refused: the REST limit (RATE_LIMIT_PER_MINUTE), a WebSocket
 * upgrade limit, a client's frame rate (WS_MAX_FRAMES_PER_SEC), or an
 * address locked out after too many failed authentications.
 */
export type RateLimitKind = 'rest' | 'ws_upgrade' | 'ws_frames' | 'auth_lockout'

/** No credentials at all, or credentials that did not authenticate (a token, a ticket, METRICS_TOKEN). */
export type AuthFailureReason = 'missing' | 'invalid'

/**
 * What a sandbox's egress proxy refused: a destination not in SANDBOX_EGRESS,
 * or an API path not in SANDBOX_API_PATHS (with the credential it holds).
 */
export type SandboxRefusal = 'egress' | 'api_path' | 'connections'

/** The frame limiter's verdict on a client frame (src/ws/frame-rate-limiter.ts). */
export type FrameVerdict = 'ok' | 'dropped' | 'flood'

export interface MetricsSink {
  /** A line the CLI printed on stdout (keep_alives and unparsable lines included, oversize ones not). */
  cliLine: () => void
  /** A WebSocket frame arrived from a client; anything but `ok` was refused by its rate limit. */
  clientFrame: (verdict: FrameVerdict) => void
  /** `n` frames of `bytes` UTF-8 bytes in all handed to clients' connections. */
  framesOut: (n: number, bytes: number) => void
  /** One store append took `seconds`; `ok` false when it failed. */
  appendTimed: (seconds: number, ok: boolean) => void
  /** A permission prompt ended `seconds` after the CLI asked. */
  permissionAnswered: (outcome: PermissionOutcome, seconds: number) => void
  /** A CLI process ended (exit code, or the signal that ended it; with CLI_ or TENANT_MEMORY_MAX_MB, how many of its processes the kernel killed at a limit). */
  cliExited: (code: number | null, signal: string | null, oomKills?: number) => void
  /** Starting a CLI process held the event loop `seconds` (spawn() forks the gateway). */
  cliSpawned: (seconds: number) => void
  /** A session's event log started or stopped holding frames for an unreachable store. */
  storeDegradedChanged: () => void
  authFailed: (reason: AuthFailureReason) => void
  rateLimited: (kind: RateLimitKind) => void
  /** A sandboxed CLI (or its tools) asked its egress proxy for something it refused. */
  sandboxRefused: (kind: SandboxRefusal) => void
}

const nothing = (): void => {}

/** Counts nothing. */
export const noopMetrics: MetricsSink = {
  cliLine: nothing,
  clientFrame: nothing,
  framesOut: nothing,
  appendTimed: nothing,
  permissionAnswered: nothing,
  cliExited: nothing,
  cliSpawned: nothing,
  storeDegradedChanged: nothing,
  authFailed: nothing,
  rateLimited: nothing,
  sandboxRefused: nothing
}

/** The UTF-8 size of a frame as handed to a connection. */
export function frameBytes (data: string | Buffer): number {
  return typeof data === 'string' ? Buffer.byteLength(data) : data.length
}
