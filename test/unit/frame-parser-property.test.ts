/**
 * Property tests (fast-check) for `parseClientFrame`, the only door from a
 * WebSocket client to the CLI's stdin:
 * - it never throws, whatever the text, and answers either a frame or a typed
 *   error code (`invalid_json` / `invalid_frame`);
 * - anything it accepts re-serialises (JSON.stringify, as the gateway writes
 *   it to stdin) to one line without `\n` or `\r` that parses back to the same
 *   JSON data, also once the gateway added its own fields;
 * - deeply nested input is refused instead of overflowing the stack later.
 * Seeds: set FC_SEED to replay a failure; FC_RUNS to run more cases.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { MAX_JSON_DEPTH, parseClientFrame, permissionModes } from '../../src/protocol/client-frames.js'

const runs = Number(process.env.FC_RUNS ?? 300)
const params = { numRuns: runs, ...(process.env.FC_SEED === undefined ? {} : { seed: Number(process.env.FC_SEED) }) }

/** Equal as JSON data: same own keys and values, numbers by value (-0 is 0), prototypes ignored. */
function jsonEqual (a: unknown, b: unknown): boolean {
  if (typeof a === 'number' && typeof b === 'number') return a === b
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return a === b
  if (Array.isArray(a) !== Array.isArray(b)) return false
  const ka = Object.keys(a)
  const kb = Object.keys(b)
  return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && jsonEqual((a as any)[k], (b as any)[k]))
}

/** The checks every answer of parseClientFrame must pass; returns the accepted frame, if any. */
function check (text: string): Record<string, unknown> | null {
  let result: ReturnType<typeof parseClientFrame>
  assert.doesNotThrow(() => { result = parseClientFrame(text) })
  const r = result!
  if (!r.ok) {
    assert.ok(r.code === 'invalid_json' || r.code === 'invalid_frame', r.code)
    assert.equal(typeof r.message, 'string')
    assert.ok(r.message.length > 0 && r.message.length < 1000)
    return null
  }
  const parsed = r.frame as Record<string, unknown>
  // Unknown types come wrapped, the frame as sent inside.
  const frame = parsed.type === 'other_type' ? parsed.value as Record<string, unknown> : parsed
  assert.equal(typeof frame.type, 'string')
  // What the session writes to the CLI: the frame itself, or a user frame with the gateway's fields.
  const written = [frame, { ...frame, session_id: '3f1c8a52-5a8e-4c57-9d1b-0d6f2a7c9e11', parent_tool_use_id: (frame as any).parent_tool_use_id ?? null }]
  for (const message of written) {
    const line = JSON.stringify(message)
    assert.equal(typeof line, 'string')
    assert.ok(!/[\n\r]/.test(line), 'one line')
    assert.ok(jsonEqual(JSON.parse(line), message), `round trip of ${line.slice(0, 200)}`)
  }
  return frame
}

// ---- arbitraries

const text = fc.string({ unit: 'binary', maxLength: 40 }) // full Unicode, lone surrogates excluded; includes \n, \r, U+2028
const anyText = fc.oneof(text, fc.string({ unit: 'binary-ascii', maxLength: 40 }), fc.constantFrom('', '\n', '\r\n', '\u2028\u2029', '\u0000', '"', '\\', '}\n{'))
const requestId = fc.oneof(fc.uuid(), anyText, fc.string({ minLength: 195, maxLength: 205 }), fc.integer(), fc.constant(null))
const extra = fc.dictionary(fc.oneof(fc.string({ maxLength: 8 }), fc.constantFrom('__proto__', 'constructor', 'type', 'seq', 'session_id')), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 3 })
const withExtra = <T extends object>(base: fc.Arbitrary<T>): fc.Arbitrary<T> =>
  fc.tuple(base, fc.option(extra, { nil: undefined })).map(([b, e]) => (e === undefined ? b : { ...e, ...b }))

const block = withExtra(fc.record({ type: fc.oneof(fc.constantFrom('text', 'image', 'tool_result', ''), anyText), text: anyText }, { requiredKeys: [] }))
const userFrame = withExtra(fc.record({
  type: fc.constant('user'),
  message: fc.record({ role: fc.constantFrom('user', 'user', 'assistant'), content: fc.oneof(anyText, fc.array(block, { maxLength: 3 }), fc.jsonValue({ maxDepth: 2 })) }, { requiredKeys: [] }),
  uuid: requestId,
  parent_tool_use_id: fc.oneof(anyText, fc.constant(null)),
  session_id: anyText
}, { requiredKeys: ['type'] }))
const request = fc.oneof(
  fc.constant({ subtype: 'interrupt' }),
  fc.record({ subtype: fc.constant('set_model'), model: fc.oneof(anyText, fc.constant(null), fc.integer()) }, { requiredKeys: ['subtype'] }),
  fc.record({ subtype: fc.constant('set_permission_mode'), mode: fc.oneof(fc.constantFrom(...permissionModes), anyText) }, { requiredKeys: ['subtype'] }),
  fc.record({ subtype: fc.constant('set_max_thinking_tokens'), max_thinking_tokens: fc.oneof(fc.integer(), fc.double(), fc.constant(null), fc.constant(-0)) }, { requiredKeys: ['subtype'] }),
  withExtra(fc.record({ subtype: fc.oneof(fc.constantFrom('initialize', 'mcp_status', 'mcp_message', 'apply_flag_settings', 'can_use_tool'), anyText) })),
  fc.jsonValue({ maxDepth: 2 })
)
const controlRequest = withExtra(fc.record({ type: fc.constant('control_request'), request_id: requestId, request }, { requiredKeys: ['type'] }))
const controlResponse = withExtra(fc.record({
  type: fc.constant('control_response'),
  response: withExtra(fc.record({
    subtype: fc.oneof(fc.constantFrom('success', 'error'), anyText),
    request_id: requestId,
    response: fc.oneof(fc.dictionary(fc.string({ maxLength: 10 }), fc.jsonValue({ maxDepth: 3 })), fc.jsonValue({ maxDepth: 2 })),
    error: fc.oneof(anyText, fc.integer())
  }, { requiredKeys: [] }))
}, { requiredKeys: ['type'] }))
const keepAlive = withExtra(fc.constant({ type: 'keep_alive' }))
const frameLike = fc.oneof(userFrame, controlRequest, controlResponse, keepAlive)

describe('parseClientFrame properties', () => {
  it('never throws on any string, and answers a frame or a typed error', () => {
    fc.assert(fc.property(fc.oneof(fc.string({ unit: 'binary' }), fc.string({ unit: 'grapheme' }), fc.string({ unit: 'binary-ascii' }), fc.string()), (s) => { check(s) }), params)
  })

  it('never throws on any JSON value', () => {
    fc.assert(fc.property(fc.jsonValue(), (v) => { check(JSON.stringify(v)) }), params)
  })

  it('accepts many valid-ish frames, and every accepted one re-serialises to one line that parses back equal', () => {
    let accepted = 0
    fc.assert(fc.property(frameLike, (f) => { if (check(JSON.stringify(f)) !== null) accepted++ }), { ...params, numRuns: runs * 3 })
    assert.ok(accepted > runs / 5, `only ${accepted} of ${runs * 3} frames were accepted: the arbitraries miss the valid shapes`)
  })

  it('never throws on valid frames cut, spliced or with characters changed', () => {
    const mutated = fc.tuple(frameLike, fc.nat(), fc.nat({ max: 20 }), fc.string({ maxLength: 4 })).map(([f, at, cut, insert]) => {
      const s = JSON.stringify(f)
      const i = at % (s.length + 1)
      return s.slice(0, i) + insert + s.slice(Math.min(s.length, i + cut))
    })
    fc.assert(fc.property(mutated, (s) => { check(s) }), params)
  })

  it('refuses nesting deeper than MAX_JSON_DEPTH (it would overflow JSON.stringify on the way to the CLI) and accepts up to it', () => {
    const nested = (depth: number): string => `{"type":"user","message":{"role":"user","content":[{"type":"text","x":${'['.repeat(depth)}${']'.repeat(depth)}}]}}`
    // frame, message, content array and block are 4 levels; the arrays add the rest.
    const ok = parseClientFrame(nested(MAX_JSON_DEPTH - 4))
    assert.equal(ok.ok, true)
    check(nested(MAX_JSON_DEPTH - 4))
    for (const depth of [MAX_JSON_DEPTH - 3, 1000, 100_000, 400_000]) {
      const r = parseClientFrame(nested(depth))
      assert.equal(r.ok, false, `depth ${depth}`)
      assert.equal(!r.ok && r.code, 'invalid_frame')
    }
    for (const deep of [`${'{"a":'.repeat(50_000)}1${'}'.repeat(50_000)}`, `{"type":"control_request","request_id":"x","request":{"subtype":"custom","v":${'['.repeat(50_000)}${']'.repeat(50_000)}}}`]) {
      assert.equal(parseClientFrame(deep).ok, false)
    }
  })

  it('keeps __proto__ keys from changing any prototype but the frame\'s own objects', () => {
    const r = parseClientFrame('{"type":"user","message":{"role":"user","content":[{"type":"text","text":"x","__proto__":{"polluted":1}}]},"__proto__":{"isAdmin":true}}')
    assert.equal(r.ok, true)
    assert.equal(({} as any).polluted, undefined)
    assert.equal(({} as any).isAdmin, undefined)
    check('{"type":"control_request","request_id":"x","request":{"subtype":"custom","__proto__":{"subtype":"initialize"}}}')
  })
})
