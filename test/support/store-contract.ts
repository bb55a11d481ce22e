/**
 * The EventStore contract: one node:test suite every implementation must
 * pass (memory and Redis, see test/unit/store-contract.test.ts).
 *
 * `makeStore` is called once per case with the retention that case needs and
 * must return an empty, isolated store plus a cleanup that releases it.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, afterEach, describe, it } from 'node:test'
import type { EventStore, OutboxEntry, RetentionOptions, SessionRecord, SessionStatus, StoredEvent } from '../../src/store/store.js'
import { eventually } from './waiters.js'

export interface StoreHandle {
  store: EventStore
  cleanup: () => Promise<void>
  /**
   * Another store on the same data, as a second node opens it (its own
   * connections), closed by `cleanup`. Omitted where the data lives in the
   * one store object (memory): cases needing two nodes then use `store` twice.
   */
  peer?: (() => Promise<EventStore>) | undefined
}

export interface ContractOptions {
  /**
   * Events a store may hold beyond `maxEventsPerSession` after trimming.
   * Memory trims in slices of a tenth; Redis (`MAXLEN ~`) only drops whole
   * stream nodes (up to `stream-node-max-entries`, 100 by default).
   */
  trimSlack: (max: number) => number
}

export const DEFAULT_RETENTION: RetentionOptions = { maxEventsPerSession: 100_000, ttlSecondsAfterEnd: 0 }

export function storeContract (
  name: string,
  makeStore: (retention: RetentionOptions) => Promise<StoreHandle>,
  options: ContractOptions
): void {
  describe(`EventStore contract: ${name}`, () => {
    const open: StoreHandle[] = []
    const make = async (retention: Partial<RetentionOptions> = {}): Promise<EventStore> => {
      const handle = await makeStore({ ...DEFAULT_RETENTION, ...retention })
      open.push(handle)
      return handle.store
    }
    /** Two stores on the same data, as two nodes have (one store twice where the data lives in one object). */
    const makeTwo = async (): Promise<[EventStore, EventStore]> => {
      const handle = await makeStore(DEFAULT_RETENTION)
      open.push(handle)
      return [handle.store, handle.peer === undefined ? handle.store : await handle.peer()]
    }
    afterEach(async () => {
      for (const handle of open.splice(0)) await handle.cleanup()
    })
    after(async () => {
      for (const handle of open.splice(0)) await handle.cleanup()
    })

    it('reports a kind and answers ping', async () => {
      const store = await make()
      assert.equal(typeof store.kind, 'string')
      assert.ok(store.kind.length > 0)
      await store.ping()
    })

    it('reads back appended events in order', async () => {
      const store = await make()
      await store.append('s1', events(1, 3))
      await store.append('s1', events(4, 10))
      assert.deepEqual(await store.read('s1', 0, 100), events(1, 10))
      assert.deepEqual(await store.read('other', 0, 100), [])
    })

    it('an empty append is a no-op', async () => {
      const store = await make()
      await store.append('s1', [])
      assert.deepEqual(await store.read('s1', 0, 10), [])
      assert.equal(await store.firstSeq('s1'), null)
    })

    it('pages reads with after and limit', async () => {
      const store = await make()
      await store.append('s1', events(1, 25))
      assert.deepEqual(await store.read('s1', 0, 10), events(1, 10))
      assert.deepEqual(await store.read('s1', 10, 10), events(11, 20))
      assert.deepEqual(await store.read('s1', 20, 10), events(21, 25))
      assert.deepEqual(await store.read('s1', 25, 10), [])
      assert.deepEqual(await store.read('s1', 100, 10), [])
      assert.deepEqual(await store.read('s1', 7, 1), events(8, 8))
      assert.deepEqual(await store.read('s1', 3, 0), [])
      // Paging through everything with a small limit yields each event once.
      const seen: StoredEvent[] = []
      let cursor = 0
      while (true) {
        const page = await store.read('s1', cursor, 4)
        if (page.length === 0) break
        seen.push(...page)
        cursor = (page[page.length - 1] as StoredEvent).seq
      }
      assert.deepEqual(seen, events(1, 25))
    })

    it('a read with maxBytes stops before the event that would pass it, counting UTF-8 bytes of frames', async () => {
      const store = await make()
      // Frames of exactly 100, 200, 300, 400 and 500 bytes; the 300-byte one is mostly 2-byte characters.
      const sized = [100, 200, 300, 400, 500].map((bytes, i) => ({ seq: i + 1, frame: sizedFrame(i + 1, bytes, i === 2 ? 'é' : 'x') }))
      assert.deepEqual(sized.map((e) => Buffer.byteLength(e.frame)), [100, 200, 300, 400, 500])
      await store.append('s1', sized)
      assert.deepEqual(await store.read('s1', 0, 100, 600), sized.slice(0, 3), 'exactly at the budget')
      assert.deepEqual(await store.read('s1', 0, 100, 599), sized.slice(0, 2), 'the 2-byte characters count as 2 bytes each')
      assert.deepEqual(await store.read('s1', 2, 100, 700), sized.slice(2, 4))
      assert.deepEqual(await store.read('s1', 0, 100, 10_000), sized)
      assert.deepEqual(await store.read('s1', 5, 100, 10_000), [])
      // With a count limit too, whichever ends the page first.
      assert.deepEqual(await store.read('s1', 0, 2, 10_000), sized.slice(0, 2))
      assert.deepEqual(await store.read('s1', 1, 3, 550), sized.slice(1, 3))
      assert.deepEqual(await store.read('s1', 0, 0, 10_000), [])
      // Paging with a budget yields each event once.
      const seen: StoredEvent[] = []
      for (let cursor = 0; ;) {
        const page = await store.read('s1', cursor, 1000, 450)
        if (page.length === 0) break
        seen.push(...page)
        cursor = (page[page.length - 1] as StoredEvent).seq
      }
      assert.deepEqual(seen, sized)
    })

    it('a read with maxBytes always returns at least one event, however large', async () => {
      const store = await make()
      const big = { seq: 2, frame: sizedFrame(2, 1024 * 1024) }
      await store.append('s1', [{ seq: 1, frame: sizedFrame(1, 50) }, big, { seq: 3, frame: sizedFrame(3, 50) }])
      assert.deepEqual(await store.read('s1', 0, 10, 1000), [{ seq: 1, frame: sizedFrame(1, 50) }], 'stops before the large one')
      assert.deepEqual(await store.read('s1', 1, 10, 1000), [big], 'then it comes alone')
      assert.deepEqual(await store.read('s1', 1, 10, 0), [big])
      assert.deepEqual(await store.read('s1', 2, 10, 0), [{ seq: 3, frame: sizedFrame(3, 50) }])
    })

    it('a read without maxBytes is bounded by count only', async () => {
      const store = await make()
      const many = Array.from({ length: 300 }, (_, i) => ({ seq: i + 1, frame: sizedFrame(i + 1, 4000) }))
      await store.append('s1', many)
      assert.deepEqual(await store.read('s1', 0, 1000), many)
      assert.deepEqual(await store.read('s1', 0, 1000, undefined), many)
      assert.deepEqual(await store.read('s1', 10, 250), many.slice(10, 260))
      // The same events with a budget: 1 MB holds 250 frames of 4000 bytes, read at once.
      assert.deepEqual(await store.read('s1', 0, 1000, 1_000_000), many.slice(0, 250))
      assert.deepEqual(await store.read('s1', 250, 1000, 1_000_000), many.slice(250))
    })

    it('readRaw gives the events read gives, each frame as the UTF-8 bytes of its text', async () => {
      const store = await make()
      // Multi-byte text of every UTF-8 length, U+2028/2029 (valid raw in JSON), escapes, and a frame split by the budget.
      const texts = ['plain', 'é ü ß', '世界 — “quotes”', '🙂 𝄞 emoji', 'line\u2028sep\u2029para', 'esc \\" \\n \\u0000', 'ü'.repeat(300)]
      const stored = texts.map((text, i) => ({ seq: i + 1, frame: JSON.stringify({ seq: i + 1, type: 'assistant', text }) }))
      await store.append('s1', stored)
      const same = async (after: number, limit: number, maxBytes?: number): Promise<void> => {
        const raw = await store.readRaw('s1', after, limit, maxBytes)
        const read = await store.read('s1', after, limit, maxBytes)
        assert.deepEqual(raw.map((e) => e.seq), read.map((e) => e.seq), `seqs after=${after} limit=${limit} maxBytes=${maxBytes}`)
        for (const [i, e] of raw.entries()) {
          assert.ok(Buffer.isBuffer(e.frame))
          assert.ok(e.frame.equals(Buffer.from((read[i] as StoredEvent).frame)), `frame ${e.seq}: byte-identical`)
          assert.equal(e.frame.toString('utf8'), (stored[e.seq - 1] as StoredEvent).frame, `frame ${e.seq}: the text appended`)
        }
      }
      await same(0, 100)
      await same(0, 100, 10_000)
      await same(2, 3)
      await same(2, 3, 10_000)
      // Budgets in bytes, not characters: cut inside the run of 2-byte characters' frame and before it.
      const bytes = stored.map((e) => Buffer.byteLength(e.frame))
      const upToSix = bytes.slice(0, 6).reduce((a, b) => a + b, 0)
      await same(0, 100, upToSix)
      await same(0, 100, upToSix + (bytes[6] as number) - 1)
      await same(6, 100, 0)
      await same(7, 100)
      await same(0, 0, 10_000)
      assert.deepEqual(await store.readRaw('other', 0, 100), [])
      assert.deepEqual(await store.readRaw('other', 0, 100, 1000), [])
    })

    it('readRaw up to a seq gives none past it, with or without a budget', async () => {
      const store = await make()
      const stored = events(1, 8)
      await store.append('s1', stored)
      const seqs = async (after: number, limit: number, maxBytes: number | undefined, upTo: number): Promise<number[]> =>
        (await store.readRaw('s1', after, limit, maxBytes, upTo)).map((e) => e.seq)
      assert.deepEqual(await seqs(0, 100, undefined, 5), [1, 2, 3, 4, 5])
      assert.deepEqual(await seqs(0, 100, 100_000, 5), [1, 2, 3, 4, 5])
      assert.deepEqual(await seqs(2, 2, 100_000, 5), [3, 4])
      assert.deepEqual(await seqs(5, 100, 100_000, 5), [])
      // The budget still cuts: three frames' bytes.
      const three = stored.slice(0, 3).reduce((sum, e) => sum + Buffer.byteLength(e.frame), 0)
      assert.deepEqual(await seqs(0, 100, three, 8), [1, 2, 3])
      const raw = await store.readRaw('s1', 0, 100, 100_000, 8)
      assert.deepEqual(raw.map((e) => e.frame.toString('utf8')), stored.map((e) => e.frame))
    })

    it('re-appending held seqs is a no-op (no duplicates)', async () => {
      const store = await make()
      await store.append('s1', events(1, 5))
      await store.append('s1', events(1, 5)) // whole batch retried
      await store.append('s1', events(3, 8)) // retried batch overlapping new events
      await store.append('s1', events(8, 8))
      await store.append('s1', events(9, 9))
      assert.deepEqual(await store.read('s1', 0, 100), events(1, 9))
      // A retry never replaces the held frame.
      await store.append('s1', [{ seq: 4, frame: frameFor(4, 'changed') }])
      assert.deepEqual(await store.read('s1', 3, 1), events(4, 4))
    })

    it('retried appends racing each other do not duplicate', async () => {
      const store = await make()
      await Promise.all([store.append('s1', events(1, 20)), store.append('s1', events(1, 20)), store.append('s1', events(1, 10))])
      assert.deepEqual(await store.read('s1', 0, 100), events(1, 20))
    })

    it('firstSeq is the oldest held seq and lastSeq the newest, null when empty', async () => {
      const store = await make()
      assert.equal(await store.firstSeq('s1'), null)
      assert.equal(await store.lastSeq('s1'), null)
      await store.append('s1', events(5, 9))
      assert.equal(await store.firstSeq('s1'), 5)
      assert.equal(await store.lastSeq('s1'), 9)
      assert.deepEqual(await store.read('s1', 0, 100), events(5, 9))
      await store.append('s1', events(10, 12))
      assert.equal(await store.lastSeq('s1'), 12)
      assert.equal(await store.lastSeq('other'), null)
    })

    it('keeps sessions separate', async () => {
      const store = await make()
      await store.append('a', events(1, 3, 'a'))
      await store.append('b', events(1, 5, 'b'))
      assert.deepEqual(await store.read('a', 0, 100), events(1, 3, 'a'))
      assert.deepEqual(await store.read('b', 0, 100), events(1, 5, 'b'))
    })

    it('trims to about maxEventsPerSession, keeping the newest contiguous events', async () => {
      const max = 250
      const total = 1000
      const store = await make({ maxEventsPerSession: max })
      for (let from = 1; from <= total; from += 37) await store.append('s1', events(from, Math.min(total, from + 36)))
      const held = await store.read('s1', 0, total * 2)
      assert.ok(held.length >= max, `held ${held.length} < max ${max}`)
      assert.ok(held.length <= max + options.trimSlack(max), `held ${held.length} > max ${max} + slack ${options.trimSlack(max)}`)
      const first = (held[0] as StoredEvent).seq
      assert.deepEqual(held, events(first, total))
      assert.equal(await store.firstSeq('s1'), first)
      // Reading from before the oldest held event starts at the oldest held.
      assert.deepEqual(await store.read('s1', 0, 3), events(first, first + 2))
      // A retried batch of trimmed seqs does not come back.
      await store.append('s1', events(1, 10))
      assert.equal(await store.firstSeq('s1'), first)
    })

    it('round-trips a 1 MiB frame', async () => {
      const store = await make()
      const big = JSON.stringify({ type: 'assistant', seq: 1, text: 'x'.repeat(1024 * 1024) })
      await store.append('s1', [{ seq: 1, frame: big }, { seq: 2, frame: frameFor(2) }])
      const got = await store.read('s1', 0, 10)
      assert.equal(got.length, 2)
      assert.equal(got[0]?.frame.length, big.length)
      assert.ok(got[0]?.frame === big)
      assert.deepEqual(got[1], { seq: 2, frame: frameFor(2) })
    })

    it('round-trips unicode exactly (U+2028, U+2029, emoji, NUL)', async () => {
      const store = await make()
      const text = 'line\u2028sep\u2029para 😀 👩‍👩‍👧 é ß 中文 \u0000 \\u2028 "quoted"'
      const frame = JSON.stringify({ seq: 1, text })
      await store.append('s1', [{ seq: 1, frame }])
      const [got] = await store.read('s1', 0, 1)
      assert.equal(got?.frame, frame)
      assert.equal((JSON.parse(got?.frame ?? 'null') as { text: string }).text, text)
      const record = session({ id: 'uni', metadata: { text } })
      await store.putSession(record)
      assert.deepEqual(await store.getSession('uni'), record)
    })

    it('stores the frames, not their bytes, when an append brings them encoded (one buffer, separate ones, or some without)', async () => {
      const store = await make()
      // 1,200 events: more than one script call's worth on Redis. Multi-byte text throughout.
      const all = Array.from({ length: 1200 }, (_v, i) => ({ seq: i + 1, frame: JSON.stringify({ seq: i + 1, text: `é 中 😀 ${'x'.repeat(i % 97)}` }) }))
      // As a session encodes a batch (frame-bytes.ts): views of one buffer, back to back.
      const joined = Buffer.from(all.slice(0, 700).map((e) => e.frame).join(''))
      let at = 0
      const batch = all.slice(0, 700).map((e) => {
        const n = Buffer.byteLength(e.frame)
        const bytes = joined.subarray(at, at + n)
        at += n
        return { ...e, bytes }
      })
      await store.append('s1', batch)
      // Separate buffers, and every third event with none.
      await store.append('s1', all.slice(700).map((e, i) => i % 3 === 0 ? e : { ...e, bytes: Buffer.from(e.frame) }))
      const read = await store.read('s1', 0, 2000)
      assert.deepEqual(read, all, 'every frame as given, once, in order')
      assert.ok(read.every((e) => !('bytes' in e)), 'reads give frames, not the appender\'s bytes')
    })

    it('putSession/getSession round trip, replace and copies', async () => {
      const store = await make()
      assert.equal(await store.getSession('nope'), null)
      const record = session({
        id: 's1',
        options: { model: 'x', nested: { list: [1, 'two', null, { deep: true }] }, empty: {} },
        metadata: { label: 'hello', n: 1.5, tags: ['a', 'b'] },
        last_seq: 42,
        resumable: true
      })
      await store.putSession(record)
      assert.deepEqual(await store.getSession('s1'), record)
      // The store holds a copy: changing the caller's object or a returned one changes nothing stored.
      const expected = structuredClone(record)
      record.status = 'stopped'
      ;(record.options as { model: string }).model = 'changed'
      const got = await store.getSession('s1') as SessionRecord
      got.last_seq = 1
      assert.deepEqual(await store.getSession('s1'), expected)
      // Replacing.
      const ended = session({
        ...expected,
        status: 'exited',
        last_seq: 50,
        updated_at: new Date(Date.parse(expected.updated_at) + 1000).toISOString(),
        exit: { code: 1, signal: null, stderr_tail: ['boom', 'line 2'], reason: 'exited', at: new Date().toISOString() }
      })
      await store.putSession(ended)
      assert.deepEqual(await store.getSession('s1'), ended)
      const nulls = session({ id: 's2', metadata: null, exit: { code: null, signal: 'SIGTERM', stderr_tail: [], reason: 'stopped', at: new Date().toISOString() } })
      await store.putSession(nulls)
      assert.deepEqual(await store.getSession('s2'), nulls)
    })

    it('lists a tenant newest first, paging with a stable cursor', async () => {
      const store = await make()
      const base = Date.parse('2025-01-01T00:00:00.000Z')
      const records: SessionRecord[] = []
      // 11 sessions, with ties on created_at to check the id tie-break.
      const offsets = [0, 1000, 1000, 1000, 2000, 3000, 3000, 4000, 5000, 6000, 6000]
      offsets.forEach((offset, i) => {
        records.push(session({ id: `sess-${String(i).padStart(2, '0')}`, tenant: 't1', created_at: new Date(base + offset).toISOString() }))
      })
      for (const record of shuffled(records)) await store.putSession(record)
      await store.putSession(session({ id: 'other-1', tenant: 't2', created_at: new Date(base + 500).toISOString() }))
      // Updating a record does not duplicate it in the listing.
      await store.putSession({ ...(records[4] as SessionRecord), status: 'exited' })
      records[4] = { ...(records[4] as SessionRecord), status: 'exited' }
      const expected = [...records].sort(newestFirst)

      const all = await store.listSessions('t1', { limit: 100 })
      assert.deepEqual(all.sessions, expected)
      assert.equal(all.next_cursor, null)

      for (const limit of [1, 2, 3, 4, 11, 12]) {
        const got: SessionRecord[] = []
        let cursor: string | undefined
        let pages = 0
        while (true) {
          const page = await store.listSessions('t1', { limit, cursor })
          assert.ok(page.sessions.length <= limit)
          got.push(...page.sessions)
          pages++
          assert.ok(pages <= records.length + 1, 'pagination does not end')
          if (page.next_cursor === null) break
          assert.equal(page.sessions.length, limit, 'a page with a next cursor is full')
          cursor = page.next_cursor
        }
        assert.deepEqual(got.map((r) => r.id), expected.map((r) => r.id), `limit ${limit}`)
        assert.equal(pages, Math.max(1, Math.ceil(records.length / limit)), `pages for limit ${limit}`)
      }
      // A page that ends exactly at the last session has no next cursor.
      const exact = await store.listSessions('t1', { limit: 11 })
      assert.equal(exact.sessions.length, 11)
      assert.equal(exact.next_cursor, null)
    })

    it('a cursor keeps working when sessions are added after it was issued', async () => {
      const store = await make()
      const base = Date.parse('2025-02-01T00:00:00.000Z')
      for (let i = 0; i < 5; i++) await store.putSession(session({ id: `s${i}`, tenant: 't', created_at: new Date(base + i * 1000).toISOString() }))
      const first = await store.listSessions('t', { limit: 2 })
      assert.deepEqual(first.sessions.map((r) => r.id), ['s4', 's3'])
      await store.putSession(session({ id: 's9', tenant: 't', created_at: new Date(base + 9000).toISOString() }))
      const second = await store.listSessions('t', { limit: 2, cursor: first.next_cursor as string })
      assert.deepEqual(second.sessions.map((r) => r.id), ['s2', 's1'])
      const third = await store.listSessions('t', { limit: 2, cursor: second.next_cursor as string })
      assert.deepEqual(third.sessions.map((r) => r.id), ['s0'])
      assert.equal(third.next_cursor, null)
    })

    it('a cursor from beyond any session lists from the newest', async () => {
      const store = await make()
      await store.putSession(session({ id: 'only', tenant: 't' }))
      for (const text of ['1e20:zzz', `${Number.MAX_SAFE_INTEGER}:x`, '99999999999999:']) {
        const cursor = Buffer.from(text).toString('base64url')
        const page = await store.listSessions('t', { limit: 10, cursor })
        assert.deepEqual(page.sessions.map((r) => r.id), ['only'], text)
      }
    })

    it('keeps tenants apart', async () => {
      const store = await make()
      await store.putSession(session({ id: 'a1', tenant: 'alpha' }))
      await store.putSession(session({ id: 'b1', tenant: 'beta' }))
      await store.putSession(session({ id: 'a2', tenant: 'alpha' }))
      const alpha = await store.listSessions('alpha', { limit: 10 })
      assert.deepEqual(alpha.sessions.map((r) => r.id).sort(), ['a1', 'a2'])
      const beta = await store.listSessions('beta', { limit: 10 })
      assert.deepEqual(beta.sessions.map((r) => r.id), ['b1'])
      assert.deepEqual(await store.listSessions('gamma', { limit: 10 }), { sessions: [], next_cursor: null })
    })

    it('listLive returns exactly the sessions not in a final state', async () => {
      const store = await make()
      assert.deepEqual(await store.listLive(), [])
      const statuses: SessionStatus[] = ['starting', 'running', 'stopping', 'stopped', 'exited']
      for (const [i, status] of statuses.entries()) await store.putSession(session({ id: `l${i}`, status, tenant: i % 2 === 0 ? 'x' : 'y' }))
      const ids = async (): Promise<string[]> => (await store.listLive()).map((r) => r.id).sort()
      assert.deepEqual(await ids(), ['l0', 'l1', 'l2'])
      // Ending and reviving move sessions out of and back into the live list.
      await store.putSession(session({ id: 'l1', status: 'exited' }))
      await store.putSession(session({ id: 'l3', status: 'running' }))
      assert.deepEqual(await ids(), ['l0', 'l2', 'l3'])
      const live = await store.listLive()
      assert.deepEqual(live.find((r) => r.id === 'l3'), session({ id: 'l3', status: 'running' }))
    })

    it('expires a session and its events ttlSecondsAfterEnd after a final status', async () => {
      const store = await make({ ttlSecondsAfterEnd: 1 })
      const created = new Date().toISOString()
      await store.putSession(session({ id: 'gone', tenant: 't', status: 'running', created_at: created }))
      await store.append('gone', events(1, 5))
      await store.putSession(session({ id: 'gone', tenant: 't', status: 'exited', created_at: created }))
      await store.append('gone', events(6, 7)) // late events of an ended session expire with it
      // A session that is still running, and one that ended and was revived, stay.
      await store.putSession(session({ id: 'kept', tenant: 't', status: 'running' }))
      await store.append('kept', events(1, 3))
      await store.putSession(session({ id: 'revived', tenant: 't', status: 'stopped' }))
      await store.append('revived', events(1, 2))
      await store.putSession(session({ id: 'revived', tenant: 't', status: 'running' }))
      // A session with no events yet, whose events arrive after it ended.
      await store.putSession(session({ id: 'late', tenant: 't', status: 'stopped' }))
      await store.append('late', events(1, 2))

      assert.equal((await store.getSession('gone'))?.status, 'exited')
      await eventually(async () => await store.getSession('gone') === null && await store.getSession('late') === null, 10_000, 'ended sessions to expire')
      assert.deepEqual(await store.read('gone', 0, 100), [])
      assert.equal(await store.firstSeq('gone'), null)
      assert.deepEqual(await store.read('late', 0, 100), [])
      assert.equal(await store.firstSeq('late'), null)
      const listed = await store.listSessions('t', { limit: 10 })
      assert.deepEqual(listed.sessions.map((r) => r.id).sort(), ['kept', 'revived'])
      assert.equal(listed.next_cursor, null)
      assert.deepEqual(await store.read('kept', 0, 100), events(1, 3))
      assert.deepEqual(await store.read('revived', 0, 100), events(1, 2))
      assert.equal((await store.getSession('revived'))?.status, 'running')
      assert.deepEqual((await store.listLive()).map((r) => r.id).sort(), ['kept', 'revived'])
    })

    it('ttlSecondsAfterEnd 0 keeps ended sessions', async () => {
      const store = await make({ ttlSecondsAfterEnd: 0 })
      await store.putSession(session({ id: 'e', status: 'exited' }))
      await store.append('e', events(1, 2))
      // There is no event to wait for; a second expiring store shows time has passed.
      const witness = await make({ ttlSecondsAfterEnd: 1 })
      await witness.putSession(session({ id: 'w', status: 'exited' }))
      await eventually(async () => await witness.getSession('w') === null, 10_000, 'witness to expire')
      assert.equal((await store.getSession('e'))?.status, 'exited')
      assert.deepEqual(await store.read('e', 0, 10), events(1, 2))
    })

    describe('leases', () => {
      it('keeps a conversation copy byte for byte, fenced, expiring with its ended session', async () => {
        const store = await make({ ttlSecondsAfterEnd: 1 })
        assert.equal(await store.loadConversation('s'), null)
        const bytes = Buffer.concat([Buffer.from('-tmp-work\n{"a":"é"}\n'), Buffer.from([0xff, 0x00, 0x0a])])
        const lease = await store.leases.acquire('s', 'node-a', 10_000)
        assert.ok(lease !== null)
        await store.putSession(session({ id: 's' }), lease)
        await store.saveConversation('s', bytes, lease)
        assert.deepEqual(await store.loadConversation('s'), bytes)
        const taken = await store.leases.acquire('s', 'node-b', 10_000, { takeFrom: 'node-a' })
        assert.ok(taken !== null)
        await assert.rejects(store.saveConversation('s', Buffer.from('stale\n'), lease), (err: Error) => err.name === 'FencedError')
        assert.deepEqual(await store.loadConversation('s'), bytes)
        await store.putSession(session({ id: 's', status: 'stopped' }), taken)
        await eventually(async () => await store.loadConversation('s') === null, 10_000, 'the conversation to expire with its session')
      })

      it('appends to a conversation copy only at its stored length, fenced', async () => {
        const store = await make()
        const lease = await store.leases.acquire('s', 'node-a', 10_000)
        assert.ok(lease !== null)
        await store.putSession(session({ id: 's' }), lease)
        assert.equal(await store.appendConversation('s', 0, Buffer.from('p\n'), lease), false, 'nothing stored yet: nothing to append to')
        assert.equal(await store.loadConversation('s'), null)
        await store.saveConversation('s', Buffer.from('p\n{"a":1}\n'), lease)
        assert.equal(await store.appendConversation('s', 10, Buffer.from('{"b":"é"}\n'), lease), true)
        assert.deepEqual(await store.loadConversation('s'), Buffer.from('p\n{"a":1}\n{"b":"é"}\n'))
        for (const at of [10, 22, 0]) {
          assert.equal(await store.appendConversation('s', at, Buffer.from('{"c":3}\n'), lease), false, `not at ${at}`)
        }
        assert.deepEqual(await store.loadConversation('s'), Buffer.from('p\n{"a":1}\n{"b":"é"}\n'), 'unchanged')
        const taken = await store.leases.acquire('s', 'node-b', 10_000, { takeFrom: 'node-a' })
        assert.ok(taken !== null)
        await assert.rejects(store.appendConversation('s', 21, Buffer.from('{"d":4}\n'), lease), (err: Error) => err.name === 'FencedError')
        assert.equal(await store.appendConversation('s', 21, Buffer.from('{"d":4}\n'), taken), true)
        assert.equal((await store.loadConversation('s'))?.toString(), 'p\n{"a":1}\n{"b":"é"}\n{"d":4}\n')
        // A head is written over the copy's first bytes in the same step, and only when the append is made.
        assert.equal(await store.appendConversation('s', 28, Buffer.from('{"e":5}\n'), taken, Buffer.from('P')), false)
        assert.equal(await store.appendConversation('s', 29, Buffer.from('{"e":5}\n'), taken, Buffer.from('Q')), true)
        assert.equal((await store.loadConversation('s'))?.toString(), 'Q\n{"a":1}\n{"b":"é"}\n{"d":4}\n{"e":5}\n')
      })

      it('claims a key once until its TTL; keeps node loads until theirs', async () => {
        const store = await make()
        assert.equal(await store.claimOnce('ticket:a', 150), true)
        assert.equal(await store.claimOnce('ticket:a', 150), false)
        assert.equal(await store.claimOnce('ticket:b', 150), true, 'keys are independent')
        await eventually(async () => await store.claimOnce('ticket:a', 10_000), 5000, 'the claim to lapse')
        await store.reportNode({ node: 'n1', running: 1, max: 4, at: Date.now() }, 10_000)
        await store.reportNode({ node: 'n2', running: 0, max: 4, at: Date.now() }, 150)
        assert.deepEqual((await store.listNodes()).map((n) => n.node).sort(), ['n1', 'n2'])
        await eventually(async () => (await store.listNodes()).length === 1, 5000, 'the short report to lapse')
        assert.deepEqual((await store.listNodes()).map(({ node, running, max }) => ({ node, running, max })), [{ node: 'n1', running: 1, max: 4 }])
        await store.forgetNode('n1')
        assert.deepEqual(await store.listNodes(), [])
      })

      it('one node holds a session; epochs grow with each acquisition', async () => {
        const store = await make()
        const a = await store.leases.acquire('s', 'node-a', 10_000)
        assert.ok(a !== null)
        assert.equal(await store.leases.acquire('s', 'node-b', 10_000), null, 'held by node-a')
        const holder = await store.leases.holder('s')
        assert.equal(holder?.node, 'node-a')
        assert.equal(holder?.epoch, a.epoch)
        assert.ok((holder?.ttlMs ?? 0) > 0 && (holder?.ttlMs ?? 0) <= 10_000)
        await store.leases.release(a)
        assert.equal(await store.leases.holder('s'), null)
        const b = await store.leases.acquire('s', 'node-b', 10_000)
        assert.ok(b !== null && b.epoch > a.epoch, 'a later acquisition has a higher epoch')
        assert.equal(await store.leases.holder('other'), null)
      })

      it('a lease held by the node itself or by a node named dead is taken over', async () => {
        const store = await make()
        const first = await store.leases.acquire('s', 'node-a', 10_000)
        const again = await store.leases.acquire('s', 'node-a', 10_000)
        assert.ok(first !== null && again !== null && again.epoch > first.epoch)
        assert.equal(await store.leases.acquire('s', 'node-b', 10_000, { takeFrom: 'node-c' }), null)
        const taken = await store.leases.acquire('s', 'node-b', 10_000, { takeFrom: 'node-a' })
        assert.equal(taken?.node, 'node-b')
        assert.equal(await store.leases.renew(again, 10_000), false, 'node-a is fenced')
      })

      it('writes under a lease are refused once another node acquired it', async () => {
        const store = await make()
        const a = await store.leases.acquire('s', 'node-a', 10_000)
        assert.ok(a !== null)
        await store.append('s', events(1, 2), a)
        await store.putSession(session({ id: 's', last_seq: 2 }), a)
        const b = await store.leases.acquire('s', 'node-b', 10_000, { takeFrom: 'node-a' })
        assert.ok(b !== null)
        await assert.rejects(store.append('s', events(3, 3, 'stale'), a), (err: Error) => err.name === 'FencedError')
        await assert.rejects(store.putSession(session({ id: 's', status: 'running', last_seq: 3 }), a), (err: Error) => err.name === 'FencedError')
        await store.append('s', events(3, 4, 'b'), b)
        await store.putSession(session({ id: 's', status: 'stopped', last_seq: 4 }), b)
        assert.deepEqual(await store.read('s', 0, 10), [...events(1, 2), ...events(3, 4, 'b')])
        assert.equal((await store.getSession('s'))?.status, 'stopped')
        // Without a lease nothing is checked (writes of a node that holds no session).
        await store.append('s', events(5, 5))
        assert.equal(await store.lastSeq('s'), 5)
      })

      it('a lapsed lease fences its holder once anyone acquired it, and comes back when nobody did', async () => {
        const store = await make()
        const a = await store.leases.acquire('s', 'node-a', 150)
        assert.ok(a !== null)
        await eventually(async () => await store.leases.holder('s') === null, 5000, 'the lease to lapse')
        await assert.rejects(store.append('s', events(1, 1), a), (err: Error) => err.name === 'FencedError', 'a lapsed lease writes nothing')
        assert.equal(await store.leases.renew(a, 10_000), true, 'nobody acquired it meanwhile: taken back')
        await store.append('s', events(1, 1), a)
        const short = await store.leases.acquire('t', 'node-a', 150)
        assert.ok(short !== null)
        await eventually(async () => await store.leases.holder('t') === null, 5000, 'the lease to lapse')
        const b = await store.leases.acquire('t', 'node-b', 10_000)
        assert.ok(b !== null)
        await store.leases.release(b)
        assert.equal(await store.leases.renew(short, 10_000), false, 'acquired and released by node-b since: fenced')
        await assert.rejects(store.append('t', events(1, 1), short), (err: Error) => err.name === 'FencedError')
        assert.equal(await store.lastSeq('t'), null)
      })
    })

    describe('webhook outbox', () => {
      it('keeps entries per node until removed, and lists the nodes that have some', async () => {
        const { outbox } = await make()
        assert.deepEqual(await outbox.nodes(), [])
        await outbox.keep('node-a', { id: 'd1', text: 'one' })
        await outbox.keep('node-a', { id: 'd2', text: 'two' })
        await outbox.keep('node-b', { id: 'd3', text: 'three' })
        await outbox.keep('node-a', { id: 'd2', text: 'two, again' })
        assert.deepEqual((await outbox.nodes()).sort(), ['node-a', 'node-b'])
        await outbox.remove('node-a', ['d1', 'not-kept'])
        await outbox.remove('node-a', [])
        await outbox.remove('node-b', ['d1'])
        assert.deepEqual(byId(await outbox.takeOver('node-a', 'node-a')), [{ id: 'd2', text: 'two, again' }])
        assert.deepEqual(byId(await outbox.takeOver('node-b', 'node-b')), [{ id: 'd3', text: 'three' }], 'removing under another node forgets nothing')
        await outbox.remove('node-b', ['d3'])
        const listed = await outbox.nodes()
        assert.ok(listed.includes('node-a'))
        // node-b may stay listed with nothing kept, until it is taken over.
        assert.deepEqual(await outbox.takeOver('node-b', 'node-c'), [])
        assert.deepEqual(await outbox.nodes(), ['node-a'], 'taken over with nothing kept: listed no more, and nothing listed under the taker')
      })

      it('takeOver moves every entry to the taker, and the node taken over leaves the list', async () => {
        const { outbox } = await make()
        await outbox.keep('gone', { id: 'd1', text: 'one' })
        await outbox.keep('gone', { id: 'd2', text: 'two' })
        await outbox.keep('taker', { id: 'd3', text: 'three' })
        assert.deepEqual(byId(await outbox.takeOver('gone', 'taker')), [{ id: 'd1', text: 'one' }, { id: 'd2', text: 'two' }])
        assert.deepEqual(await outbox.nodes(), ['taker'])
        assert.deepEqual(await outbox.takeOver('gone', 'taker'), [], 'nothing left to take twice')
        assert.deepEqual(byId(await outbox.takeOver('taker', 'taker')), [{ id: 'd1', text: 'one' }, { id: 'd2', text: 'two' }, { id: 'd3', text: 'three' }])
        await outbox.remove('taker', ['d1', 'd3'])
        assert.deepEqual(byId(await outbox.takeOver('taker', 'next')), [{ id: 'd2', text: 'two' }], 'removed under the node that holds them now')
        assert.deepEqual(await outbox.nodes(), ['next'])
      })

      it('takeOver of a node with nothing kept returns nothing and lists nobody', async () => {
        const { outbox } = await make()
        assert.deepEqual(await outbox.takeOver('never-kept', 'taker'), [])
        assert.deepEqual(await outbox.takeOver('taker', 'taker'), [])
        assert.deepEqual(await outbox.nodes(), [])
      })

      it('a node taking itself over gets its own entries and keeps them', async () => {
        const { outbox } = await make()
        await outbox.keep('self', { id: 'd1', text: 'one' })
        await outbox.keep('self', { id: 'd2', text: 'two' })
        for (let i = 0; i < 2; i++) assert.deepEqual(byId(await outbox.takeOver('self', 'self')), [{ id: 'd1', text: 'one' }, { id: 'd2', text: 'two' }])
        assert.deepEqual(await outbox.nodes(), ['self'])
      })

      it('of two nodes taking one node over at once, each entry goes to one of them, kept under its name', async () => {
        // A store may split the entries between them (Redis moves a large backlog in chunks): 2,500 takes several.
        const [one, two] = await makeTwo()
        const byNode = { 'node-b': new Set<string>(), 'node-c': new Set<string>() }
        let total = 0
        for (let round = 0; round < 12; round++) {
          const gone = `gone-${round}`
          const ids = Array.from({ length: round % 4 === 3 ? 2500 : 50 }, (_, i) => `${gone}-d${i}`)
          total += ids.length
          for (let at = 0; at < ids.length; at += 500) {
            await Promise.all(ids.slice(at, at + 500).map((id) => one.outbox.keep(gone, { id, text: `text of ${id}` })))
          }
          const [byB, byC] = await Promise.all([one.outbox.takeOver(gone, 'node-b'), two.outbox.takeOver(gone, 'node-c')])
          const returned = [...byB, ...byC]
          assert.deepEqual(returned.map((e) => e.id).sort(), [...ids].sort(), `round ${round}: every entry returned, none twice`)
          assert.ok(returned.every((e) => e.text === `text of ${e.id}`), `round ${round}: texts as kept`)
          for (const e of byB) byNode['node-b'].add(e.id)
          for (const e of byC) byNode['node-c'].add(e.id)
          assert.ok(!(await two.outbox.nodes()).includes(gone), `round ${round}: the node taken over is listed no more`)
        }
        for (const node of ['node-b', 'node-c'] as const) {
          const kept = (await one.outbox.takeOver(node, node)).map((e) => e.id)
          assert.equal(kept.length, byNode[node].size, `${node} keeps as many as it returned`)
          assert.ok(kept.every((id) => byNode[node].has(id)), `${node} keeps what it returned`)
        }
        assert.equal(byNode['node-b'].size + byNode['node-c'].size, total)
        assert.deepEqual((await two.outbox.nodes()).sort(), (['node-b', 'node-c'] as const).filter((n) => byNode[n].size > 0))
      })

      it('takes over 20,000 entries in one call', async () => {
        const { outbox } = await make()
        const count = 20_000
        const ids = Array.from({ length: count }, (_, i) => `delivery-${i}`)
        for (let at = 0; at < count; at += 2000) {
          await Promise.all(ids.slice(at, at + 2000).map((id) => outbox.keep('big', { id, text: `{"n":"${id}"}` })))
        }
        const taken = await outbox.takeOver('big', 'taker')
        assert.equal(taken.length, count)
        assert.deepEqual(taken.map((e) => e.id).sort(), [...ids].sort())
        assert.ok(taken.every((e) => e.text === `{"n":"${e.id}"}`))
        assert.deepEqual(await outbox.nodes(), ['taker'])
        assert.deepEqual(await outbox.takeOver('big', 'other'), [])
        assert.equal((await outbox.takeOver('taker', 'taker')).length, count)
      })

      it('keeps texts byte for byte, whatever their characters', async () => {
        const { outbox } = await make()
        const texts = [
          '',
          'line\nbreak\r\nand\ttab',
          '"quoted" \'single\' \\ backslash {"json":[1,2]}',
          'separators \u2028 \u2029 and NUL \u0000',
          'héllo wörld, 中文, emoji 🎉👩‍💻, ∑',
          'x'.repeat(10_000) + '€'
        ]
        for (const [i, text] of texts.entries()) await outbox.keep('node-a', { id: `d${i}`, text })
        const taken = byId(await outbox.takeOver('node-a', 'node-b'))
        assert.deepEqual(taken, texts.map((text, i) => ({ id: `d${i}`, text })))
        for (const [i, entry] of taken.entries()) assert.ok(Buffer.from(entry.text).equals(Buffer.from(texts[i] as string)), `text ${i}`)
      })
    })
  })
}

/** Outbox entries in id order (takeOver answers in no particular order). */
function byId (entries: OutboxEntry[]): OutboxEntry[] {
  return [...entries].sort((a, b) => a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
}

/** Events `from..to` inclusive with deterministic frames. */
export function events (from: number, to: number, tag = ''): StoredEvent[] {
  const out: StoredEvent[] = []
  for (let seq = from; seq <= to; seq++) out.push({ seq, frame: frameFor(seq, tag) })
  return out
}

export function frameFor (seq: number, tag = ''): string {
  return JSON.stringify({ type: 'stream_event', seq, tag, text: `event ${seq}` })
}

/** A frame of exactly `bytes` UTF-8 bytes, padded with `fill` (one or two bytes a character). */
export function sizedFrame (seq: number, bytes: number, fill: 'x' | 'é' = 'x'): string {
  const head = JSON.stringify({ type: 'stream_event', seq, text: '' })
  const room = bytes - Buffer.byteLength(head)
  if (room < 0) throw new Error(`a frame of ${bytes} bytes is too small`)
  const width = Buffer.byteLength(fill)
  return head.replace('"text":""', `"text":"${fill.repeat(Math.floor(room / width))}${'x'.repeat(room % width)}"`)
}

export function session (overrides: Partial<SessionRecord> & { id: string }): SessionRecord {
  const now = '2025-03-04T05:06:07.089Z'
  return {
    tenant: 'default',
    status: 'running',
    created_at: now,
    updated_at: now,
    options: { model: 'sonnet' },
    metadata: null,
    last_seq: 0,
    resumable: false,
    exit: null,
    ...overrides
  }
}

export function uniqueName (base: string): string {
  return `${base}-${randomUUID()}`
}

function newestFirst (a: SessionRecord, b: SessionRecord): number {
  const byTime = Date.parse(b.created_at) - Date.parse(a.created_at)
  if (byTime !== 0) return byTime
  return a.id < b.id ? 1 : a.id > b.id ? -1 : 0
}

function shuffled<T> (items: T[]): T[] {
  const out = [...items]
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1))
    ;[out[i], out[j]] = [out[j] as T, out[i] as T]
  }
  return out
}
