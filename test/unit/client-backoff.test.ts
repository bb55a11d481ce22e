/**
 * The client's reconnect delays and close-code verdicts (src/client): every
 * delay lies in [base·(1−jitter), base] with base = min(maxMs,
 * initialMs·factor^attempt), whatever the random draw; codes the gateway
 * documents as "reconnect" are retried, policy codes are not.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { BACKOFF_DEFAULTS, backoffDelay, backoffSettings, closeVerdict } from '../../src/client/index.js'

describe('client backoff', () => {
  it('defaults: 250 ms doubling up to 15 s, half of it random', () => {
    const s = backoffSettings()
    assert.deepEqual(s, { ...BACKOFF_DEFAULTS })
    assert.equal(backoffDelay(0, s, () => 0), 250)
    assert.equal(backoffDelay(0, s, () => 0.999999), 250 * (1 - 0.5 * 0.999999))
    assert.equal(backoffDelay(3, s, () => 0), 2000)
    assert.equal(backoffDelay(40, s, () => 0), 15_000, 'capped at maxMs')
    assert.equal(backoffDelay(40, s, () => 0.999999), 15_000 * (1 - 0.5 * 0.999999))
  })

  it('every delay lies within [base·(1−jitter), base] and never above maxMs', () => {
    fc.assert(fc.property(
      fc.integer({ min: 0, max: 60 }),
      fc.record({
        initialMs: fc.integer({ min: 0, max: 10_000 }),
        maxMs: fc.integer({ min: 0, max: 120_000 }),
        factor: fc.double({ min: 1, max: 5, noNaN: true }),
        jitter: fc.double({ min: 0, max: 1, noNaN: true })
      }),
      fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
      (attempt, options, r) => {
        const s = backoffSettings(options)
        const base = Math.min(s.maxMs, s.initialMs * Math.pow(s.factor, attempt))
        const delay = backoffDelay(attempt, s, () => r)
        assert.ok(delay >= base * (1 - s.jitter) - 1e-9, `${delay} below the jitter floor of ${base}`)
        assert.ok(delay <= base + 1e-9, `${delay} above ${base}`)
        assert.ok(delay <= s.maxMs + 1e-9)
        assert.ok(delay >= 0)
      }
    ))
  })

  it('the jitter spreads delays: Math.random draws differ across a range', () => {
    const s = backoffSettings({ initialMs: 1000, jitter: 0.5 })
    const delays = Array.from({ length: 200 }, () => backoffDelay(0, s))
    assert.ok(delays.every((d) => d >= 500 && d <= 1000))
    assert.ok(Math.max(...delays) - Math.min(...delays) > 100, 'not all the same')
  })

  it('out-of-range options are clamped: jitter to 0–1, factor ≥ 1, maxMs ≥ initialMs', () => {
    const s = backoffSettings({ initialMs: 100, maxMs: 10, factor: 0.5, jitter: 3 })
    assert.deepEqual({ maxMs: s.maxMs, factor: s.factor, jitter: s.jitter }, { maxMs: 100, factor: 1, jitter: 1 })
    assert.equal(backoffDelay(5, s, () => 0), 100)
    assert.equal(backoffSettings({ jitter: -1 }).jitter, 0)
  })
})

describe('client close-code verdicts (PROTOCOL.md close codes)', () => {
  it('resumes after restarts, moves, server errors, slow-consumer drops and lost connections', () => {
    for (const code of [1000, 1001, 1005, 1006, 1009, 1011, 1012, 4008]) assert.equal(closeVerdict(code), 'reconnect', String(code))
  })
  it('waits on 1013 (store cannot serve the replay)', () => {
    assert.equal(closeVerdict(1013), 'retry_later')
  })
  it('stops on a frame flood, protocol errors and other policy closes', () => {
    for (const code of [4029, 1002, 1003, 1007, 1008, 4000, 4001, 4403]) assert.equal(closeVerdict(code), 'stop', String(code))
  })
})
