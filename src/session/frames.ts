/**
 * Builds the frames clients receive. CLI lines are relayed as the CLI wrote
 * them with `"seq"` spliced in as the first key, instead of being parsed and
 * re-serialised: cheaper, and byte-faithful to what the CLI printed.
 */

/** `{"seq":n,` + the rest of the CLI's line. Falls back to re-serialising if the line has its own `seq`. */
export function withSeq (line: string, parsed: Record<string, unknown>, seq: number): string {
  if (Object.hasOwn(parsed, 'seq')) return JSON.stringify({ ...parsed, seq })
  return spliceSeq(line, seq)
}

/** What a spliced frame starts with: `{"seq":n,`. */
export function seqPrefix (seq: number): string {
  return `{"seq":${seq},`
}

/** `{"seq":n,` + the rest of a line that is a JSON object without a `seq` of its own. */
export function spliceSeq (line: string, seq: number): string {
  // As the CLI prints them, lines have nothing to trim.
  const tight = line.charCodeAt(0) === 0x7b && line.charCodeAt(line.length - 1) === 0x7d
  const rest = (tight ? line.slice(1) : line.trim().slice(1)).trimStart()
  return rest.startsWith('}') ? `{"seq":${seq}}` : seqPrefix(seq) + rest
}

/**
 * The line when `spliceSeq(line, seq)` is `{"seq":seq,` + the line after its
 * `{` for any seq (a line as the CLI prints it, a key right after the brace),
 * else undefined: the frame's bytes can then be written from the line itself
 * (frame-bytes.ts).
 */
export function spliceSource (line: string): string | undefined {
  return line.charCodeAt(0) === 0x7b && line.charCodeAt(1) === 0x22 && line.charCodeAt(line.length - 1) === 0x7d ? line : undefined
}

/** A gateway frame (`type: "gateway"`), with a seq when it is recorded. */
export function gatewayFrame (subtype: string, fields: Record<string, unknown>, seq?: number): string {
  return JSON.stringify(seq === undefined
    ? { type: 'gateway', subtype, ...fields }
    : { type: 'gateway', subtype, seq, ...fields })
}

export function errorFrame (code: string, message: string, extra: Record<string, unknown> = {}): string {
  return gatewayFrame('error', { code, message, ...extra })
}

/** What a client that does not hold the session sees instead of a CLI control_request. */
export function pendingNotice (seq: number, requestId: string, request: Record<string, unknown>): string {
  const pick = (k: string): unknown => typeof request[k] === 'string' ? request[k] : undefined
  return gatewayFrame('request_pending', {
    request_id: requestId,
    request_subtype: request.subtype,
    tool_name: pick('tool_name'),
    display_name: pick('display_name'),
    description: pick('description')
  }, seq)
}

