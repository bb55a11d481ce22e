/**
 * Node load reports (src/store/signed-nodes.ts), as SignedStore gives them,
 * over both stores: what one node reports another sharing the secret reads
 * as it was reported; a report altered in the store (a tenant's count, its
 * room, its time), moved under another node's name, written without a MAC
 * (an older node), or made with another secret is left out, logged once at
 * error level and counted; a copy written back after its time is left out.
 * Redis cases run against real Redis (TEST_REDIS_URL or 127.0.0.1:6379, a
 * fresh prefix per case), the reports changed with commands of their own.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { afterEach, describe, it } from 'node:test'
import pino from 'pino'
import { MemoryStore } from '../../src/store/memory.js'
import { RedisStore } from '../../src/store/redis.js'
import { SignedStore } from '../../src/store/signed-records.js'
import type { EventStore, NodeLoad } from '../../src/store/store.js'
import { REDIS_URL, deleteKeys, redisCommand } from '../support/redis-server.js'
import { DEFAULT_RETENTION } from '../support/store-contract.js'

const SECRET = 'k'.repeat(43)
const TTL_MS = 60_000

interface Raw {
  /** The report of `node` as the store keeps it. */
  get: (node: string) => Promise<Record<string, unknown>>
  /** Writes `report` as `node`'s, behind the gateway's back. */
  set: (node: string, report: Record<string, unknown>) => Promise<void>
}

const backends: Array<{ name: string, make: () => { inners: [EventStore, EventStore], raw: Raw, cleanup: () => Promise<void> } }> = [
  {
    name: 'memory',
    make: () => {
      const inner = new MemoryStore({ retention: DEFAULT_RETENTION })
      const raw: Raw = {
        get: async (node) => ({ ...(await inner.listNodes()).find((n) => n.node === node) }),
        set: async (node, report) => { await inner.reportNode({ ...report, node } as unknown as NodeLoad, TTL_MS) }
      }
      return { inners: [inner, inner], raw, cleanup: () => inner.close() }
    }
  },
  {
    name: 'redis',
    make: () => {
      const prefix = `cgw-test:${randomUUID()}:`
      const one = new RedisStore({ url: REDIS_URL, prefix, retention: DEFAULT_RETENTION })
      const two = new RedisStore({ url: REDIS_URL, prefix, retention: DEFAULT_RETENTION })
      const raw: Raw = {
        get: async (node) => JSON.parse(await redisCommand(REDIS_URL, ['HGET', `${prefix}nodes`, node]) as string),
        set: async (node, report) => { await redisCommand(REDIS_URL, ['HSET', `${prefix}nodes`, node, JSON.stringify(report)]) }
      }
      return {
        inners: [one, two],
        raw,
        cleanup: async () => {
          await one.close()
          await two.close()
          await deleteKeys(REDIS_URL, prefix)
        }
      }
    }
  }
]

for (const backend of backends) {
  describe(`node load reports over ${backend.name}`, () => {
    const cleanups: Array<() => Promise<void>> = []
    afterEach(async () => { for (const c of cleanups.splice(0)) await c() })

    /** Node a and node b, each its SignedStore over the shared data; what b logged and counted (cgw_store_refused_total). */
    const make = (options: { secretOfB?: string, acceptUnsigned?: boolean } = {}): { a: SignedStore, b: SignedStore, raw: Raw, logsOfB: any[], countedByB: string[] } => {
      const { inners, raw, cleanup } = backend.make()
      cleanups.push(cleanup)
      const logsOfB: any[] = []
      const logger = pino({ level: 'trace' }, { write: (line: string) => { logsOfB.push(JSON.parse(line)) } })
      const countedByB: string[] = []
      return {
        a: new SignedStore(inners[0], { secret: SECRET, allowBypassPermissions: false, logger: pino({ level: 'silent' }) }),
        b: new SignedStore(inners[1], { secret: options.secretOfB ?? SECRET, allowBypassPermissions: false, logger, acceptUnsigned: options.acceptUnsigned, onRefused: (kind, why) => { countedByB.push(`${kind}/${why}`) } }),
        raw,
        logsOfB,
        countedByB
      }
    }
    const report = (node: string, tenants: Record<string, number>): NodeLoad => ({ node, running: 3, max: 4, at: Date.now(), tenants })
    const seen = (loads: NodeLoad[]): Array<Pick<NodeLoad, 'node' | 'running' | 'max' | 'tenants'>> =>
      loads.map(({ node, running, max, tenants }) => ({ node, running, max, tenants })).sort((x, y) => x.node < y.node ? -1 : 1)

    it('another node reads a report as it was made', async () => {
      const { a, b, countedByB } = make()
      await a.reportNode(report('node-a', { 'tenant-a': 2, 'tenant-b': 1 }), TTL_MS)
      assert.deepEqual(seen(await b.listNodes()), [{ node: 'node-a', running: 3, max: 4, tenants: { 'tenant-a': 2, 'tenant-b': 1 } }])
      assert.deepEqual(countedByB, [])
    })

    it('a report altered in the store, or moved under another name, is left out, logged once and counted', async () => {
      const { a, b, raw, logsOfB, countedByB } = make()
      await a.reportNode(report('node-a', { 'tenant-a': 2 }), TTL_MS)
      await a.reportNode(report('node-c', {}), TTL_MS)
      const stored = await raw.get('node-a')
      // A tenant's sessions on node-a hidden (its limit would no longer hold across nodes); node-c given room.
      await raw.set('node-a', { ...stored, tenants: { 'tenant-a': 0 } })
      await raw.set('node-c', { ...(await raw.get('node-c')), running: 0, max: 1000 })
      // node-a's good report copied as a node nobody runs (creates would go to an inbox nobody reads).
      await raw.set('node-z', { ...stored, node: 'node-z' })
      assert.deepEqual(await b.listNodes(), [])
      assert.deepEqual(await b.listNodes(), [])
      assert.deepEqual(countedByB.sort(), Array(6).fill('node/mac'))
      const errors = logsOfB.filter((l) => l.level === 50)
      assert.deepEqual(errors.map((l) => l.node).sort(), ['node-a', 'node-c', 'node-z'], 'each refusal logged at error level once')
      assert.ok(errors.every((l) => l.reason === 'mac'))
    })

    it('a report kept past its time is left out, and one whose time was moved on is refused', async () => {
      const { a, b, raw, countedByB } = make()
      await a.reportNode({ ...report('node-a', {}), at: Date.now() - TTL_MS - 1 }, TTL_MS)
      const old = await raw.get('node-a')
      assert.deepEqual(await b.listNodes(), [], 'its time ran out')
      assert.deepEqual(countedByB, [], 'a node that stopped reporting is no refusal')
      // Written back with its time moved on (the store's own expiry with it).
      await raw.set('node-a', { ...old, until: Date.now() + TTL_MS })
      assert.deepEqual(await b.listNodes(), [])
      assert.deepEqual(countedByB, ['node/mac'])
    })

    it('a report without a MAC (a node of an older version) is refused unless STORE_ACCEPT_UNSIGNED', async () => {
      const plain = { running: 1, max: 4, at: Date.now(), until: Date.now() + TTL_MS, tenants: { 'tenant-a': 1 } }
      const strict = make()
      await strict.raw.set('node-old', plain)
      assert.deepEqual(await strict.b.listNodes(), [])
      assert.deepEqual(strict.countedByB, ['node/unsigned'])
      const upgrading = make({ acceptUnsigned: true })
      await upgrading.raw.set('node-old', plain)
      assert.deepEqual(seen(await upgrading.b.listNodes()), [{ node: 'node-old', running: 1, max: 4, tenants: { 'tenant-a': 1 } }])
      assert.deepEqual(upgrading.countedByB, [])
    })

    it('a report made with another secret is refused', async () => {
      const { a, b, countedByB } = make({ secretOfB: 'z'.repeat(43) })
      await a.reportNode(report('node-a', {}), TTL_MS)
      assert.deepEqual(await b.listNodes(), [])
      assert.deepEqual(countedByB, ['node/mac'])
    })
  })
}
