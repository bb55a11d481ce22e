/**
 * What the gateway sends, as a CLI host must see it: the CLI's own line
 * without the gateway's `seq`. The gateway splices `{"seq":n,` in front of
 * the CLI's bytes (src/session/frames.ts), so taking it off gives back the
 * line the CLI printed, byte for byte, without re-serialising it.
 */
import { isRecord } from '../protocol/is-record.js'

const SPLICED = /^\{"seq":\d+,/
const ONLY_SEQ = /^\{"seq":\d+\}$/

/** The frame without its top-level `seq`, as one line (no newline). */
export function withoutSeq (text: string, parsed: Record<string, unknown>): string {
  if (!Object.hasOwn(parsed, 'seq')) return text
  const spliced = SPLICED.exec(text)
  if (spliced !== null) return '{' + text.slice(spliced[0].length)
  if (ONLY_SEQ.test(text)) return '{}'
  // Not spliced (the CLI's line had its own seq and was re-serialised): the rest is JSON anyway.
  const { seq: _seq, ...rest } = parsed
  return JSON.stringify(rest)
}

/** `request_id` of a control_response (inside `response`) or of a control_request / cancel (top level). */
export function requestIdOf (frame: Record<string, unknown>): string | null {
  if (frame.type === 'control_response') {
    const inner = isRecord(frame.response) ? frame.response.request_id : undefined
    return typeof inner === 'string' ? inner : null
  }
  return typeof frame.request_id === 'string' ? frame.request_id : null
}

/** The gateway's refusal of a request id it still has in flight (PROTOCOL.md: `code`, or the CLI's `error_code`). */
export function isDuplicateRefusal (frame: Record<string, unknown>): boolean {
  const response = isRecord(frame.response) ? frame.response : {}
  return response.subtype === 'error' && (response.code === 'duplicate_request_id' || response.error_code === 'duplicate_request_id')
}

/** A received WebSocket message as text. */
export function rawText (data: Buffer | ArrayBuffer | Buffer[]): string {
  if (Buffer.isBuffer(data)) return data.toString('utf8')
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8')
  return Buffer.from(data).toString('utf8')
}
