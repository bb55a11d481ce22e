/**
 * Lease calls that land after a session's keys expired — a keeper renewing
 * after its session ended, a node that paused past the retention, a create
 * whose record save failed after its lease was taken — must not leave the
 * session's epoch counter in Redis for ever: a counter the lease scripts
 * create gets the record's remaining TTL, or the whole retention TTL once
 * the record is gone (as late appends do, redis-late-append-ttl). A live
 * session's counter stays persistent. Real Redis, a fresh prefix.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, describe, it } from 'node:test'
import { RedisStore } from '../../src/store/redis.js'
import { REDIS_URL, deleteKeys, redisCommand } from '../support/redis-server.js'
import { DEFAULT_RETENTION, session } from '../support/store-contract.js'
import { eventually } from '../support/waiters.js'

const TTL_SECONDS = 600

describe('lease calls after a session\'s keys expired', () => {
  const prefix = `cgw-test:${randomUUID()}:`
  const store = new RedisStore({ url: REDIS_URL, prefix, retention: { ...DEFAULT_RETENTION, ttlSecondsAfterEnd: TTL_SECONDS } })
  after(async () => { await store.close(); await deleteKeys(REDIS_URL, prefix) })
  const key = (id: string, k: string): string => `${prefix}{${id}}:${k}`
  const ttl = async (id: string, k: string): Promise<number> => Number(await redisCommand(REDIS_URL, ['TTL', key(id, k)]))

  it('a renew after the ended session\'s keys expired gives the counter it makes the retention TTL', async () => {
    const lease = await store.leases.acquire('ended', 'node-a', 60_000)
    assert.ok(lease !== null)
    await store.putSession(session({ id: 'ended', tenant: 't', status: 'exited' }), lease)
    for (const k of ['meta', 'epoch', 'lease']) await redisCommand(REDIS_URL, ['PEXPIRE', key('ended', k), 1])
    await eventually(async () => await store.getSession('ended') === null && await store.leases.holder('ended') === null &&
      await redisCommand(REDIS_URL, ['EXISTS', key('ended', 'epoch')]) === 0, 5000, 'the keys and the lease to expire')
    assert.equal(await store.leases.renew(lease, 1000), true, 'made again: nobody took the session meanwhile')
    const left = await ttl('ended', 'epoch')
    assert.ok(left > 0 && left <= TTL_SECONDS, `epoch counter TTL after the late renew: ${left}`)
    assert.ok(await ttl('ended', 'lease') > 0, 'the lease expires as ever')
  })

  it('a renew while the ended record is still kept gives the counter the record\'s remaining TTL', async () => {
    const lease = await store.leases.acquire('kept', 'node-a', 60_000)
    assert.ok(lease !== null)
    await store.putSession(session({ id: 'kept', tenant: 't', status: 'exited' }), lease)
    await redisCommand(REDIS_URL, ['EXPIRE', key('kept', 'meta'), 100])
    for (const k of ['epoch', 'lease']) await redisCommand(REDIS_URL, ['PEXPIRE', key('kept', k), 1])
    await eventually(async () => await store.leases.holder('kept') === null &&
      await redisCommand(REDIS_URL, ['EXISTS', key('kept', 'epoch')]) === 0, 5000, 'the counter and the lease to expire')
    assert.equal(await store.leases.renew(lease, 1000), true)
    const left = await ttl('kept', 'epoch')
    assert.ok(left > 0 && left <= 100, `epoch counter TTL: ${left} (the record has 100 s left)`)
  })

  it('a lease taken for a session with no record (its save failed) leaves a counter that expires', async () => {
    const lease = await store.leases.acquire('unsaved', 'node-a', 1000)
    assert.ok(lease !== null)
    const left = await ttl('unsaved', 'epoch')
    assert.ok(left > 0 && left <= TTL_SECONDS, `epoch counter TTL after an acquire with no record: ${left}`)
    // Its record saved, the session is live: the counter is kept, as the record is.
    await store.putSession(session({ id: 'unsaved', tenant: 't', status: 'running' }), lease)
    assert.equal(await ttl('unsaved', 'epoch'), -1)
  })

  it('a live session\'s counter made again by a renew or an acquire stays persistent', async () => {
    const lease = await store.leases.acquire('live', 'node-a', 60_000)
    assert.ok(lease !== null)
    await store.putSession(session({ id: 'live', tenant: 't', status: 'running' }), lease)
    for (const k of ['epoch', 'lease']) await redisCommand(REDIS_URL, ['PEXPIRE', key('live', k), 1])
    await eventually(async () => await store.leases.holder('live') === null &&
      await redisCommand(REDIS_URL, ['EXISTS', key('live', 'epoch')]) === 0, 5000, 'the counter and the lease to expire')
    assert.equal(await store.leases.renew(lease, 150), true)
    assert.equal(await ttl('live', 'epoch'), -1)
    await redisCommand(REDIS_URL, ['DEL', key('live', 'epoch'), key('live', 'lease')])
    assert.ok(await store.leases.acquire('live', 'node-b', 1000) !== null)
    assert.equal(await ttl('live', 'epoch'), -1)
  })
})
