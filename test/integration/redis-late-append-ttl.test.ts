/**
 * Appends (and conversation saves) that land after an ended session's keys
 * expired — a batch retried late, a node that paused past the retention —
 * must not leave keys Redis keeps for ever: the stream and its largest-frame
 * mark they create get the retention TTL, on a single Redis (one session's
 * call, a merged wave, a batch of several chunks) and on a Cluster.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, describe, it } from 'node:test'
import { Cluster } from 'ioredis'
import { RedisStore } from '../../src/store/redis.js'
import { type RedisCluster, redisClusterMissing, startRedisCluster } from '../support/redis-cluster.js'
import { REDIS_URL, deleteKeys, redisCommand } from '../support/redis-server.js'
import { DEFAULT_RETENTION, events, session, sizedFrame } from '../support/store-contract.js'
import { eventually } from '../support/waiters.js'

const TTL_SECONDS = 600

/** What the tests need of Redis: one command, wherever the key lives. */
type Command = (args: Array<string | number>) => Promise<unknown>

/**
 * Ends the session (the keys get the TTL), then has its keys expire as if
 * the retention had passed: PEXPIRE of 1 ms on each, waited for until the
 * record is gone.
 */
async function endAndExpire (store: RedisStore, command: Command, prefix: string, id: string, first = events(1, 3)): Promise<void> {
  await store.putSession(session({ id, tenant: 't', status: 'running' }))
  await store.append(id, first)
  await store.putSession(session({ id, tenant: 't', status: 'exited' }))
  for (const k of ['meta', 'events', 'largest', 'epoch']) await command(['PEXPIRE', `${prefix}{${id}}:${k}`, 1])
  await eventually(async () => await store.getSession(id) === null && await command(['EXISTS', `${prefix}{${id}}:events`]) === 0, 5000, `${id}'s keys to expire`)
}

/** The TTL (s) of each key of the session a late write may create; -1 is for ever. */
async function ttls (command: Command, prefix: string, id: string, keys: string[]): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {}
  for (const k of keys) out[k] = await command(['TTL', `${prefix}{${id}}:${k}`])
  return out
}

function assertExpiring (found: Record<string, unknown>): void {
  for (const [k, ttl] of Object.entries(found)) {
    assert.ok(typeof ttl === 'number' && ttl > 0 && ttl <= TTL_SECONDS, `${k} TTL after the late write: ${String(ttl)}`)
  }
}

function lateWriteCases (name: string, open: () => Promise<{ store: RedisStore, command: Command, prefix: string }>): void {
  describe(`late writes after an ended session expired: ${name}`, () => {
    it('a late append of one session gives the stream and its mark the retention TTL', async () => {
      const { store, command, prefix } = await open()
      await endAndExpire(store, command, prefix, 'one')
      // Longer than any frame before: the call reads the stream's mark, and makes it anew.
      await store.append('one', [{ seq: 4, frame: sizedFrame(4, 2000) }])
      assertExpiring(await ttls(command, prefix, 'one', ['events', 'largest']))
    })

    it('late appends merged with other sessions\' appends in one wave expire too', async () => {
      const { store, command, prefix } = await open()
      await endAndExpire(store, command, prefix, 'w1')
      await endAndExpire(store, command, prefix, 'w2')
      await store.putSession(session({ id: 'w3', tenant: 't', status: 'running' }))
      await Promise.all([store.append('w1', [{ seq: 4, frame: sizedFrame(4, 2000) }]), store.append('w2', [{ seq: 4, frame: sizedFrame(4, 3000) }]), store.append('w3', events(1, 2))])
      assertExpiring(await ttls(command, prefix, 'w1', ['events', 'largest']))
      assertExpiring(await ttls(command, prefix, 'w2', ['events', 'largest']))
      // A live session's stream stays persistent.
      assert.equal(await command(['TTL', `${prefix}{w3}:events`]), -1)
    })

    it('a late batch of several script calls expires, even when a later call fails', async () => {
      const { store, command, prefix } = await open()
      await endAndExpire(store, command, prefix, 'big')
      // 1200 events are three calls of at most 500.
      await store.append('big', events(4, 1203))
      assertExpiring(await ttls(command, prefix, 'big', ['events', 'largest']))
      // A first frame of 5000 bytes: later calls bringing none longer do not read the mark.
      await endAndExpire(store, command, prefix, 'cut', [{ seq: 1, frame: sizedFrame(1, 5000) }])
      // The last call fails (the mark it reads is no number): the calls before it wrote the stream.
      await command(['SET', `${prefix}{cut}:largest`, 'not a number', 'EX', TTL_SECONDS])
      const batch = events(2, 1201)
      batch[batch.length - 1] = { seq: 1201, frame: sizedFrame(1201, 10_000) }
      await assert.rejects(store.append('cut', batch))
      assertExpiring(await ttls(command, prefix, 'cut', ['events']))
    })

    it('a late conversation save expires', async () => {
      const { store, command, prefix } = await open()
      await endAndExpire(store, command, prefix, 'conv')
      await store.saveConversation('conv', Buffer.from('{"type":"user"}\n'))
      assertExpiring(await ttls(command, prefix, 'conv', ['conversation']))
    })
  })
}

const opened: Array<() => Promise<void>> = []
after(async () => { for (const close of opened.splice(0)) await close() })

lateWriteCases('single Redis', async () => {
  const prefix = `cgw-test:${randomUUID()}:`
  const store = new RedisStore({ url: REDIS_URL, prefix, retention: { ...DEFAULT_RETENTION, ttlSecondsAfterEnd: TTL_SECONDS } })
  opened.push(async () => { await store.close(); await deleteKeys(REDIS_URL, prefix) })
  return { store, prefix, command: async (args) => await redisCommand(REDIS_URL, args) }
})

const clusterMissing = redisClusterMissing()
if (clusterMissing === null) {
  let cluster: Promise<RedisCluster> | null = null
  let client: Cluster | null = null
  lateWriteCases('Redis Cluster', async () => {
    cluster ??= startRedisCluster()
    const { url, stop } = await cluster
    if (client === null) {
      const c = client = new Cluster([url])
      opened.push(async () => { c.disconnect(); await stop() })
    }
    const c = client
    const prefix = `cgw-test:${randomUUID()}:`
    const store = new RedisStore({ url, cluster: true, prefix, retention: { ...DEFAULT_RETENTION, ttlSecondsAfterEnd: TTL_SECONDS } })
    opened.unshift(async () => { await store.close() })
    return { store, prefix, command: async (args) => await c.call(String(args[0]), ...args.slice(1)) }
  })
} else {
  describe('late writes after an ended session expired: Redis Cluster', () => {
    it('runs on a Redis Cluster', { skip: clusterMissing }, () => {})
  })
}
