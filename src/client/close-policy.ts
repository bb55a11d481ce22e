/**
 * What a close code means for the client (docs/PROTOCOL.md, Close codes):
 * resume, resume later, or stop. The gateway closes with 1011/1012/4008 when
 * a resume is the answer, 1013 when it must wait, and 4029 (flood) or
 * protocol-level codes when trying again would only repeat the refusal.
 */

export type CloseVerdict =
  /** Reconnect with after=<last seq> after the usual backoff. */
  | 'reconnect'
  /** Reconnect with the same after once the hello's retry_after_ms (or the backoff) has passed. */
  | 'retry_later'
  /** Do not reconnect: report an error and close. */
  | 'stop'

/** Codes after which retrying repeats the same refusal. */
const STOP = new Set([
  1002, // protocol error
  1003, // unsupported data
  1007, // invalid payload data
  1008, // policy violation
  1010, // mandatory extension
  4029 // frame flood: the gateway asked us to slow down; looping would flood again
])

export function closeVerdict (code: number): CloseVerdict {
  if (code === 1013) return 'retry_later'
  if (STOP.has(code)) return 'stop'
  // 4008 (slow consumer) is the gateway's own "resume from where you were"; other 4xxx are policy closes.
  if (code >= 4000 && code !== 4008) return 'stop'
  // 1000/1001 (a proxy or the peer going away), 1005/1006 (no close frame), 1009, 1011, 1012, 4008, …
  return 'reconnect'
}
