/**
 * The EventStore contract (test/support/store-contract.ts) on a private
 * three-master Redis Cluster, started at the first case and removed when
 * the file ends; skipped, saying why, without redis-cli. Kept apart from
 * store-contract.test.ts (memory and single Redis) so the two run side by
 * side. The cluster is private to this file: its keys go with it.
 */
import { randomUUID } from 'node:crypto'
import { after, describe, it } from 'node:test'
import { RedisStore } from '../../src/store/redis.js'
import { type RedisCluster, redisClusterMissing, startRedisCluster } from '../support/redis-cluster.js'
import { storeContract } from '../support/store-contract.js'

const clusterMissing = redisClusterMissing()
if (clusterMissing === null) {
  let cluster: Promise<RedisCluster> | null = null
  after(async () => { if (cluster !== null) await (await cluster).stop() })
  storeContract('redis cluster', async (retention) => {
    cluster ??= startRedisCluster()
    const url = (await cluster).url
    const prefix = `cgw-test:${randomUUID()}:`
    const store = new RedisStore({ url, cluster: true, prefix, retention })
    const peers: RedisStore[] = []
    return {
      store,
      peer: async () => {
        const peer = new RedisStore({ url, cluster: true, prefix, retention })
        peers.push(peer)
        return peer
      },
      cleanup: async () => { for (const s of [store, ...peers.splice(0)]) await s.close() }
    }
  }, { trimSlack: () => 100 })
} else {
  describe('EventStore contract: redis cluster', () => {
    it('runs on a Redis Cluster', { skip: clusterMissing }, () => {})
  })
}
