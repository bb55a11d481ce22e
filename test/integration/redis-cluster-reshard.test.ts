/**
 * A Redis Cluster resharding the slot of a live session: from `CLUSTER
 * SETSLOT … MIGRATING/IMPORTING` to `SETSLOT … NODE`, Redis answers TRYAGAIN
 * (or ASK, then TRYAGAIN on the target) to every script of the session,
 * since some keys each script names (the followed flag, the mark, the lease)
 * do not exist. The store's appends, record and conversation writes and
 * lease scripts must wait the migration out within their command timeout,
 * not fail (a failed append makes the session's clients see the store
 * degraded; a failed record write is dropped).
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, describe, it } from 'node:test'
import { Redis } from 'ioredis'
import { RedisStore } from '../../src/store/redis.js'
import { type RedisCluster, redisClusterMissing, startRedisCluster } from '../support/redis-cluster.js'
import { DEFAULT_RETENTION, events, session } from '../support/store-contract.js'
import { eventually } from '../support/waiters.js'

/** TRYAGAIN answers a node has given so far (INFO errorstats). */
async function tryAgains (node: Redis): Promise<number> {
  const info = await node.call('INFO', 'errorstats') as string
  const match = /errorstat_TRYAGAIN:count=(\d+)/.exec(info)
  return match === null ? 0 : Number(match[1])
}

const missing = redisClusterMissing()
describe('RedisStore on a Cluster resharding a session\'s slot', () => {
  let cluster: RedisCluster | null = null
  const nodes: Redis[] = []
  after(async () => {
    for (const n of nodes) n.disconnect()
    await cluster?.stop()
  })

  it('appends and record writes issued during the migration land once it ends', { skip: missing ?? false }, async () => {
    cluster = await startRedisCluster()
    for (const port of cluster.ports) nodes.push(new Redis(port, '127.0.0.1'))
    const prefix = `cgw-test:${randomUUID()}:`
    const store = new RedisStore({ url: cluster.url, cluster: true, prefix, retention: DEFAULT_RETENTION, commandTimeoutMs: 5000 })
    try {
      const id = 'moving'
      await store.putSession(session({ id, tenant: 't', status: 'running' }))
      await store.append(id, events(1, 3))
      const slot = await nodes[0]?.call('CLUSTER', 'KEYSLOT', `${prefix}{${id}}:events`) as number
      const ids = await Promise.all(nodes.map(async (n) => await n.call('CLUSTER', 'MYID') as string))
      const owners = await Promise.all(nodes.map(async (n) => await n.call('CLUSTER', 'COUNTKEYSINSLOT', slot) as number))
      const from = owners.findIndex((count) => count > 0)
      const to = (from + 1) % nodes.length
      const source = nodes[from] as Redis
      const target = nodes[to] as Redis
      await target.call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', ids[from] as string)
      await source.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', ids[to] as string)
      const before = await tryAgains(source)

      const outcomes: string[] = []
      const append = store.append(id, events(4, 6)).then(() => { outcomes.push('append ok') }, (err: Error) => { outcomes.push(`append: ${err.message}`) })
      const put = store.putSession(session({ id, tenant: 't', status: 'running', last_seq: 6 })).then(() => { outcomes.push('put ok') }, (err: Error) => { outcomes.push(`put: ${err.message}`) })
      const save = store.saveConversation(id, Buffer.from('{"type":"user"}\n')).then(() => { outcomes.push('save ok') }, (err: Error) => { outcomes.push(`save: ${err.message}`) })
      const lease = store.leases.acquire(id, 'node-a', 60_000).then((l) => { outcomes.push(l === null ? 'lease taken' : 'lease ok') }, (err: Error) => { outcomes.push(`lease: ${err.message}`) })
      // The migration goes on for a while (a slot of large streams takes long to MIGRATE): some 40 TRYAGAINs, about two seconds.
      await eventually(async () => outcomes.length > 0 || await tryAgains(source) - before >= 40, 10_000, 'the store to retry during the migration')
      assert.deepEqual(outcomes, [], 'nothing settles while the slot migrates')

      const keys = await source.call('CLUSTER', 'GETKEYSINSLOT', slot, 100) as string[]
      await source.call('MIGRATE', '127.0.0.1', cluster.ports[to] as number, '', 0, 5000, 'KEYS', ...keys)
      for (const n of nodes) await n.call('CLUSTER', 'SETSLOT', slot, 'NODE', ids[to] as string)
      await Promise.all([append, put, save, lease])
      assert.deepEqual(outcomes.sort(), ['append ok', 'lease ok', 'put ok', 'save ok'])
      assert.deepEqual(await store.read(id, 0, 100), events(1, 6))
      assert.equal((await store.getSession(id))?.last_seq, 6)
      assert.equal((await store.loadConversation(id))?.toString(), '{"type":"user"}\n')
      assert.equal((await store.leases.holder(id))?.node, 'node-a')
    } finally {
      await store.close()
    }
  })
})
