/**
 * docker/redis/users.acl on a Redis Cluster (docs/SCALING.md names it as the
 * ACL the gateway's user needs there too): the `cgw` user's rules from that
 * file set on every master of a private three-master cluster, the Redis
 * store built as a Cluster client of that user. The client learns the slots
 * with CLUSTER SLOTS, and follows an ASK redirect (a slot being migrated)
 * with ASKING: both must be allowed, or the store never gets going, or fails
 * every command of a slot in migration.
 *
 * Skipped, saying what to install, when redis-server or redis-cli is missing.
 */
import assert from 'node:assert/strict'
import { createHash, randomBytes, randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { after, before, describe, it } from 'node:test'
import { RedisStore } from '../../src/store/redis.js'
import { type RedisCluster, redisClusterMissing, startRedisCluster } from '../support/redis-cluster.js'
import { type Reply, redisCommand } from '../support/redis-server.js'
import { events } from '../support/store-contract.js'
import { eventually, within } from '../support/waiters.js'

const ACL_FILE = fileURLToPath(new URL('../../docker/redis/users.acl', import.meta.url))
const missing = redisClusterMissing()

describe('the ACL of docker/redis/users.acl on a Redis Cluster', { skip: missing ?? false }, () => {
  const password = randomBytes(24).toString('hex')
  let cluster: RedisCluster | undefined
  let store: RedisStore | undefined

  before(async () => {
    cluster = await startRedisCluster()
    const line = readFileSync(ACL_FILE, 'utf8').split('\n').find((l) => l.startsWith('user cgw '))
    assert.ok(line !== undefined, 'users.acl defines the user cgw')
    const hash = createHash('sha256').update(password).digest('hex')
    const rules = line.replace('__CGW_PASSWORD_SHA256__', hash).split(/\s+/).filter((r) => r !== '').slice(2)
    for (const port of cluster.ports) await redisCommand(`redis://127.0.0.1:${port}`, ['ACL', 'SETUSER', 'cgw', ...rules])
    store = new RedisStore({
      url: `redis://cgw:${password}@127.0.0.1:${cluster.ports[0] as number}`,
      cluster: true,
      prefix: 'cgw:',
      retention: { maxEventsPerSession: 100, ttlSecondsAfterEnd: 60 }
    })
  })
  after(async () => {
    await store?.close()
    await cluster?.stop()
  })

  it('lets the gateway user reach the cluster, and append and read a session on any master', async () => {
    const s = store as RedisStore
    // The cluster client is ready once it learnt the slots (CLUSTER SLOTS as user cgw).
    await eventually(() => s.status === 'ready', 10_000, `the cluster client to be ready (status ${s.status}, last error ${s.lastError?.message ?? "none"})`)
    for (let i = 0; i < 6; i++) {
      const id = randomUUID()
      await within(s.append(id, events(1, 3)), 10_000, 'an append')
      assert.deepEqual((await s.read(id, 0, 10)).map((e) => e.seq), [1, 2, 3])
    }
  })

  it('follows an ASK redirect of a slot being migrated (ASKING as user cgw)', async () => {
    const s = store as RedisStore
    const c = cluster as RedisCluster
    await eventually(() => s.status === 'ready', 10_000, 'the cluster client to be ready')
    const id = randomUUID()
    const slot = await redisCommand(c.url, ['CLUSTER', 'KEYSLOT', `cgw:{${id}}:events`]) as number
    const ranges = await redisCommand(c.url, ['CLUSTER', 'SLOTS']) as Reply[][]
    const owner = ranges.find((r) => (r[0] as number) <= slot && slot <= (r[1] as number))
    const source = Number((owner?.[2] as Reply[])[1])
    const target = c.ports.find((p) => p !== source) as number
    const idOf = async (port: number): Promise<string> => await redisCommand(`redis://127.0.0.1:${port}`, ['CLUSTER', 'MYID']) as string
    const [sourceId, targetId] = [await idOf(source), await idOf(target)]
    // The slot half-way to another master: keys the source lacks are answered ASK there.
    await redisCommand(`redis://127.0.0.1:${target}`, ['CLUSTER', 'SETSLOT', slot, 'IMPORTING', sourceId])
    await redisCommand(`redis://127.0.0.1:${source}`, ['CLUSTER', 'SETSLOT', slot, 'MIGRATING', targetId])
    try {
      // Single-key commands: a script over the session's keys is answered TRYAGAIN until the migration ends (some of its keys never exist).
      assert.equal(await within(s.getSession(id), 10_000, 'a record read in a slot being migrated'), null)
      assert.deepEqual(await within(s.read(id, 0, 10), 10_000, 'a stream read in a slot being migrated'), [])
    } finally {
      for (const port of [source, target]) await redisCommand(`redis://127.0.0.1:${port}`, ['CLUSTER', 'SETSLOT', slot, 'STABLE'])
    }
  })
})
