/**
 * The check that lets the gateway relay bulk CLI lines without JSON.parse
 * (src/session/bulk-line.ts) must never pass a line JSON.parse refuses, nor
 * give a line a type other than the one clients will parse from it; and it
 * must recognise what the real CLI prints, or it saves nothing. Checked
 * against JSON.parse itself on generated documents, on mutations of them,
 * and on the recorded lines of CLI 2.1.332.
 */
import assert from 'node:assert/strict'
import { readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import fc from 'fast-check'
import { bulkType } from '../../src/session/bulk-line.js'

/** Nesting the pattern follows, the line's own object included. */
const DEPTH = 6

/** Nesting of a parsed value: a scalar 0, `{}` or `[]` 1, each level inside one more. */
function depth (value: unknown): number {
  if (typeof value !== 'object' || value === null) return 0
  const inner = Object.values(value as Record<string, unknown>).map(depth)
  return 1 + Math.max(0, ...inner)
}

function parse (text: string): { ok: true, value: unknown } | { ok: false } {
  try { return { ok: true, value: JSON.parse(text) } } catch { return { ok: false } }
}

const isObject = (v: unknown): boolean => typeof v === 'object' && v !== null && !Array.isArray(v)

/** `text` as the value of a bulk line's member: the grammar is checked through bulkType itself. */
const accepts = (text: string): boolean => bulkType(`{"type":"user","v":${text}}`) !== null

/** What the grammar must answer: a JSON value that, inside the line's object, is nested at most DEPTH levels. */
function expected (text: string): boolean {
  const p = parse(text)
  return p.ok && 1 + depth(p.value) <= DEPTH
}

/** JSON text of objects with every kind of value, compact or spaced as JSON allows. */
const documents = fc.tuple(
  fc.dictionary(fc.string(), fc.jsonValue({ depthSize: 'medium' })),
  fc.constantFrom(undefined, 1, '\t', '\r\n  ')
).map(([value, space]) => JSON.stringify(value, null, space))

test('accepts exactly the JSON of at most six levels that JSON.parse accepts', () => {
  fc.assert(fc.property(documents, (text) => accepts(text) === expected(text)), { numRuns: 3000 })
})

test('never accepts a mutated document that JSON.parse refuses', () => {
  const significant = ['"', '\\', ',', ':', '{', '}', '[', ']', ' ', '\t', '\n', '\u0000', '\u001f', '-', '0', '.', 'e', 'E', '+', 'u', 'x', 'n', 't', 'f']
  const mutated = fc.tuple(documents, fc.nat(), fc.constantFrom('insert', 'delete', 'replace'), fc.constantFrom(...significant))
    .map(([text, at, how, ch]) => {
      const i = text.length === 0 ? 0 : at % text.length
      if (how === 'insert') return text.slice(0, i) + ch + text.slice(i)
      if (how === 'delete') return text.slice(0, i) + text.slice(i + 1)
      return text.slice(0, i) + ch + text.slice(i + 1)
    })
  fc.assert(fc.property(mutated, (text) => !accepts(text) || expected(text)), { numRuns: 5000 })
})

test('the edges of the grammar, as JSON.parse has them', () => {
  const cases = [
    '{}', ' { } ', '{"a":[]}', '{"a":[1,2]}', '{"a":[1,]}', '{"a":[,1]}', '{"a":1,}', '{,"a":1}', '{"a":1 "b":2}',
    '{"a":01}', '{"a":-0}', '{"a":-}', '{"a":1.}', '{"a":.5}', '{"a":+1}', '{"a":1e5}', '{"a":1E+5}', '{"a":1e}',
    '{"a":NaN}', '{"a":tru}', '{"a":nulls}', "{'a':1}", '{"a":"\\u12"}', '{"a":"\\u12G4"}', '{"a":"\\ud800"}',
    '{"a":"\\/"}', '{"a":"\\x41"}', '{"a":"\t"}', '{"a":"\u007f\u2028"}', '{"a":1}//', '{"a":1}{}', '{"a":1}\n',
    '[{"a":1}]', '"{}"', '{"a":' + '['.repeat(5) + ']'.repeat(5) + '}', '{"a":' + '['.repeat(6) + ']'.repeat(6) + '}'
  ]
  for (const text of cases) assert.equal(accepts(text), expected(text), text)
})

test('gives a line the type clients will parse from it, or leaves it to the parse', () => {
  const line = (rest: string): string => `{"type":"assistant"${rest}}`
  assert.equal(bulkType(line(',"message":{"content":[{"type":"text","text":"hi"}]}')), 'assistant')
  assert.equal(bulkType('{"type":"user","message":{"seq":1,"error":"nested keys are only data"}}'), 'user')
  assert.equal(bulkType('{"type":"stream_event","event":{"type":"message_stop"}}'), 'stream_event')
  assert.equal(bulkType('{"type":"user"}'), 'user')
  const parsed: Array<[string, string]> = [
    [line(',"type":"control_request","request_id":"x"'), 'a second type: JSON.parse keeps the last'],
    [line(',"t\\u0079pe":"result"'), 'an escaped second type'],
    [line(',"seq":7'), 'a seq of its own, replaced by the parse path'],
    [line(',"s\\u0065q":7'), 'an escaped seq'],
    [line(',"error":"authentication_failed"'), 'an error cli-problems reads'],
    ['{"message":{},"type":"assistant"}', 'type not first'],
    ['{ "type":"assistant"}', 'spaced before type'],
    ['{"type":"result","subtype":"success"}', 'another type'],
    ['{"type":"system","subtype":"init"}', 'another type'],
    ['{"type":"assistantx"}', 'another type'],
    [line(',"a":' + '['.repeat(6) + ']'.repeat(6)), 'deeper than the pattern'],
    [line(',"a":"' + 'x'.repeat(70_000) + '"'), 'longer than MAX_CHARS'],
    [line(',"a":"\u0001"'), 'not JSON'],
    [line(','), 'not JSON']
  ]
  for (const [text, why] of parsed) assert.equal(bulkType(text), null, why)
})

test('whatever it recognises, JSON.parse gives the same type (generated bulk-shaped lines)', () => {
  const lines = fc.tuple(
    fc.constantFrom('assistant', 'user', 'stream_event', 'result', 'control_request'),
    fc.array(fc.tuple(fc.constantFrom('type', 'seq', 'error', 'message', 'uuid', 't\\u0079pe', 'x'), fc.jsonValue({ maxDepth: 3 })), { maxLength: 4 })
  ).map(([type, members]) => `{"type":"${type}"` + members.map(([k, v]) => `,"${k}":${JSON.stringify(v) ?? 'null'}`).join('') + '}')
  fc.assert(fc.property(lines, (text) => {
    const type = bulkType(text)
    if (type === null) return true
    const p = parse(text)
    if (!p.ok || !isObject(p.value)) return false
    const value = p.value as Record<string, unknown>
    return value.type === type && !Object.hasOwn(value, 'seq') && !Object.hasOwn(value, 'error')
  }), { numRuns: 3000 })
})

test('recognises the bulk lines the real CLI prints (recorded fixtures of CLI 2.1.332)', () => {
  const dir = join(import.meta.dirname, '..', 'fixtures', 'recorded', 'claude-code-2.1.332')
  let bulk = 0
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.stdout.ndjson'))) {
    for (const text of readFileSync(join(dir, file), 'utf8').split('\n').filter((l) => l !== '')) {
      const msg = JSON.parse(text) as Record<string, unknown>
      const relayable = ['assistant', 'user', 'stream_event'].includes(String(msg.type)) && !Object.hasOwn(msg, 'error')
      assert.equal(bulkType(text), relayable ? msg.type : null, `${file}: ${text.slice(0, 120)}`)
      if (relayable) bulk++
    }
  }
  assert.ok(bulk >= 30, `only ${bulk} bulk lines in the recordings`)
})
