/**
 * Types of the frames a session's WebSocket carries (docs/PROTOCOL.md is the
 * truth). CLI frames are the Agent SDK's own types, imported for types only
 * so nothing of the SDK is loaded at run time; the gateway's frames are a
 * union discriminated on `subtype`. Frames the gateway records carry `seq`.
 */
import type { SDKControlRequest, SDKControlResponse, SDKMessage, SDKUserMessage } from '@anthropic-ai/claude-agent-sdk'

/** A block of a user message's content (text, image, document, tool_result, …). */
export type ContentBlock = Exclude<SDKUserMessage['message']['content'], string>[number]

/** The CLI withdrew a control request it sent. */
export interface ControlCancelRequest { type: 'control_cancel_request', request_id: string }

/** Anything the CLI prints, as the SDK types it (the gateway relays it unchanged). */
export type CliFrame = SDKMessage | SDKControlRequest | SDKControlResponse | ControlCancelRequest

/** The session's CLI process changed status. */
export interface StatusFrame {
  type: 'gateway'
  subtype: 'status'
  status: SessionStatus
  pid: number | null
  exit?: ExitInfo | null
}

/** What an observer gets in place of a CLI control request. */
export interface RequestPendingFrame {
  type: 'gateway'
  subtype: 'request_pending'
  request_id: string
  request_subtype: string
  tool_name?: string
  display_name?: string
  description?: string
}

/** A can_use_tool prompt ended. `by` is a client id, `http:<tenant>` or null. */
export interface PermissionResolvedFrame {
  type: 'gateway'
  subtype: 'permission_resolved'
  request_id: string
  request_subtype: 'can_use_tool'
  decision: 'allowed' | 'denied' | 'timed_out' | 'cancelled'
  by: string | null
}

/** Another CLI control request (hook callback, MCP message, …) ended. */
export interface RequestResolvedFrame {
  type: 'gateway'
  subtype: 'request_resolved'
  request_id: string
  request_subtype: string
  decision: 'answered' | 'timed_out' | 'cancelled'
  by?: string | null
}

/** The CLI printed a line the gateway could not relay. */
export interface CliOutputRejectedFrame {
  type: 'gateway'
  subtype: 'cli_output_rejected'
  reason: 'invalid_json' | 'not_an_object' | 'too_large'
  bytes: number
  preview: string
}

/** A user message as written to the CLI (recorded before the CLI's answer to it). */
export interface UserMessageFrame {
  type: 'gateway'
  subtype: 'user_message'
  client_id: string
  uuid?: string
  message: { role: 'user', content: string | ContentBlock[] }
  parent_tool_use_id: string | null
}

/** The CLI cannot work: not logged in, or the API is unreachable (the last four fields only then). */
export interface CliProblemFrame {
  type: 'gateway'
  subtype: 'cli_problem'
  code: 'cli_not_authenticated' | 'api_unreachable'
  message: string
  hint: string
  attempt?: number
  max_retries?: number
  error?: string
  error_status?: number | null
}

/** Gateway frames the session records (they carry `seq`). */
export type RecordedGatewayFrame = StatusFrame | RequestPendingFrame | PermissionResolvedFrame | RequestResolvedFrame |
CliOutputRejectedFrame | UserMessageFrame | CliProblemFrame

/** A frame with its place in the session's history. */
export type Recorded<T> = T & { seq: number }

/** Every frame the 'frame' event delivers: exactly once each, in seq order. */
export type RecordedFrame = Recorded<CliFrame | RecordedGatewayFrame>

/** The first frame on every connection. */
export interface HelloFrame {
  type: 'gateway'
  subtype: 'hello'
  session_id: string
  client_id: string
  role: Role
  holder: string | null
  status: SessionStatus
  last_seq: number
  resume: 'none' | 'ok' | 'gap' | 'unavailable'
  oldest_seq: number | null
  store: 'ok' | 'degraded'
  pending_requests: string[]
  missing_from?: number
  missing_to?: number
  missing?: Array<[number, number]>
  retry_after_ms?: number
}

/** Who holds the session changed; `role` is this client's role now. */
export interface HolderFrame { type: 'gateway', subtype: 'holder', holder: string | null, role: Role }

/** The event store stopped or resumed answering. */
export interface StoreFrame {
  type: 'gateway'
  subtype: 'store'
  state: 'ok' | 'degraded'
  missing_from?: number
  missing_to?: number
  dropped?: number
}

/** In a replay, just before the first frame after seqs history no longer has. */
export interface GapFrame { type: 'gateway', subtype: 'gap', missing_from: number, missing_to: number }

/** Something this client sent was refused (the connection stays open). */
export interface GatewayErrorFrame {
  type: 'gateway'
  subtype: 'error'
  code: string
  message: string
  request_id?: string
  after?: number
  missing_from?: number
  missing_to?: number
  dropped?: number
}

/** When this connection's credential ends it (ISO 8601; null: nothing does), after hello and after each `credential` frame sent. */
export interface CredentialFrame { type: 'gateway', subtype: 'credential', expires_at: string | null }

/** The gateway's heartbeat (or a CLI keep_alive, which may carry fields). */
export interface KeepAliveFrame { type: 'keep_alive', [field: string]: unknown }

/**
 * Per-connection frames: not recorded, no `seq` (a refused control request's
 * answer is one of them). Also, with its old seq, a pending control_request
 * the gateway hands out again to a new holder: its seq was already
 * delivered as a 'frame', so it comes here instead.
 */
export type LiveFrame = HelloFrame | HolderFrame | StoreFrame | GapFrame | CredentialFrame | GatewayErrorFrame | KeepAliveFrame | SDKControlResponse | Recorded<SDKControlRequest>

export type Role = 'controller' | 'observer'

/** The gateway's session status (the CLI process, not the turn). */
export type SessionStatus = 'starting' | 'running' | 'stopping' | 'stopped' | 'exited'

/** Why a CLI process ended. */
export interface ExitInfo {
  code: number | null
  signal: string | null
  stderr_tail?: string[]
  reason: string
  at: string
  error?: string
  /** Processes of the CLI (it or its tools) the kernel killed at its memory limit. */
  oom_kills?: number
}
