// parseClientFrame (src/protocol/client-frames.ts): what a WebSocket client may send.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { MAX_JSON_DEPTH, parseClientFrame, permissionAnswer } from '../../src/protocol/client-frames.js'

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
      '{"type":""}', '{"type":42}',
      '{"type":"user"}',
      '{"type":"user","message":{"role":"assistant","content":"hi"}}',
      '{"type":"user","message":{"role":"user","content":[]}}',
      '{"type":"user","message":{"role":"user","content":42}}',
      '{"type":"user","message":{"role":"user","content":"hi"},"uuid":""}',
      '{"type":"control_request","request":{"subtype":"interrupt"}}',
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

  it('keeps unknown fields of a user frame (the SDK\'s priority, shouldQuery, isSynthetic, timestamp, …)', () => {
    const sent = { type: 'user', message: { role: 'user', content: 'hi', extra: 1 }, priority: 'next', shouldQuery: false, isSynthetic: true, timestamp: '2026-01-01T00:00:00Z', newer_sdk_field: { a: [1] } }
    assert.deepEqual(ok(JSON.stringify(sent)), sent)
  })

  it('passes initialize, extra fields on known subtypes, control_cancel_request and unknown types as sent', () => {
    const init = { type: 'control_request', request_id: 'r1', request: { subtype: 'initialize', systemPrompt: ['x'], hooks: { PreToolUse: [{ matcher: 'Bash', hookCallbackIds: ['hook_0'] }] } } }
    assert.deepEqual(ok(JSON.stringify(init)), init)
    const model = { type: 'control_request', request_id: 'r2', request: { subtype: 'set_model', model: 'opus', newer: true }, top: 1 }
    assert.deepEqual(ok(JSON.stringify(model)), model)
    const cancel = { type: 'control_cancel_request', request_id: 'r2' }
    assert.deepEqual(ok(JSON.stringify(cancel)), cancel)
    const other = { type: 'totally_unknown', foo: 1 }
    assert.deepEqual(ok(JSON.stringify(other)), { type: 'other_type', value: other })
  })

  it('refuses a number too large for a double (1e999 would reach the CLI as null), anywhere in the frame', () => {
    for (const text of [
      '{"type":"user","message":{"role":"user","content":"hi"},"x":1e999}',
      '{"type":"control_response","response":{"subtype":"success","request_id":"r1","response":{"behavior":"allow","updatedInput":{"n":[1,-2e400]}}}}',
      '{"type":"brand_new_type","v":{"w":1e309}}'
    ]) {
      const r = parseClientFrame(text)
      assert.ok(!r.ok, text)
      assert.equal(r.code, 'invalid_frame')
      assert.match(r.message, /too large to pass on exactly/)
    }
    const huge = parseClientFrame('{"type":"control_request","request_id":"r11","request":{"subtype":"set_max_thinking_tokens","max_thinking_tokens":1e999}}')
    assert.ok(!huge.ok)
    assert.equal(huge.requestId, 'r11', 'answered as that request')
    assert.equal(parseClientFrame('{"type":"user","message":{"role":"user","content":"hi"},"x":1.7976931348623157e308}').ok, true, 'the largest double passes')
  })

  it('names nesting, not the number, when a frame is both too deep and holds a number too large', () => {
    const deep = `${'['.repeat(MAX_JSON_DEPTH + 5)}1e999${']'.repeat(MAX_JSON_DEPTH + 5)}`
    for (const text of [`{"type":"user","x":1e999,"y":${deep}}`, `{"type":"user","y":${deep},"x":1e999}`]) {
      assert.match(refused(text).message, /nests more than 64 levels deep/, text)
    }
  })

  it('takes an answer\'s response and a permission\'s updatedInput only as JSON objects', () => {
    const frame = (response: unknown): string => JSON.stringify({ type: 'control_response', response: { subtype: 'success', request_id: 'r1', response } })
    for (const body of [{}, { behavior: 'allow', updatedInput: { command: 'ls', n: [1, { a: null }] } }, { 'odd key \u0000': true }]) {
      assert.deepEqual((ok(frame(body)) as { response: { response: unknown } }).response.response, body)
    }
    for (const body of [[], [{ behavior: 'allow' }], 'allow', 3, true]) {
      const r = refused(frame(body))
      assert.equal(r.code, 'invalid_frame', JSON.stringify(body))
      assert.match(r.message, /at response$/)
    }
    assert.equal(permissionAnswer.safeParse({ behavior: 'allow', updatedInput: { file_path: '/x', content: 'y' } }).success, true)
    for (const updatedInput of [[], ['ls'], 'ls', null]) {
      assert.equal(permissionAnswer.safeParse({ behavior: 'allow', updatedInput }).success, false, JSON.stringify(updatedInput))
    }
  })

  it('gives the request_id of a refused control_request when it can be read', () => {
    const bad = parseClientFrame('{"type":"control_request","request_id":"r9","request":{"subtype":"set_permission_mode","mode":"yolo"}}')
    assert.ok(!bad.ok)
    assert.equal(bad.requestId, 'r9')
    const deep = parseClientFrame(`{"type":"control_request","request_id":"r10","request":{"subtype":"x","v":${'['.repeat(100)}${']'.repeat(100)}}}`)
    assert.ok(!deep.ok)
    assert.equal(deep.requestId, 'r10')
    for (const text of ['{"type":"control_request","request":{"subtype":"interrupt"}}', '{"type":"control_request","request_id":42}', '{"type":"user","request_id":"r1"}']) {
      const r = parseClientFrame(text)
      assert.ok(!r.ok)
      assert.equal(r.requestId, undefined, text)
    }
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
      assert.ok(['user', 'control_request', 'control_response', 'control_cancel_request', 'keep_alive', 'other_type'].includes(r.frame.type))
    }), { numRuns: 500 })
  })
})
