/**
 * PendingRequests: a request asked again under an id still pending replaces
 * it, and only the newer one's timeout ends it (the older timer neither
 * ends it early nor twice).
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Timers } from '../../src/control/control-effects.js'
import { type PendingRequest, PendingRequests } from '../../src/control/pending-requests.js'

/** Timers the test moves: `advance(ms)` runs what is due, in order. */
function manualTimers (): Timers & { advance: (ms: number) => void } {
  let now = 0
  const due = new Map<number, { at: number, fn: () => void }>()
  let next = 0
  return {
    set: (fn, ms) => { const id = next++; due.set(id, { at: now + ms, fn }); return id },
    clear: (handle) => { due.delete(handle as number) },
    now: () => now,
    advance: (ms) => {
      now += ms
      for (const [id, t] of [...due].sort((a, b) => a[1].at - b[1].at)) {
        if (t.at > now || !due.has(id)) continue
        due.delete(id)
        t.fn()
      }
    }
  }
}

const prompt = (createdAt: number): PendingRequest => ({ requestId: 'r1', subtype: 'can_use_tool', request: { subtype: 'can_use_tool' }, seq: createdAt, frame: '{}', createdAt })

test('a request asked again under a pending id: only the newer one\'s timeout ends it, once', () => {
  const timers = manualTimers()
  const timedOut: PendingRequest[] = []
  const pending = new PendingRequests({ permissionTimeoutMs: 100, controlTimeoutMs: 100, onTimeout: (p) => timedOut.push(p), timers })
  pending.add(prompt(0))
  timers.advance(50)
  const again = prompt(50)
  pending.add(again)
  timers.advance(50) // the first one's time
  assert.deepEqual(timedOut, [], 'not ended by the replaced request\'s timer')
  assert.equal(pending.get('r1'), again)
  timers.advance(50)
  assert.deepEqual(timedOut, [again])
  timers.advance(1000)
  assert.equal(timedOut.length, 1)
  assert.equal(pending.size, 0)
})
