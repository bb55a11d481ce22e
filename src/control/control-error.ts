/**
 * The answer to a client control_request the gateway refuses: a
 * `control_response` error carrying the request's own `request_id`, as the CLI
 * would answer, so an SDK waiting on that id gets its answer instead of
 * waiting for ever. `code` is the gateway's error code (src/errors.ts);
 * `error_code` repeats it under the CLI's own field name, which the Agent SDK
 * reads into its error. Sent to the requesting client only, never recorded.
 */
import type { ErrorCode } from '../errors.js'

export function controlErrorFrame (requestId: string, code: ErrorCode, message: string): string {
  return JSON.stringify({
    type: 'control_response',
    response: { subtype: 'error', request_id: requestId, error: message, code, error_code: code }
  })
}
