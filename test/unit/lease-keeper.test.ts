/**
 * LeaseKeeper.fresh: whether this node may act on a session without asking
 * the store first. Fresh for SESSION_LEASE_MS after the store last confirmed
 * the lease (no other node can hold it before); past that (a pause: SIGSTOP,
 * a VM freeze) it is confirmed first. While the store does not answer, it
 * counts as fresh: a confirmation cannot come then, and every client frame
 * would otherwise wait a command timeout for it. The memory store's leases on
 * one clock with the keeper, renewals made to fail behind its back.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import pino from 'pino'
import { LeaseKeeper } from '../../src/cluster/lease-keeper.js'
import { MemoryLeases } from '../../src/store/memory-leases.js'
import type { Lease } from '../../src/store/store.js'

const TTL_MS = 1000

/** Leases whose renewals throw, as a store that does not answer, while `down`. */
class Unreachable extends MemoryLeases {
  down = false
  override async renew (lease: Lease, ttlMs: number): Promise<boolean> {
    if (this.down) throw new Error('the store does not answer')
    return await super.renew(lease, ttlMs)
  }
}

test('a lease is fresh until the store last confirmed it a lease ago, and while the store does not answer', async (t) => {
  let now = 1_000_000
  const clock = (): number => now
  const leases = new Unreachable({ now: clock })
  const keeper = new LeaseKeeper({ leases, node: 'node-a', ttlMs: TTL_MS, logger: pino({ level: 'silent' }), now: clock })
  t.after(() => keeper.close())
  const lease = await keeper.acquire('s1', () => {})
  assert.ok(lease !== null)
  assert.equal(keeper.fresh(lease), true, 'just acquired')
  now += TTL_MS
  assert.equal(keeper.fresh(lease), false, 'a lease later: another node may hold it')

  leases.down = true
  await assert.rejects(keeper.confirm(lease), /does not answer/)
  assert.equal(keeper.fresh(lease), true, 'the store does not answer: frames are not held for it')

  leases.down = false
  assert.equal(await keeper.confirm(lease), true, 'still this node\'s')
  assert.equal(keeper.fresh(lease), true)
  now += TTL_MS
  assert.equal(keeper.fresh(lease), false, 'confirmed again, then a lease later')
})
