/**
 * The one table of error codes. HTTP replies carry `{statusCode, code, message}`;
 * WebSocket `gateway`/`error` frames carry `{code, message}` from the same table;
 * close codes are listed in `closeCodes`. docs/PROTOCOL.md and docs/API.md
 * mirror both tables.
 */

export const errorTable = {
  // HTTP and WebSocket upgrade
  bad_request: { statusCode: 400, message: 'The request is not valid' },
  unauthorized: { statusCode: 401, message: 'Missing or invalid credentials' },
  forbidden_origin: { statusCode: 403, message: 'Origin not allowed' },
  forbidden_host: { statusCode: 403, message: 'Host header not allowed' },
  bypass_not_allowed: { statusCode: 403, message: 'permission_mode bypassPermissions is disabled by the operator (ALLOW_BYPASS_PERMISSIONS)' },
  broad_rule_not_allowed: { statusCode: 400, message: 'A rule allowing a whole shell tool is bypassPermissions for that tool (ALLOW_BYPASS_PERMISSIONS, PERMISSION_BROAD_RULE_TOOLS)' },
  control_not_allowed: { statusCode: 403, message: 'The gateway does not forward this control request (CLIENT_CONTROL_ALLOW, CLIENT_MCP_SERVER_TYPES)' },
  permission_update_not_allowed: { statusCode: 403, message: 'The answer grants more than clients may (PERMISSION_UPDATE_DESTINATIONS, PERMISSION_BROAD_RULE_TOOLS, directories outside the workspace)' },
  session_not_found: { statusCode: 404, message: 'No such session' },
  not_found: { statusCode: 404, message: 'No such route' },
  too_many_sessions: { statusCode: 503, message: 'The gateway has reached MAX_SESSIONS' },
  rate_limited: { statusCode: 429, message: 'Too many requests' },
  tenant_session_limit: { statusCode: 429, message: 'This tenant runs MAX_SESSIONS_PER_TENANT sessions already' },
  too_many_clients: { statusCode: 429, message: 'This session has MAX_CLIENTS_PER_SESSION clients already' },
  tenant_connection_limit: { statusCode: 429, message: 'This tenant has MAX_CONNECTIONS_PER_TENANT connections already' },
  payload_too_large: { statusCode: 413, message: 'Body too large' },
  unsupported_media_type: { statusCode: 415, message: 'The body is not application/json' },
  store_unavailable: { statusCode: 503, message: 'The event store is unavailable' },
  node_unavailable: { statusCode: 503, message: 'The gateway node running the session did not answer; try again' },
  shutting_down: { statusCode: 503, message: 'The gateway is shutting down' },
  internal: { statusCode: 500, message: 'Internal error' },
  // WebSocket frames (statusCode is what the HTTP answer path uses for the same condition)
  invalid_json: { statusCode: 400, message: 'The frame is not valid JSON' },
  invalid_frame: { statusCode: 400, message: 'The frame does not match the protocol' },
  binary_not_supported: { statusCode: 400, message: 'Binary frames are not supported; send JSON text' },
  not_holder: { statusCode: 409, message: 'Only the client holding the session may do that' },
  unknown_request: { statusCode: 404, message: 'No pending request has that request_id' },
  already_resolved: { statusCode: 409, message: 'That request was already answered or cancelled' },
  duplicate_request_id: { statusCode: 409, message: 'A request with that request_id is already in flight' },
  request_timeout: { statusCode: 504, message: 'The CLI did not answer the control request in time' },
  session_not_running: { statusCode: 409, message: 'The session has no running CLI' },
  session_elsewhere: { statusCode: 409, message: 'The session\'s CLI runs on another gateway node; send this there, or again once it has stopped' },
  cli_start_failed: { statusCode: 502, message: 'The CLI could not be started' },
  cli_output_rejected: { statusCode: 502, message: 'The CLI printed a line the gateway could not relay' },
  credential_refused: { statusCode: 401, message: 'The credential presented is not valid now, or names another tenant; the connection keeps the one it had' },
  store_overflow: { statusCode: 507, message: 'Events held in memory passed STORE_QUEUE_MAX; the oldest unsaved ones were dropped from history' }
} as const satisfies Record<string, { statusCode: number; message: string }>

export type ErrorCode = keyof typeof errorTable

/** An error with a code from the table; Fastify's error handler renders it. */
export class GatewayError extends Error {
  override name = 'GatewayError'
  readonly code: ErrorCode
  readonly statusCode: number

  constructor (code: ErrorCode, message?: string) {
    super(message ?? errorTable[code].message)
    this.code = code
    this.statusCode = errorTable[code].statusCode
  }

  toJSON (): { statusCode: number; code: ErrorCode; message: string } {
    return { statusCode: this.statusCode, code: this.code, message: this.message }
  }
}

/** WebSocket close codes the gateway uses. 1xxx are RFC 6455; 4xxx are ours. */
export const closeCodes = {
  /**
   * The gateway is shutting down or restarting, or the session moved to
   * another gateway node: reconnect (any node) with `?after=<last seq>` and
   * the stream resumes with no gap or duplicate.
   */
  serviceRestart: 1012,
  /** A message over WS_MAX_PAYLOAD_BYTES (set by ws itself). */
  tooBig: 1009,
  /** Unexpected server error. */
  internal: 1011,
  /** The client did not read fast enough; its backlog passed WS_MAX_BUFFERED_BYTES. Reconnect with ?after=. */
  slowConsumer: 4008,
  /**
   * RFC 6455's "Try Again Later": the event store could not serve the replay
   * this client asked for (`?after=`); nothing was skipped. Reconnect with the
   * same `?after=` once the hint in the hello (`retry_after_ms`) has passed.
   */
  tryAgainLater: 1013,
  /** The client kept sending frames far above WS_MAX_FRAMES_PER_SEC after being told. */
  flood: 4029,
  /**
   * The credential the connection was opened with no longer authenticates
   * for its tenant: the operator reloaded the credentials (SIGHUP) without
   * it. Reconnecting with it is refused (401); use a valid one.
   */
  credentialRevoked: 4401
} as const

/** The close code a WebSocket client gets for each way the gateway ends it (ClientPort.end). */
export const endCloseCodes = {
  slow_consumer: closeCodes.slowConsumer,
  store_unavailable: closeCodes.tryAgainLater,
  shutting_down: closeCodes.serviceRestart,
  session_moved: closeCodes.serviceRestart,
  credential_revoked: closeCodes.credentialRevoked,
  credential_expired: closeCodes.credentialRevoked
} as const
