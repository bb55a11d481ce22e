/**
 * Conversation copies through SignedStore (src/store/conversation-seal.ts),
 * over the memory store and real Redis: what is stored carries a seal over
 * the session, the length and the bytes; appends reseal without sending the
 * file again; a copy changed, cut, moved to another session or saved without
 * a seal reads as absent (logged), so no resumed CLI reads it. Unsealed
 * copies of an older version are read only with STORE_ACCEPT_UNSIGNED.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { afterEach, describe, it } from 'node:test'
import pino from 'pino'
import { MemoryStore } from '../../src/store/memory.js'
import { RedisStore } from '../../src/store/redis.js'
import { SEAL_BYTES } from '../../src/store/conversation-seal.js'
import { SignedStore } from '../../src/store/signed-records.js'
import type { EventStore } from '../../src/store/store.js'
import { REDIS_URL, deleteKeys } from '../support/redis-server.js'
import { DEFAULT_RETENTION } from '../support/store-contract.js'

const SECRET = 'c'.repeat(40)
const LINES = ['{"type":"user","message":"hi"}\n', '{"type":"assistant","message":"é"}\n', '{"type":"user","tool_result":"ok"}\n']

const backends: Array<{ name: string, make: () => { inner: EventStore, cleanup: () => Promise<void> } }> = [
  {
    name: 'memory',
    make: () => {
      const inner = new MemoryStore({ retention: DEFAULT_RETENTION })
      return { inner, cleanup: () => inner.close() }
    }
  },
  {
    name: 'redis',
    make: () => {
      const prefix = `cgw-test:${randomUUID()}:`
      const inner = new RedisStore({ url: REDIS_URL, prefix, retention: DEFAULT_RETENTION })
      return { inner, cleanup: async () => { await inner.close(); await deleteKeys(REDIS_URL, prefix) } }
    }
  }
]

for (const backend of backends) {
  describe(`conversation copies through SignedStore over ${backend.name}`, () => {
    const cleanups: Array<() => Promise<void>> = []
    afterEach(async () => { for (const c of cleanups.splice(0)) await c() })

    /** A store over `inner` (the raw store: what someone with access to Redis sees and writes), and its log lines. */
    const signed = (inner: EventStore, acceptUnsigned = false): { store: SignedStore, logs: any[], counted: string[] } => {
      const logs: any[] = []
      const counted: string[] = []
      const logger = pino({ level: 'trace' }, { write: (line: string) => { logs.push(JSON.parse(line)) } })
      const onRefused = (kind: string, why: string): void => { counted.push(`${kind}/${why}`) }
      return { store: new SignedStore(inner, { secret: SECRET, allowBypassPermissions: false, logger, acceptUnsigned, onRefused }), logs, counted }
    }
    const make = (): EventStore => {
      const { inner, cleanup } = backend.make()
      cleanups.push(cleanup)
      return inner
    }

    it('stores a sealed copy, appends and reseals it, and reads back the file alone', async () => {
      const inner = make()
      const { store, logs } = signed(inner)
      const [one, two, three] = LINES.map((l) => Buffer.from(l)) as [Buffer, Buffer, Buffer]
      await store.saveConversation('s', one)
      const raw = await inner.loadConversation('s')
      assert.ok(raw !== null)
      assert.match(raw.toString('latin1', 0, SEAL_BYTES), /^cgws1 [A-Za-z0-9_-]{43}\n$/)
      assert.deepEqual(raw.subarray(SEAL_BYTES), one, 'the file follows its seal unchanged')
      assert.equal(await store.appendConversation('s', one.length, two), true)
      assert.equal(await store.appendConversation('s', one.length + two.length, three), true)
      assert.deepEqual(await store.loadConversation('s'), Buffer.concat([one, two, three]))
      assert.equal((await inner.loadConversation('s'))?.length, SEAL_BYTES + one.length + two.length + three.length, 'one seal, rewritten in place')
      // Another node sharing the secret reads it, and appends after it without saving it whole again.
      const other = signed(inner).store
      assert.deepEqual(await other.loadConversation('s'), Buffer.concat([one, two, three]))
      assert.equal(await other.appendConversation('s', one.length + two.length + three.length, one), true)
      assert.deepEqual(await store.loadConversation('s'), Buffer.concat([one, two, three, one]))
      assert.equal(logs.filter((l) => l.level >= 40).length, 0)
    })

    it('answers false to an append when it does not know the stored copy to be that long, so the caller saves whole', async () => {
      const inner = make()
      const a = signed(inner).store
      const b = signed(inner).store
      await a.saveConversation('s', Buffer.from(LINES[0] as string))
      assert.equal(await b.appendConversation('s', (LINES[0] as string).length, Buffer.from(LINES[1] as string)), false, 'b never read nor wrote the copy')
      assert.equal(await a.appendConversation('s', 3, Buffer.from(LINES[1] as string)), false, 'not at its length')
      await b.saveConversation('s', Buffer.from(LINES.join('')))
      // a's running hash is of a copy that is no longer there: the store's length check refuses, and a saves whole next.
      assert.equal(await a.appendConversation('s', (LINES[0] as string).length, Buffer.from(LINES[1] as string)), false)
      assert.deepEqual(await a.loadConversation('s'), Buffer.from(LINES.join('')))
    })

    it('reads as absent, and logs, a copy changed, cut, moved from another session or stored without a seal', async () => {
      const inner = make()
      const { store, logs, counted } = signed(inner)
      await store.saveConversation('s', Buffer.from(LINES.join('')))
      const good = await inner.loadConversation('s') as Buffer
      const cases: Array<[string, Buffer]> = [
        ['changed', Buffer.from(good.toString('latin1').replace('"ok"', '"no"'), 'latin1')],
        ['cut', good.subarray(0, good.length - (LINES[2] as string).length)],
        ['grown', Buffer.concat([good, Buffer.from('{"type":"user","message":"rm -rf ~"}\n')])],
        ['unsealed', Buffer.from(LINES.join(''))],
        ['seal alone', good.subarray(0, SEAL_BYTES - 1)]
      ]
      for (const [name, copy] of cases) {
        await inner.saveConversation('s', copy)
        assert.equal(await store.loadConversation('s'), null, name)
      }
      await inner.saveConversation('t', good)
      assert.equal(await store.loadConversation('t'), null, 'a copy sealed for session s, under session t')
      const errors = logs.filter((l) => l.level === 50)
      assert.deepEqual(errors.map((l) => [l.session, l.reason]), [
        ['s', 'conversation: seal does not match'],
        ['s', 'conversation: no seal'],
        ['t', 'conversation: seal does not match']
      ], 'one error line per session and reason (the rest at debug)')
      assert.match(errors[0].msg, /refused/)
      // cgw_store_refused_total: every refused read.
      assert.deepEqual(counted, ['mac', 'mac', 'mac', 'unsigned', 'unsigned', 'mac'].map((why) => `conversation/${why}`))
    })

    it('reads a copy saved without a seal (an older version) only with STORE_ACCEPT_UNSIGNED, and seals it at its next save', async () => {
      const inner = make()
      const { store, logs, counted } = signed(inner, true)
      await inner.saveConversation('s', Buffer.from(LINES[0] as string))
      assert.deepEqual(await store.loadConversation('s'), Buffer.from(LINES[0] as string))
      assert.equal(logs.filter((l) => l.level === 40).length, 1, 'logged at warn')
      assert.equal(await store.appendConversation('s', (LINES[0] as string).length, Buffer.from(LINES[1] as string)), false, 'not known sealed: saved whole')
      await store.saveConversation('s', Buffer.from(LINES.slice(0, 2).join('')))
      assert.deepEqual(await signed(inner).store.loadConversation('s'), Buffer.from(LINES.slice(0, 2).join('')), 'sealed now: read without the setting')
      // A copy whose seal is wrong is refused whatever the setting.
      const sealed = await inner.loadConversation('s') as Buffer
      await inner.saveConversation('s', Buffer.concat([sealed, Buffer.from('{"x":1}\n')]))
      assert.equal(await store.loadConversation('s'), null)
      assert.deepEqual(counted, ['conversation/mac'], 'the unsealed copy read with the setting is not counted')
    })
  })
}
