/**
 * Fencing when Redis hands an epoch out twice: a Redis restarted without
 * persistence, or a replica promoted before it received the last INCR of a
 * session's epoch counter, starts the counter again, so the next node to
 * take the lease gets an epoch the old owner still holds. The old owner's
 * writes must be refused all the same: the fence is the lease's epoch and
 * its node, not the epoch alone. A private redis-server; FLUSHALL stands
 * for the data the restart (or failover) lost.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import { RedisStore } from '../../src/store/redis.js'
import { type RedisServer, redisCommand, startRedisServer } from '../support/redis-server.js'
import { DEFAULT_RETENTION, events, session } from '../support/store-contract.js'

describe('RedisStore fencing after an epoch is handed out again', () => {
  let server: RedisServer
  let nodeA: RedisStore
  let nodeB: RedisStore

  before(async () => {
    server = await startRedisServer()
    nodeA = new RedisStore({ url: server.url, prefix: 'fence:', retention: DEFAULT_RETENTION })
    nodeB = new RedisStore({ url: server.url, prefix: 'fence:', retention: DEFAULT_RETENTION })
  })
  after(async () => {
    await nodeA?.close()
    await nodeB?.close()
    await server?.kill()
  })

  it('refuses the old owner\'s appends and saves once another node holds the lease under the same epoch', async () => {
    const id = randomUUID()
    const old = await nodeA.leases.acquire(id, 'node-a', 60_000)
    assert.ok(old !== null)
    await nodeA.append(id, events(1, 2, 'a'), old)
    await redisCommand(server.url, ['FLUSHALL'])
    const taken = await nodeB.leases.acquire(id, 'node-b', 60_000)
    assert.ok(taken !== null)
    assert.equal(taken.epoch, old.epoch, 'the counter started again: the same epoch, another node')
    await nodeB.append(id, events(1, 1, 'b'), taken)

    const isFenced = (err: Error): boolean => err.name === 'FencedError'
    await assert.rejects(nodeA.append(id, events(2, 3, 'a'), old), isFenced, 'an append of the node that lost the lease')
    await assert.rejects(nodeA.putSession(session({ id, status: 'running' }), old), isFenced, 'a record save of the node that lost the lease')
    await assert.rejects(nodeA.saveConversation(id, Buffer.from('p\n{}'), old), isFenced, 'a conversation save of the node that lost the lease')
    await assert.rejects(nodeA.appendConversation(id, 0, Buffer.from('x'), old), isFenced, 'a conversation append of the node that lost the lease')
    assert.deepEqual((await nodeB.read(id, 0, 10)).map((e) => e.frame), events(1, 1, 'b').map((e) => e.frame), 'only the owner\'s events')
    // The owner itself still writes.
    await nodeB.append(id, events(2, 2, 'b'), taken)
    await nodeB.putSession(session({ id, status: 'running' }), taken)
  })
})
