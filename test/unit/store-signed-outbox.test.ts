/**
 * SignedOutbox (src/store/signed-outbox.ts), as SignedStore gives it, over
 * both stores: what one node keeps another sharing the secret takes over as
 * it was kept; an entry altered in the store, written there unsigned,
 * copied under another id, or sealed with another secret is dropped (logged
 * once at error level, removed) while the good ones of the same takeover
 * are returned. Redis cases run against real Redis (TEST_REDIS_URL or
 * 127.0.0.1:6379, a fresh prefix per case), the entries changed with
 * commands of their own, behind the gateway's back.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { afterEach, describe, it } from 'node:test'
import pino from 'pino'
import { MemoryStore } from '../../src/store/memory.js'
import { RedisStore } from '../../src/store/redis.js'
import { SignedStore } from '../../src/store/signed-records.js'
import type { EventStore, OutboxEntry } from '../../src/store/store.js'
import { REDIS_URL, deleteKeys, redisCommand } from '../support/redis-server.js'
import { DEFAULT_RETENTION } from '../support/store-contract.js'

const SECRET = 'k'.repeat(43)

function capture (): { logger: pino.Logger, entries: () => any[] } {
  const lines: string[] = []
  const logger = pino({ level: 'trace' }, { write: (line: string) => { lines.push(line) } })
  return { logger, entries: () => lines.map((l) => JSON.parse(l)) }
}

interface Raw {
  /** The entries of `node` as the store holds them (sealed texts). */
  get: (node: string) => Promise<Map<string, string>>
  /** Writes an entry's stored text behind the gateway's back. */
  set: (node: string, id: string, text: string) => Promise<void>
}

interface Backend {
  /** Two stores on the same data, as two nodes open them. */
  inners: [EventStore, EventStore]
  raw: Raw
  cleanup: () => Promise<void>
}

const backends: Array<{ name: string, make: () => Backend }> = [
  {
    name: 'memory',
    make: () => {
      const inner = new MemoryStore({ retention: DEFAULT_RETENTION })
      const raw: Raw = {
        get: async (node) => new Map((await inner.outbox.takeOver(node, node)).map((e) => [e.id, e.text])),
        set: async (node, id, text) => { await inner.outbox.keep(node, { id, text }) }
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
        get: async (node) => {
          const flat = await redisCommand(REDIS_URL, ['HGETALL', `${prefix}{webhooks}:out:${node}`]) as string[]
          const entries = new Map<string, string>()
          for (let i = 0; i + 1 < flat.length; i += 2) entries.set(flat[i] as string, flat[i + 1] as string)
          return entries
        },
        set: async (node, id, text) => { await redisCommand(REDIS_URL, ['HSET', `${prefix}{webhooks}:out:${node}`, id, text]) }
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

function byId (entries: OutboxEntry[]): OutboxEntry[] {
  return [...entries].sort((a, b) => a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
}

for (const backend of backends) {
  describe(`SignedOutbox over ${backend.name}`, () => {
    const cleanups: Array<() => Promise<void>> = []
    afterEach(async () => { for (const c of cleanups.splice(0)) await c() })

    /** Node a and node b, each its SignedStore over the shared data, and what each logged. */
    /** `countedByB`: what b's onRefused (cgw_store_refused_total) was told, as `kind/reason`. */
    const make = (options: { secretOfB?: string, acceptUnsigned?: boolean } = {}): { a: SignedStore, b: SignedStore, raw: Raw, logsOfB: () => any[], countedByB: string[] } => {
      const { inners, raw, cleanup } = backend.make()
      cleanups.push(cleanup)
      const silent = pino({ level: 'silent' })
      const { logger, entries } = capture()
      const countedByB: string[] = []
      const onRefused = (kind: string, why: string): void => { countedByB.push(`${kind}/${why}`) }
      return {
        a: new SignedStore(inners[0], { secret: SECRET, allowBypassPermissions: false, logger: silent }),
        b: new SignedStore(inners[1], { secret: options.secretOfB ?? SECRET, allowBypassPermissions: false, logger, acceptUnsigned: options.acceptUnsigned, onRefused }),
        raw,
        logsOfB: entries,
        countedByB
      }
    }

    const refusals = (logs: () => any[]): Array<{ delivery: string, reason: string }> =>
      logs().filter((e) => e.level === 50).map((e) => ({ delivery: e.delivery, reason: e.reason })).sort((x, y) => x.delivery < y.delivery ? -1 : 1)

    it('what one node keeps, another sharing the secret takes over as it was kept; the store holds it sealed', async () => {
      const { a, b, raw, logsOfB } = make()
      const kept = [
        { id: 'd1', text: JSON.stringify({ v: 1, body: '{"data":"héllo \\u2028 🎉"}' }) },
        { id: 'd2', text: 'line\nbreak "quoted" \u2028 中文' },
        { id: 'd3', text: '' }
      ]
      for (const entry of kept) await a.outbox.keep('node-a', entry)
      const stored = await raw.get('node-a')
      for (const { id, text } of kept) {
        const sealed = stored.get(id) as string
        assert.match(sealed, /^cgwo1 [A-Za-z0-9_-]{43}\n/, `${id} is sealed`)
        assert.equal(sealed.slice(50), text, 'the text follows the seal unchanged')
      }
      await a.outbox.remove('node-a', ['d3'])
      assert.deepEqual(await b.outbox.nodes(), ['node-a'])
      assert.deepEqual(byId(await b.outbox.takeOver('node-a', 'node-b')), kept.slice(0, 2))
      assert.deepEqual(byId(await b.outbox.takeOver('node-b', 'node-b')), kept.slice(0, 2), 'still sealed under the node that took them')
      assert.deepEqual(refusals(logsOfB), [])
    })

    it('drops entries altered, written unsigned, or copied under another id, logged once each, and returns the good ones', async () => {
      const { a, b, raw, logsOfB, countedByB } = make()
      const good = [{ id: 'good-1', text: '{"v":1,"n":1}' }, { id: 'good-2', text: '{"v":1,"n":2}' }]
      for (const entry of [...good, { id: 'altered', text: '{"v":1,"url":"https://a.example"}' }]) await a.outbox.keep('node-a', entry)
      const stored = await raw.get('node-a')
      await raw.set('node-a', 'altered', (stored.get('altered') as string).replace('a.example', 'b.example'))
      await raw.set('node-a', 'unsigned', '{"v":1,"n":3}')
      await raw.set('node-a', 'copied', stored.get('good-1') as string)

      assert.deepEqual(byId(await b.outbox.takeOver('node-a', 'node-b')), good)
      assert.deepEqual(refusals(logsOfB), [
        { delivery: 'altered', reason: 'mac' },
        { delivery: 'copied', reason: 'mac' },
        { delivery: 'unsigned', reason: 'unsigned' }
      ])
      const line = logsOfB().find((e) => e.level === 50)
      assert.equal(line.from, 'node-a')
      assert.ok(!JSON.stringify(logsOfB()).includes('"n\\":3'), 'no text of an entry in the log')
      assert.deepEqual([...(await raw.get('node-b')).keys()].sort(), ['good-1', 'good-2'], 'the refused ones are removed, not left to fail again')
      assert.deepEqual(byId(await b.outbox.takeOver('node-b', 'node-b')), good)
      assert.equal(refusals(logsOfB).length, 3, 'nothing more refused')
      assert.deepEqual(countedByB.sort(), ['webhook/mac', 'webhook/mac', 'webhook/unsigned'])
    })

    it('logs an entry refused again at debug, and refuses unsigned entries even with STORE_ACCEPT_UNSIGNED', async () => {
      const { b, raw, logsOfB } = make({ acceptUnsigned: true })
      await raw.set('node-a', 'unsigned', 'plain')
      await b.outbox.keep('node-a', { id: 'signed', text: 'sealed' })
      assert.deepEqual(await b.outbox.takeOver('node-a', 'node-b'), [{ id: 'signed', text: 'sealed' }])
      await raw.set('node-b', 'unsigned', 'plain')
      assert.deepEqual(await b.outbox.takeOver('node-b', 'node-b'), [{ id: 'signed', text: 'sealed' }])
      assert.deepEqual(refusals(logsOfB), [{ delivery: 'unsigned', reason: 'unsigned' }])
      assert.equal(logsOfB().filter((e) => e.level === 20 && e.delivery === 'unsigned').length, 1, 'the second refusal at debug')
    })

    it('drops entries sealed with another secret', async () => {
      const { a, b, logsOfB } = make({ secretOfB: 'o'.repeat(43) })
      await a.outbox.keep('node-a', { id: 'd1', text: 'one' })
      assert.deepEqual(await b.outbox.takeOver('node-a', 'node-b'), [])
      assert.deepEqual(refusals(logsOfB), [{ delivery: 'd1', reason: 'mac' }])
    })
  })
}
