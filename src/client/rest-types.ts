/**
 * Shapes of the gateway's HTTP API (docs/API.md), as the client returns
 * them: field names are the wire's (snake_case) so a value can be logged or
 * passed on without translation.
 */
import type { ExitInfo, RecordedFrame, SessionStatus } from './frames.js'

/** The last argument of every GatewayClient REST method. */
export interface RequestOptions {
  /** Aborts the request: the call rejects with the signal's reason (also while the body is read). */
  signal?: AbortSignal
}

/** Body of POST /v1/sessions: each field maps to one CLI flag (docs/API.md). */
export interface CreateSessionOptions {
  model?: string
  permission_mode?: 'default' | 'acceptEdits' | 'plan' | 'dontAsk' | 'auto' | 'bypassPermissions'
  cwd?: string
  allowed_tools?: string[]
  disallowed_tools?: string[]
  append_system_prompt?: string
  max_turns?: number
  include_partial_messages?: boolean
  json_schema?: Record<string, unknown>
  permission_prompt_tool?: 'stdio' | 'none'
  entrypoint?: 'claude-gateway' | 'sdk-ts' | 'sdk-py' | 'sdk-cli'
  metadata?: unknown
}

/** A session as GET /v1/sessions/:id answers. */
export interface SessionInfo {
  id: string
  status: SessionStatus
  created_at: string
  updated_at: string
  last_seq: number
  clients: number
  holder: string | null
  pid: number | null
  turn_running: boolean
  pending_requests: number
  store: 'ok' | 'degraded'
  exit: ExitInfo | null
  options: Record<string, unknown>
  metadata: unknown
}

/** One page of GET /v1/sessions. */
export interface SessionList { sessions: SessionInfo[], next_cursor: string | null }

/** One page of GET /v1/sessions/:id/events: pass `next_after` back as `after` while `has_more`. */
export interface HistoryPage {
  events: RecordedFrame[]
  has_more: boolean
  next_after: number | null
}

/** A can_use_tool prompt waiting anywhere in the caller's sessions (GET /v1/permissions). */
export interface PendingPermission {
  session_id: string
  request_id: string
  tool_name: string
  display_name?: string
  summary: string
  seq: number
  created_at: string
  age_ms: number
}

/** A pending CLI control request of one session (GET /v1/sessions/:id/permissions). */
export interface PendingControlRequest {
  request_id: string
  subtype: string
  request: Record<string, unknown>
  seq: number
  created_at: string
}

/** POST /v1/sessions/:id/ws-ticket: a single-use credential for the upgrade. */
export interface WsTicket { ticket: string, expires_at: string }

/** What POST /v1/sessions/:id/permissions/:request_id answers. */
export interface AnswerResult { request_id: string, decision: string }
