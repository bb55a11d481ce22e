/**
 * A lapsed lease its node renews is made again under the same epoch
 * (LEASE_RENEW_SCRIPT). The session's epoch counter may carry a TTL by then
 * (an ended session's keys expire with its record): making the lease again
 * must not take that TTL away, or the counter outlives its session in Redis
 * for good. Real Redis (TEST_REDIS_URL or 127.0.0.1:6379), a fresh prefix.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { test } from 'node:test'
import { RedisStore } from '../../src/store/redis.js'
import { REDIS_URL, deleteKeys, redisCommand } from '../support/redis-server.js'
import { DEFAULT_RETENTION } from '../support/store-contract.js'
import { eventually } from '../support/waiters.js'

test('renewing a lapsed lease keeps the TTL its epoch counter has', async (t) => {
  const prefix = `cgw-test:${randomUUID()}:`
  const store = new RedisStore({ url: REDIS_URL, prefix, retention: DEFAULT_RETENTION })
  t.after(async () => { await store.close(); await deleteKeys(REDIS_URL, prefix) })
  const lease = await store.leases.acquire('s1', 'node-a', 150)
  assert.ok(lease !== null)
  const counter = `${prefix}{s1}:epoch`
  assert.equal(await redisCommand(REDIS_URL, ['PEXPIRE', counter, '600000']), 1, 'the counter exists')
  await eventually(async () => await store.leases.holder('s1') === null, 5000, 'the lease to lapse')
  assert.equal(await store.leases.renew(lease, 1000), true, 'made again under its epoch')
  const ttl = Number(await redisCommand(REDIS_URL, ['PTTL', counter]))
  assert.ok(ttl > 0, `the counter still expires (PTTL ${ttl})`)
})
