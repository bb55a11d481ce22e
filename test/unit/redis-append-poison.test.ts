/**
 * On a single Redis the node's append gate merges the appends of every
 * session of a wave into one script call (append-gate.ts: "its error reaches
 * only the appends it carried"). A key of one session that someone who can
 * write Redis left unreadable (its largest-frame mark not a number or not a
 * string, its lease not a hash) must fail that session's append alone:
 * before, it raised a Lua error that aborted the whole call, and every other
 * session (any tenant's) merged into that wave lost its append with it.
 * Real Redis (TEST_REDIS_URL or 127.0.0.1:6379), a fresh prefix per case.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { afterEach, describe, it } from 'node:test'
import { RedisStore } from '../../src/store/redis.js'
import type { StoredEvent } from '../../src/store/store.js'
import { REDIS_URL, deleteKeys, redisCommand } from '../support/redis-server.js'
import { DEFAULT_RETENTION } from '../support/store-contract.js'

const frames = (from: number, to: number): StoredEvent[] =>
  Array.from({ length: to - from + 1 }, (_, i) => ({ seq: from + i, frame: `{"type":"x","seq":${from + i}}` }))

describe('one session\'s unreadable key in a merged append wave', () => {
  const cleanups: Array<() => Promise<void>> = []
  afterEach(async () => { for (const c of cleanups.splice(0)) await c() })

  const make = (): { store: RedisStore, prefix: string } => {
    const prefix = `cgw-test:${randomUUID()}:`
    const store = new RedisStore({ url: REDIS_URL, prefix, retention: DEFAULT_RETENTION })
    cleanups.push(async () => { await store.close(); await deleteKeys(REDIS_URL, prefix) })
    return { store, prefix }
  }

  const poisons: Array<[string, (prefix: string, id: string) => Promise<unknown>]> = [
    ['a largest-frame mark that is not a number', async (prefix, id) => await redisCommand(REDIS_URL, ['SET', `${prefix}{${id}}:largest`, 'not a number'])],
    ['a largest-frame mark that is not a string', async (prefix, id) => await redisCommand(REDIS_URL, ['HSET', `${prefix}{${id}}:largest`, 'f', '1'])],
    ['a lease that is not a hash', async (prefix, id) => await redisCommand(REDIS_URL, ['SET', `${prefix}{${id}}:lease`, 'node'])]
  ]

  for (const [what, poison] of poisons) {
    it(`${what}: fails that session's append only`, async () => {
      const { store, prefix } = make()
      const bad = randomUUID()
      const good = randomUUID()
      // Both under a lease, as a node appends: the lease hash is read for each.
      const badLease = await store.leases.acquire(bad, 'node-1', 60_000)
      const goodLease = await store.leases.acquire(good, 'node-1', 60_000)
      assert.ok(badLease !== null && goodLease !== null)
      await poison(prefix, bad)

      // Submitted in one turn: one wave, one script call for both sessions.
      const [badResult, goodResult] = await Promise.allSettled([
        store.append(bad, frames(1, 3), badLease),
        store.append(good, frames(1, 3), goodLease)
      ])
      assert.equal(goodResult.status, 'fulfilled', `the good session's append: ${goodResult.status === 'rejected' ? String(goodResult.reason) : ''}`)
      assert.deepEqual((await store.read(good, 0, 10)).map((e) => e.seq), [1, 2, 3])
      // The poisoned one fails (a lease that is no hash: fenced), by itself, and writes nothing.
      assert.equal(badResult.status, 'rejected')
      assert.deepEqual(await store.read(bad, 0, 10), [])
    })
  }
})
