/**
 * The memory store's retention of late writes: events appended after an
 * ended session's entry expired (a batch retried late) must expire
 * EVENTS_TTL_SECONDS later, as on Redis (test/integration/redis-late-append-ttl.test.ts),
 * not stay in the gateway's memory for as long as it runs. A fake clock.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { MemoryStore } from '../../src/store/memory.js'
import { DEFAULT_RETENTION, events, session } from '../support/store-contract.js'

describe('MemoryStore: late appends after an ended session expired', () => {
  it('expire with the retention TTL', async () => {
    let now = Date.parse('2026-01-01T00:00:00Z')
    const store = new MemoryStore({ retention: { ...DEFAULT_RETENTION, ttlSecondsAfterEnd: 600 }, now: () => now })
    await store.putSession(session({ id: 's', status: 'running' }))
    await store.append('s', events(1, 3))
    await store.putSession(session({ id: 's', status: 'exited' }))
    now += 601_000
    assert.equal(await store.getSession('s'), null)
    await store.append('s', events(4, 5))
    assert.deepEqual(await store.read('s', 0, 10), events(4, 5))
    now += 601_000
    assert.deepEqual(await store.read('s', 0, 10), [], 'the late events are gone a TTL later')
    // A live session's events stay: putting its record keeps them for ever.
    await store.append('live', events(1, 2))
    await store.putSession(session({ id: 'live', status: 'running' }))
    now += 601_000
    assert.deepEqual(await store.read('live', 0, 10), events(1, 2))
    await store.close()
  })

  it('forgets an expired session\'s lease epoch, as the Redis epoch key expires with the record', async () => {
    let now = Date.parse('2026-01-01T00:00:00Z')
    const store = new MemoryStore({ retention: { ...DEFAULT_RETENTION, ttlSecondsAfterEnd: 600 }, now: () => now })
    await store.putSession(session({ id: 's', status: 'running' }))
    const lease = await store.leases.acquire('s', 'node-a', 30_000)
    assert.equal(lease?.epoch, 1)
    await store.leases.release(lease as NonNullable<typeof lease>)
    await store.putSession(session({ id: 's', status: 'exited' }))
    now += 601_000
    assert.equal(await store.getSession('s'), null)
    // One entry per session ever created, for as long as the gateway ran, until now.
    assert.equal((await store.leases.acquire('s', 'node-a', 30_000))?.epoch, 1, 'the epoch counter went with the record')
    await store.close()
  })
})
