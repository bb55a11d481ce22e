// parseClientFrame (src/protocol/client-frames.ts): what a WebSocket client may send.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { parseClientFrame } from '../../src/protocol/client-frames.js'

function ok (text: string): unknown {
  const r = parseClientFrame(text)
  assert.ok(r.ok, `expected ${text} to pass, got ${r.ok ? '' : `${r.code}: ${r.message}`}`)
  return r.frame
}

function refused (text: string): { code: string, message: string } {
  const r = parseClientFrame(text)
  assert.ok(!r.ok, `expected ${text} to be refused`)
  assert.equal(typeof r.message, 'string')
  assert.ok(r.message.length > 0)
  return { code: r.code, message: r.message }
}

describe('parseClientFrame', () => {
  it('answers invalid_json for text that is not JSON', () => {
    for (const text of ['', 'not json', '{"type":"user"', '{type:"user"}', "{'a':1}", '{"a":1}\n{"b":2}']) {
      assert.equal(refused(text).code, 'invalid_json', text)
    }
  })

  it('answers invalid_frame for JSON that is not a known frame', () => {
    const frames = [
      'null', '42', '"user"', '[]', '{}',
      '{"type":"nope"}',
      '{"type":"system","subtype":"init"}',
      '{"type":"user"}',
      '{"type":"user","message":{"role":"assistant","content":"hi"}}',
      '{"type":"user","message":{"role":"user","content":[]}}',
      '{"type":"user","message":{"role":"user","content":42}}',
      '{"type":"user","message":{"role":"user","content":"hi"},"uuid":""}',
      '{"type":"control_request","request":{"subtype":"interrupt"}}',
      '{"type":"control_request","request_id":"r1","request":{"subtype":"initialize"}}',
      '{"type":"control_request","request_id":"r1","request":{"subtype":"set_permission_mode","mode":"yolo"}}',
      '{"type":"control_response","response":{"subtype":"success"}}',
      '{"type":"control_response","response":{"subtype":"maybe","request_id":"r1"}}'
    ]
    for (const text of frames) assert.equal(refused(text).code, 'invalid_frame', text)
  })

  it('passes a user frame with string or block content', () => {
    assert.deepEqual(ok('{"type":"user","message":{"role":"user","content":"hello"}}'), {
      type: 'user', message: { role: 'user', content: 'hello' }
    })
    const blocks = { type: 'user', message: { role: 'user', content: [{ type: 'text', text: 'hi' }, { type: 'image', source: { type: 'base64', data: 'AA==' } }] }, uuid: 'u-1', parent_tool_use_id: null }
    assert.deepEqual(ok(JSON.stringify(blocks)), blocks)
  })

  it('drops unknown top-level fields of a user frame', () => {
    const frame = ok('{"type":"user","message":{"role":"user","content":"hi"},"cwd":"/etc","extra_flag":"--dangerously-skip-permissions"}')
    assert.deepEqual(frame, { type: 'user', message: { role: 'user', content: 'hi' } })
  })

  it('passes control requests, control responses and keep_alive', () => {
    const interrupt = { type: 'control_request', request_id: 'r1', request: { subtype: 'interrupt' } }
    assert.deepEqual(ok(JSON.stringify(interrupt)), interrupt)
    const setModel = { type: 'control_request', request_id: 'r2', request: { subtype: 'set_model', model: 'opus' } }
    assert.deepEqual(ok(JSON.stringify(setModel)), setModel)
    const mode = { type: 'control_request', request_id: 'r3', request: { subtype: 'set_permission_mode', mode: 'plan' } }
    assert.deepEqual(ok(JSON.stringify(mode)), mode)
    const other = { type: 'control_request', request_id: 'r4', request: { subtype: 'mcp_status', extra: 1 } }
    assert.deepEqual(ok(JSON.stringify(other)), other)
    const allow = { type: 'control_response', response: { subtype: 'success', request_id: 'p1', response: { behavior: 'allow', updatedInput: {} } } }
    assert.deepEqual(ok(JSON.stringify(allow)), allow)
    const error = { type: 'control_response', response: { subtype: 'error', request_id: 'p2', error: 'no' } }
    assert.deepEqual(ok(JSON.stringify(error)), error)
    assert.deepEqual(ok('{"type":"keep_alive"}'), { type: 'keep_alive' })
  })

  it('property: never throws, and whatever passes re-serialises to one line', () => {
    const candidate = fc.oneof(
      fc.string(),
      fc.jsonValue().map((v) => JSON.stringify(v)),
      fc.record({ type: fc.constantFrom('user', 'control_request', 'control_response', 'keep_alive', 'x'), message: fc.jsonValue(), request_id: fc.string(), request: fc.jsonValue(), response: fc.jsonValue() }, { requiredKeys: ['type'] }).map((v) => JSON.stringify(v)),
      fc.string({ unit: 'grapheme' }).map((s) => JSON.stringify({ type: 'user', message: { role: 'user', content: s } }))
    )
    fc.assert(fc.property(candidate, (text) => {
      const r = parseClientFrame(text)
      if (!r.ok) {
        assert.ok(r.code === 'invalid_json' || r.code === 'invalid_frame')
        return
      }
      const line = JSON.stringify(r.frame)
      assert.ok(!line.includes('\n') && !line.includes('\r'))
      assert.ok(['user', 'control_request', 'control_response', 'keep_alive'].includes(r.frame.type))
    }), { numRuns: 500 })
  })
})
