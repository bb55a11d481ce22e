/**
 * The options, events and permission types of a SessionConnection (the
 * contract in notes/client-contract.md; names are fixed, fields may grow).
 */
import type { CliProblemFrame, GatewayErrorFrame, LiveFrame, RecordedFrame, Role } from './frames.js'

export type ConnectionState = 'connecting' | 'open' | 'reconnecting' | 'closed'
export type TurnState = 'idle' | 'running' | 'requires_action'

/** Reconnect backoff: the n-th retry waits a random time in [base·(1−jitter), base], base = min(maxMs, initialMs·factor^n). */
export interface ReconnectOptions {
  /** First delay, ms (default 250). */
  initialMs?: number
  /** Largest delay, ms (default 15 000). */
  maxMs?: number
  /** Growth per failed attempt (default 2). */
  factor?: number
  /** Share of the delay that is random, 0–1 (default 0.5). */
  jitter?: number
  /** Attempts in a row without a hello before giving up with an 'error' (default: never give up). */
  maxAttempts?: number
}

export interface ConnectOptions {
  /** 'controller' (default) takes the session; 'observer' watches. */
  role?: Role
  /**
   * First attach: replay the frames after this seq (default 0 = the whole
   * history); 'live' = no replay, start at the hello's last_seq. Reconnects
   * always resume after the last seq delivered.
   */
  after?: number | 'live'
  /** Default: 'subprotocol' in a browser (a `document` exists), else 'header'. 'ticket' fetches a fresh ticket before every (re)connect. */
  auth?: 'header' | 'subprotocol' | 'ticket'
  /**
   * Answers can_use_tool prompts while this connection holds the session.
   * Return a decision, or undefined to leave the prompt pending (answer later
   * with allow/deny). Called once per prompt, also for one redelivered after
   * a reconnect or a take-over, unless it was already answered.
   */
  onPermission?: (request: PermissionRequest) => Promise<PermissionDecision | undefined> | PermissionDecision | undefined
  /** false: never reconnect (any drop closes the connection). */
  reconnect?: ReconnectOptions | false
  /** No frame at all (keep_alive included) for this long → drop the socket and reconnect. Default 45 000 (three of the gateway's default 15 s keep_alive ticks). */
  keepAliveTimeoutMs?: number
}

/** An open can_use_tool prompt. */
export interface PermissionRequest {
  requestId: string
  toolName: string
  displayName?: string
  description?: string
  /** The tool's input; {} when only the observer's summary (request_pending) is known. */
  input: Record<string, unknown>
  /** The CLI's permission_suggestions (what alwaysAllow grants); [] when only request_pending is known. */
  suggestions: unknown[]
  toolUseId?: string
  blockedPath?: string
  seq: number
  /** True when this connection holds the session and has the full request (an observer's answer goes over HTTP). */
  canAnswer: boolean
}

export type PermissionDecision =
  | { behavior: 'allow', updatedInput?: Record<string, unknown>, updatedPermissions?: unknown[] }
  | { behavior: 'deny', message: string, interrupt?: boolean }

/** How allow/deny/alwaysAllow ended. */
export interface AnswerOutcome {
  requestId: string
  /**
   * `answered`: this answer was taken. `already_resolved`: another answer
   * came first, or the prompt ended (timed out, cancelled). `refused`: the
   * gateway refused it (`code`, also emitted as 'error'; the prompt may stay
   * open), or the connection was closed first (`connection_closed`).
   */
  outcome: 'answered' | 'already_resolved' | 'refused'
  code?: string
}

export interface ConnectionEvents {
  /** Every recorded frame, in seq order, each exactly once across reconnects. */
  frame: RecordedFrame
  /** Per-connection frames without seq (hello, holder, store, gap, error, keep_alive, refused control answers). */
  message: LiveFrame
  state: ConnectionState
  role: { role: Role, holder: string | null }
  status: string
  turn: TurnState
  store: 'ok' | 'degraded'
  permission: PermissionRequest
  permissionResolved: { requestId: string, decision: string, by: string | null }
  problem: CliProblemFrame
  /** Seqs history no longer has (hello `resume: gap`, or a jump in the seqs). */
  gap: { missing: Array<[number, number]> }
  /** A gateway error frame, a refused upgrade (GatewayRequestError) or a ConnectionError (gave up, policy close). */
  error: GatewayErrorFrame | Error
}
