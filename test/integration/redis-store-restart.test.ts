/**
 * RedisStore against a private redis-server that is stopped and restarted
 * while batches are being appended: calls during the outage reject within a
 * bound (never hang), and the client reconnects by itself once Redis is back.
 * The private server has no persistence, so the outage loses its data; the
 * gateway re-queues in that case, here only the client behaviour is checked.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { RedisStore } from '../../src/store/redis.js'
import { type RedisServer, startRedisServer } from '../support/redis-server.js'
import { DEFAULT_RETENTION, events, session } from '../support/store-contract.js'
import { eventually } from '../support/waiters.js'

/** The longest any call may take while Redis is down (typically about 1 s; commandTimeoutMs, 2000 by default, is the hard bound). */
const REJECT_BOUND_MS = 2500

describe('RedisStore across a Redis restart', () => {
  let server: RedisServer
  let store: RedisStore

  before(async () => {
    server = await startRedisServer()
    store = new RedisStore({ url: server.url, prefix: 'restart:', retention: DEFAULT_RETENTION })
    await store.ping()
  })

  after(async () => {
    await store?.close()
    await server?.kill()
  })

  it('rejects appends while Redis is down and works again after it restarts', async () => {
    let seq = 0
    let stopped = false
    // up → stopping → down (server gone) → starting → back (server answering again)
    type Phase = 'up' | 'stopping' | 'down' | 'starting' | 'back'
    const outcomes: { ok: boolean; ms: number; phase: Phase; endPhase: Phase; error?: string }[] = []
    let phase: Phase = 'up'

    // A writer appending batches back to back, as the session layer does (it retries failed batches).
    const writer = (async () => {
      let pending = events(seq + 1, seq + 5)
      while (!stopped) {
        const started = Date.now()
        const at = phase
        try {
          await store.append('s1', pending)
          outcomes.push({ ok: true, ms: Date.now() - started, phase: at, endPhase: phase })
          seq = pending[pending.length - 1]?.seq ?? seq
          pending = events(seq + 1, seq + 5)
        } catch (error) {
          outcomes.push({ ok: false, ms: Date.now() - started, phase: at, endPhase: phase, error: (error as Error).message })
          // Retry the same batch at once (a failure already took a reconnect attempt); yield so I/O runs in between.
          await new Promise((resolve) => setImmediate(resolve))
        }
      }
    })()

    const count = (p: typeof phase, ok: boolean): number => outcomes.filter((o) => o.phase === p && o.ok === ok).length
    await eventually(async () => count('up', true) >= 20, 10_000, 'appends before the outage')

    phase = 'stopping'
    await server.stop()
    phase = 'down'
    await eventually(async () => count('down', false) >= 3, 15_000, 'appends to fail during the outage')
    await assert.rejects(store.ping())
    assert.notEqual(store.status, 'ready')

    phase = 'starting'
    await server.start()
    phase = 'back'
    await eventually(async () => count('back', true) >= 20, 15_000, 'appends to succeed after the restart')
    stopped = true
    await writer

    const slowest = Math.max(...outcomes.map((o) => o.ms))
    assert.ok(slowest < REJECT_BOUND_MS, `a call took ${slowest} ms: ${JSON.stringify(outcomes.filter((o) => o.ms >= REJECT_BOUND_MS))}`)
    const failedWhileUp = outcomes.filter((o) => !o.ok && o.phase === 'up' && o.endPhase === 'up')
    assert.deepEqual(failedWhileUp, [], 'no append fails before the outage')
    const okWhileDown = outcomes.filter((o) => o.ok && o.phase === 'down' && o.endPhase === 'down')
    assert.deepEqual(okWhileDown, [], 'no append succeeds while Redis is down')

    // The restarted server lost what it had; the batches written since are all there, in order.
    await store.ping()
    assert.equal(store.status, 'ready')
    const held = await store.read('s1', 0, 1_000_000)
    const first = held[0]?.seq ?? 1
    assert.ok(held.length >= 100, `held ${held.length}`)
    assert.deepEqual(held, events(first, seq))
    await store.putSession(session({ id: 's1', last_seq: seq }))
    assert.equal((await store.getSession('s1'))?.last_seq, seq)
  })

  it('a call made while Redis is down rejects within the bound, also after a kill', async () => {
    await server.kill()
    try {
      for (const call of [
        () => store.append('s2', events(1, 3)),
        () => store.read('s2', 0, 10),
        () => store.putSession(session({ id: 's2' })),
        () => store.listSessions('default', { limit: 10 }),
        () => store.ping()
      ]) {
        const started = Date.now()
        await assert.rejects(call())
        const took = Date.now() - started
        assert.ok(took < REJECT_BOUND_MS, `rejected after ${took} ms`)
      }
    } finally {
      await server.start()
    }
    await eventually(async () => await store.ping().then(() => true, () => false), 10_000, 'reconnect')
    await store.append('s2', events(1, 3))
    assert.deepEqual(await store.read('s2', 0, 10), events(1, 3))
  })
})
