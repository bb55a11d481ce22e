/**
 * Webhook bodies: the envelope every event shares, each event's data as
 * docs/WEBHOOKS.md lists it, and the caps that keep a body small whatever
 * the CLI sent (a tool input of megabytes, a long result text).
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { summariseInput } from '../../src/control/input-summary.js'
import {
  INPUT_PREVIEW_MAX, RESULT_MAX, jsonPreview, permissionRequestedData, permissionResolvedData, sessionEndedData, turnFinishedData, webhookBody
} from '../../src/webhooks/webhook-payload.js'

const SESSION = { sessionId: 'sess-1', tenant: 'tenant-a' }

describe('webhook payloads', () => {
  it('share one envelope: a new uuid per body, the type, an ISO time, the session and tenant', () => {
    const at = new Date('2026-11-26T10:00:00.000Z')
    const a = webhookBody('turn.finished', SESSION, { x: 1 }, at)
    const b = webhookBody('turn.finished', SESSION, { x: 1 }, at)
    assert.deepEqual({ ...a, id: '' }, { id: '', type: 'turn.finished', created_at: '2026-11-26T10:00:00.000Z', session_id: 'sess-1', tenant: 'tenant-a', data: { x: 1 } })
    assert.match(a.id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    assert.notEqual(a.id, b.id)
  })

  it('permission.requested carries the one-line summary GET /v1/permissions shows, and the whole input as JSON when it is small', () => {
    const input = { description: 'List "files"', command: 'ls   -la\n  /tmp' }
    assert.deepEqual(permissionRequestedData({ requestId: 'r1', toolName: 'Bash', input, seq: 7 }), {
      request_id: 'r1', tool_name: 'Bash', summary: summariseInput(input), input_preview: JSON.stringify(input), input_truncated: false, seq: 7
    })
    assert.equal(summariseInput(input), 'ls -la /tmp', 'the command, on one line')
  })

  it('permission.requested cuts a huge input to a bounded JSON prefix', () => {
    const content = 'x'.repeat(8 * 1024 * 1024)
    const input = { file_path: 'big.txt', content, more: { nested: [1, 2, 3] } }
    const data = permissionRequestedData({ requestId: 'r2', toolName: 'Write', input, seq: 9 })
    const preview = data.input_preview as string
    assert.equal(data.input_truncated, true)
    assert.ok(preview.length <= INPUT_PREVIEW_MAX + 1, `preview of ${preview.length} characters`)
    assert.ok(preview.endsWith('…'))
    assert.equal(preview.slice(0, -1), JSON.stringify(input).slice(0, INPUT_PREVIEW_MAX), 'a prefix of the input\'s JSON')
    assert.equal(data.summary, 'big.txt')
  })

  it('jsonPreview is the JSON itself up to the cap, whatever the shape', () => {
    const values: unknown[] = [
      null, 42, true, 'quote " and \\ and \n', [], {}, [1, 'a', null, { b: [true] }],
      { a: undefined, f: () => 1, n: [undefined, 2] }, { deep: { deeper: { deepest: 'é𝄞' } } }
    ]
    for (const v of values) assert.deepEqual(jsonPreview(v, 1000), { text: JSON.stringify(v), truncated: false }, JSON.stringify(v))
    const long = { list: Array.from({ length: 500 }, (_, i) => ({ i, s: 'abc'.repeat(i % 7) })) }
    for (const max of [1, 10, 57, 200, 999]) {
      const p = jsonPreview(long, max)
      assert.equal(p.truncated, true)
      assert.equal(p.text, JSON.stringify(long).slice(0, max) + '…', `max ${max}`)
    }
    const exact = { k: 'v' }
    assert.deepEqual(jsonPreview(exact, JSON.stringify(exact).length), { text: '{"k":"v"}', truncated: false })
    const cyclic: Record<string, unknown> = { a: 1 }
    cyclic.self = cyclic
    assert.deepEqual(jsonPreview(cyclic, 100), { text: '{"a":1,"self":null}', truncated: false })
  })

  it('permission.resolved, turn.finished and session.ended carry their fields in snake_case', () => {
    assert.deepEqual(permissionResolvedData({ requestId: 'r1', decision: 'allowed', by: 'client-1', seq: 8 }),
      { request_id: 'r1', decision: 'allowed', by: 'client-1', seq: 8 })
    assert.deepEqual(turnFinishedData({ subtype: 'success', isError: false, durationMs: 1200, totalCostUsd: 0.0123, result: 'Done.', seq: 12 }),
      { subtype: 'success', is_error: false, duration_ms: 1200, total_cost_usd: 0.0123, result: 'Done.', result_truncated: false, seq: 12 })
    assert.deepEqual(sessionEndedData({ status: 'stopped', reason: 'stopped', code: null, signal: 'SIGTERM', seq: 20 }),
      { status: 'stopped', reason: 'stopped', code: null, signal: 'SIGTERM', seq: 20 })
  })

  it('turn.finished cuts a long result text', () => {
    const result = 'r'.repeat(RESULT_MAX * 3)
    const data = turnFinishedData({ subtype: 'success', isError: false, durationMs: null, totalCostUsd: null, result, seq: 1 })
    assert.equal(data.result, `${'r'.repeat(RESULT_MAX)}…`)
    assert.equal(data.result_truncated, true)
    assert.equal(turnFinishedData({ subtype: 'error_during_execution', isError: true, durationMs: null, totalCostUsd: null, result: null, seq: 1 }).result, null)
  })
})
