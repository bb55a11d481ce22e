/**
 * A CLI line becomes a client frame by splicing `"seq":n` in as its first key
 * (src/session/frames.ts): whatever whitespace the line has around or inside
 * its braces, the frame parses to the line's object with the seq first, and a
 * line with a seq of its own gets the gateway's instead.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import fc from 'fast-check'
import { spliceSeq, withSeq } from '../../src/session/frames.js'

test('splices the seq in as the first key, whatever the whitespace', () => {
  const objects = fc.dictionary(fc.string().filter((k) => k !== 'seq'), fc.jsonValue({ maxDepth: 2 }))
  const space = fc.constantFrom('', ' ', '\t', '\r\n ')
  fc.assert(fc.property(objects, fc.constantFrom(undefined, 1), space, space, fc.nat(), (obj, indent, before, after, seq) => {
    const line = before + JSON.stringify(obj, null, indent) + after
    const frame = spliceSeq(line, seq)
    assert.deepEqual(JSON.parse(frame), { seq, ...JSON.parse(line) })
    assert.ok(frame.startsWith(`{"seq":${seq}`))
  }), { numRuns: 2000 })
})

test('empty objects, spaced or not', () => {
  for (const line of ['{}', '{ }', ' {\n} ', '{\t}']) assert.equal(spliceSeq(line, 3), '{"seq":3}', JSON.stringify(line))
})

test('a line with a seq of its own gets the gateway\'s', () => {
  const line = '{"type":"assistant","seq":999,"x":1}'
  assert.deepEqual(JSON.parse(withSeq(line, JSON.parse(line), 4)), { type: 'assistant', seq: 4, x: 1 })
})
