/**
 * Recognises, without parsing, the CLI lines a session only numbers, stores
 * and relays: `assistant`, `user` and `stream_event` (most of what a turn
 * prints). The session needs nothing from them but their type, yet checked
 * them with `JSON.parse`, which built every object and string of the line to
 * throw it away: at saturation a quarter of the gateway's busy time
 * (docs/PERFORMANCE.md §15).
 *
 * The check is one regular expression of JSON's grammar, nesting bounded by
 * DEPTH, run by V8's compiled regexp engine: it allocates nothing and took
 * about 0.48 µs on 574-character lines against 1.45 µs for `JSON.parse`.
 * A line it accepts is a JSON object that `JSON.parse` accepts too (property
 * tested in test/unit/bulk-line.test.ts). A line it does not recognise goes
 * the parsing way, which rejects what is not JSON: deeper, longer than
 * MAX_CHARS, another type, `type` not the first key, or a top-level key that
 * is escaped or is `type` again, `seq` or `error`. So a client still never
 * receives a frame that is not a JSON object, and what the session reads
 * from lines (control requests, results, `system/init`, `assistant` errors)
 * is read from them parsed, as before.
 */

/**
 * Nesting the pattern follows (the line's object is level 1; the CLI's bulk
 * lines use 3 to 5). Each level doubles the pattern: at 7 (32 KB of pattern)
 * it ran slower than JSON.parse.
 */
const DEPTH = 6

/**
 * Longer lines are parsed: the regexp engine's backtrack stack grows with the
 * line's members and escapes, and at this length the parse is not what a line
 * costs anyway.
 */
const MAX_CHARS = 64 * 1024

const WS = '[ \\t\\n\\r]*'
/** A JSON string: no raw control characters, only JSON's escapes (an unrolled loop: runs of plain characters in one step). */
const STRING = String.raw`"[^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*"`
const NUMBER = '-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?(?:[eE][+-]?[0-9]+)?'
const LITERAL = 'true|false|null'

/**
 * Members of an object whose values match `value`. After each member comes
 * either a comma and the next key or the closing brace, so a trailing comma
 * or two members without one fail; `{}` is zero members.
 */
function object (value: string): string {
  return `\\{${WS}(?:${STRING}${WS}:${WS}${value}${WS}(?:,${WS}(?=")|(?=\\})))*\\}`
}

/** Elements of an array, with the same rule: a comma must be followed by an element. */
function array (value: string): string {
  return `\\[${WS}(?:${value}${WS}(?:,${WS}(?=[^\\]])|(?=\\])))*\\]`
}

/** A JSON value nested at most `depth` levels (0: no object or array). */
function value (depth: number): string {
  if (depth === 0) return `(?:${STRING}|${NUMBER}|${LITERAL})`
  const inner = value(depth - 1)
  return `(?:${STRING}|${NUMBER}|${LITERAL}|${object(inner)}|${array(inner)})`
}

/**
 * A top-level key other than `type`, `seq` and `error`, written without
 * escapes. JSON.parse keeps the last of duplicate keys, so a second `type`
 * (or `"t\\u0079pe"`) would make the line another type for clients than for
 * the gateway; a `seq` of its own must be replaced (frames.ts withSeq); an
 * `error` is what cli-problems.ts reads. Lines with any of them are parsed.
 */
const OTHER_KEY = String.raw`(?!"(?:type|seq|error)")"[^"\\\x00-\x1f]*"`

/** A bulk line: `type` first, then members whose keys are plain and none of the above. */
const BULK_LINE = new RegExp(`^\\{"type":"(?:stream_event|assistant|user)"(?:,${WS}${OTHER_KEY}${WS}:${WS}${value(DEPTH - 1)}${WS})*\\}${WS}$`)

export type BulkType = 'assistant' | 'user' | 'stream_event'

/** Where the type's name starts: after `{"type":"`. */
const TYPE_AT = 9

/**
 * The line's type when it is one the session relays without reading it and
 * the line is certainly a JSON object; null when it must be parsed.
 */
export function bulkType (line: string): BulkType | null {
  if (line.length > MAX_CHARS) return null
  try {
    if (!BULK_LINE.test(line)) return null
  } catch {
    // The regexp engine's stack ran out (not seen below MAX_CHARS): the parse decides.
    return null
  }
  const c = line.charCodeAt(TYPE_AT)
  return c === 0x73 ? 'stream_event' : c === 0x61 ? 'assistant' : 'user'
}
