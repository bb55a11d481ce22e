/**
 * The client's error types. The gateway's codes come from its one table
 * (src/errors.ts, docs/API.md); these classes carry them to the caller
 * without importing server code into browser bundles.
 */

/** The gateway answered an HTTP request (or refused a WebSocket upgrade) with `{statusCode, code, message}`. */
export class GatewayRequestError extends Error {
  override name = 'GatewayRequestError'
  readonly statusCode: number
  /** The gateway's error code (`unauthorized`, `session_not_found`, …), or `http_<status>` for a body without one. */
  readonly code: string
  /** Seconds from a 429's `retry-after` header, when given. */
  readonly retryAfterSeconds: number | null

  constructor (statusCode: number, code: string, message: string, retryAfterSeconds: number | null = null) {
    super(message)
    this.statusCode = statusCode
    this.code = code
    this.retryAfterSeconds = retryAfterSeconds
  }
}

/** A control request (interrupt, set_model, …) was answered with an error, or could not be answered. */
export class ControlRequestError extends Error {
  override name = 'ControlRequestError'
  /** The gateway's or CLI's code (`not_holder`, `invalid_frame`, `request_timeout`, …), `connection_closed` when close() ended it, `frame_too_large` when the gateway closed the connection (1009) over it. */
  readonly code: string
  readonly requestId: string

  constructor (requestId: string, code: string, message: string) {
    super(message)
    this.code = code
    this.requestId = requestId
  }
}

/** Why a connection stopped by itself: a policy close code, or too many failed attempts. */
export class ConnectionError extends Error {
  override name = 'ConnectionError'
  /**
   * `policy_close` (the gateway closed with a code not to retry), `gave_up`
   * (reconnect.maxAttempts), `reconnect_disabled` (a drop with reconnect:
   * false), `frame_too_large` (1009: a frame of ours was over
   * WS_MAX_PAYLOAD_BYTES; the connection resumes), `closed` (send() after
   * close()).
   */
  readonly code: 'policy_close' | 'gave_up' | 'reconnect_disabled' | 'frame_too_large' | 'closed'
  /** The WebSocket close code that led here, when there was one. */
  readonly closeCode: number | null

  constructor (code: ConnectionError['code'], message: string, closeCode: number | null = null) {
    super(message)
    this.code = code
    this.closeCode = closeCode
  }
}
