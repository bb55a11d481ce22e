/**
 * claude-remote's reconnect waits: full jitter over a step doubling from
 * 0.1 s to 5 s, the gateway's retry_after_ms added once, reset by a hello.
 * The random source is pinned, so the values are exact.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ReconnectBackoff } from '../../src/remote/reconnect-backoff.js'

test('each wait is drawn within its step; steps double to 5 s; a hello starts them again', () => {
  const top = new ReconnectBackoff(() => 0)
  assert.deepEqual(Array.from({ length: 8 }, () => top.next()), [100, 200, 400, 800, 1600, 3200, 5000, 5000])
  top.reset()
  assert.equal(top.next(), 100)
  const half = new ReconnectBackoff(() => 0.5)
  assert.deepEqual([half.next(), half.next()], [50, 100])
})

test('a retry_after_ms from the gateway is waited once, before the drawn part', () => {
  const b = new ReconnectBackoff(() => 0.5)
  b.atLeast(3_000)
  assert.equal(b.next(), 3_050)
  assert.equal(b.next(), 100)
  b.atLeast(60_000)
  assert.equal(b.next(), 5_000 + 200)
})
