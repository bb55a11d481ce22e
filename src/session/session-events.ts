/**
 * What a session tells the outside world about, as plain method calls: the
 * moments an operator wants pushed (webhooks, src/webhooks/). Only the node
 * that runs a session's CLI calls these, once per event, so a cluster of
 * gateways reports each event once. Implementations must return at once and
 * never throw: they run inside the relay's path.
 */

/** Which session an event is about. */
export interface SessionRef {
  sessionId: string
  tenant: string
}

/** The CLI asked for permission to use a tool (`can_use_tool`). */
export interface PermissionRequested {
  requestId: string
  toolName: string
  /** The tool's input as the CLI sent it. */
  input: Record<string, unknown>
  /** The prompt's seq in the session's log. */
  seq: number
}

/** A permission prompt ended: answered, timed out, or cancelled by the CLI or its end. */
export interface PermissionResolved {
  requestId: string
  /** `allowed`, `denied`, `timed_out`, `cancelled` (as in the recorded `permission_resolved` frame). */
  decision: string
  /** The client id that answered, or null (a timeout, the CLI's own cancel, an HTTP caller without a client). */
  by: string | null
  seq: number
}

/** The CLI printed a `result`: a turn ended. */
export interface TurnFinished {
  /** The result's subtype: `success`, `error_during_execution`, `error_max_turns`, … */
  subtype: string
  isError: boolean
  durationMs: number | null
  totalCostUsd: number | null
  /** The result text (success only), as the CLI printed it. */
  result: string | null
  seq: number
}

/** The session's CLI ended: stopped by the gateway, or exited on its own. */
export interface SessionEnded {
  status: 'stopped' | 'exited'
  /** `stopped`, `exited`, `lost`, `spawn_failed` (the `exit.reason` of the status frame). */
  reason: string
  code: number | null
  signal: string | null
  seq: number
}

export interface SessionEvents {
  permissionRequested: (session: SessionRef, event: PermissionRequested) => void
  permissionResolved: (session: SessionRef, event: PermissionResolved) => void
  turnFinished: (session: SessionRef, event: TurnFinished) => void
  sessionEnded: (session: SessionRef, event: SessionEnded) => void
}

const nothing = (): void => {}

/** Tells nobody (no WEBHOOK_URL). */
export const noSessionEvents: SessionEvents = {
  permissionRequested: nothing,
  permissionResolved: nothing,
  turnFinished: nothing,
  sessionEnded: nothing
}
