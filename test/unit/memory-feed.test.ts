// The in-process event feed (src/store/memory-feed.ts) over the memory store:
// live delivery in order and exactly once, catch-up from the log (backlog,
// gaps, resync, trimmed ranges), several followers, unfollow, and read
// failures retried. Expected seqs always come from what was appended.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { MemoryFeed } from '../../src/store/memory-feed.js'
import { MemoryStore } from '../../src/store/memory.js'
import type { StoredEvent } from '../../src/store/store.js'
import { Waiters } from '../support/waiters.js'

const RETENTION = { maxEventsPerSession: 100_000, ttlSecondsAfterEnd: 0 }
const TIMEOUT_MS = 10_000

function frame (seq: number): StoredEvent {
  return { seq, frame: JSON.stringify({ seq, type: 'assistant', text: `event ${seq}` }) }
}

function range (from: number, to: number): StoredEvent[] {
  const out: StoredEvent[] = []
  for (let seq = from; seq <= to; seq++) out.push(frame(seq))
  return out
}

/** What one follower received, with a wait on it. */
class Received {
  readonly events: StoredEvent[] = []
  readonly errors: Error[] = []
  readonly #waiters = new Waiters()
  readonly onEvents = (events: StoredEvent[]): void => { this.events.push(...events); this.#waiters.wake() }
  readonly onError = (err: Error): void => { this.errors.push(err); this.#waiters.wake() }

  get seqs (): number[] { return this.events.map((e) => e.seq) }

  /** Resolves once the last seq received is `seq` or beyond. */
  async upTo (seq: number): Promise<void> {
    await this.#waiters.until(() => (this.events.at(-1)?.seq ?? 0) >= seq, TIMEOUT_MS, `seq ${seq}`,
      () => `last received ${this.events.at(-1)?.seq ?? 'none'}`)
  }

  async errorCount (n: number): Promise<void> {
    await this.#waiters.until(() => this.errors.length >= n, TIMEOUT_MS, `${n} error(s)`, () => `${this.errors.length} so far`)
  }
}

/** The store's events with seq > `after`, as the feed must deliver them. */
async function expected (store: MemoryStore, id: string, after: number): Promise<StoredEvent[]> {
  return await store.read(id, after, Number.MAX_SAFE_INTEGER)
}

describe('MemoryFeed', () => {
  it('delivers events appended after follow in order, exactly once', async () => {
    const store = new MemoryStore({ retention: RETENTION })
    const got = new Received()
    const stop = store.feed.follow('s1', 0, got.onEvents, got.onError)
    let seq = 0
    for (let batch = 1; batch <= 50; batch++) {
      await store.append('s1', range(seq + 1, seq + batch))
      seq += batch
    }
    // A retried batch (seqs already held) is published again and must not repeat.
    await store.append('s1', range(seq - 3, seq))
    await got.upTo(seq)
    assert.deepEqual(got.events, await expected(store, 's1', 0))
    assert.deepEqual(got.errors, [])
    stop()
    await store.close()
  })

  it('gives the stored backlog then live, with no gap or duplicate under a concurrent burst', async () => {
    const store = new MemoryStore({ retention: RETENTION })
    // Reads yield to the event loop first, so appends land while a catch-up is under way.
    const feed = new MemoryFeed({
      read: async (id, after, limit) => { await new Promise((resolve) => setImmediate(resolve)); return await store.read(id, after, limit) },
      pageSize: 100
    })
    const append = async (events: StoredEvent[]): Promise<void> => { await store.append('s1', events); feed.publish('s1', events) }
    await append(range(1, 300))
    const burst = (async () => {
      let seq = 300
      while (seq < 2300) {
        const size = 1 + (seq % 7)
        await append(range(seq + 1, seq + size))
        seq += size
        if (seq % 3 === 0) await new Promise((resolve) => setImmediate(resolve))
      }
      return seq
    })()
    const got = new Received()
    const stop = feed.follow('s1', 120, got.onEvents, got.onError)
    const last = await burst
    await got.upTo(last)
    assert.deepEqual(got.seqs, (await expected(store, 's1', 120)).map((e) => e.seq))
    assert.deepEqual(got.events, await expected(store, 's1', 120))
    stop()
    await feed.close()
  })

  it('serves two followers of one session, each from its own position', async () => {
    const store = new MemoryStore({ retention: RETENTION })
    await store.append('s1', range(1, 40))
    const a = new Received()
    const b = new Received()
    const stopA = store.feed.follow('s1', 0, a.onEvents, a.onError)
    const stopB = store.feed.follow('s1', 25, b.onEvents, b.onError)
    await store.append('s1', range(41, 60))
    await store.append('s1', range(61, 61))
    await a.upTo(61)
    await b.upTo(61)
    assert.deepEqual(a.events, await expected(store, 's1', 0))
    assert.deepEqual(b.events, await expected(store, 's1', 25))
    stopA()
    stopB()
    await store.close()
  })

  it('stops delivering to a follower once it unfollows', async () => {
    const store = new MemoryStore({ retention: RETENTION })
    const gone = new Received()
    const stays = new Received()
    const stopGone = store.feed.follow('s1', 0, gone.onEvents, gone.onError)
    const stopStays = store.feed.follow('s1', 0, stays.onEvents, stays.onError)
    await store.append('s1', range(1, 10))
    await gone.upTo(10)
    stopGone()
    await store.append('s1', range(11, 20))
    // The follower still there got the later events: by then the other would have too.
    await stays.upTo(20)
    assert.deepEqual(gone.events, await store.read('s1', 0, 10))
    assert.deepEqual(stays.events, await expected(store, 's1', 0))
    stopStays()
    await store.close()
  })

  it('catches up from the log when a batch does not follow the last seq delivered', async () => {
    const store = new MemoryStore({ retention: RETENTION })
    let reads = 0
    const feed = new MemoryFeed({ read: async (id, after, limit) => { reads++; return await store.read(id, after, limit) } })
    const got = new Received()
    const stop = feed.follow('s1', 0, got.onEvents, got.onError)
    await store.append('s1', range(1, 5))
    feed.publish('s1', range(1, 5))
    await got.upTo(5)
    const readsBefore = reads
    // 6..9 are stored but never published (as when a node's flag had expired).
    await store.append('s1', range(6, 9))
    await store.append('s1', range(10, 12))
    feed.publish('s1', range(10, 12))
    await got.upTo(12)
    assert.deepEqual(got.events, await expected(store, 's1', 0))
    assert.ok(reads > readsBefore, 'the gap was filled by a read of the log')
    stop()
    await feed.close()
  })

  it('catches up on resync (something may have been missed)', async () => {
    const store = new MemoryStore({ retention: RETENTION })
    const feed = new MemoryFeed({ read: async (id, after, limit) => await store.read(id, after, limit) })
    const got = new Received()
    const stop = feed.follow('s1', 0, got.onEvents, got.onError)
    await store.append('s1', range(1, 7))
    feed.resync('s1')
    await got.upTo(7)
    assert.deepEqual(got.events, await expected(store, 's1', 0))
    stop()
    await feed.close()
  })

  it('skips a range trimmed from the log: delivery jumps, then goes on in order', async () => {
    const store = new MemoryStore({ retention: { maxEventsPerSession: 20, ttlSecondsAfterEnd: 0 } })
    for (let seq = 1; seq <= 200; seq += 10) await store.append('s1', range(seq, seq + 9))
    const first = await store.firstSeq('s1')
    assert.ok(first !== null && first > 1, 'the log was trimmed')
    const backlog = await expected(store, 's1', 0)
    const got = new Received()
    const stop = store.feed.follow('s1', 0, got.onEvents, got.onError)
    await got.upTo(200)
    assert.equal(got.seqs[0], first)
    assert.deepEqual(got.events, backlog)
    const live = range(201, 205)
    await store.append('s1', live)
    await got.upTo(205)
    assert.deepEqual(got.events, [...backlog, ...live])
    stop()
    await store.close()
  })

  it('delivers a held batch beyond a gap the log cannot fill, without looping', async () => {
    const store = new MemoryStore({ retention: RETENTION })
    let reads = 0
    const feed = new MemoryFeed({ read: async (id, after, limit) => { reads++; return await store.read(id, after, limit) } })
    await store.append('s1', range(1, 3))
    const got = new Received()
    const stop = feed.follow('s1', 0, got.onEvents, got.onError)
    await got.upTo(3)
    // Seqs 4..9 are in no log (gone with an expired stream): the batch 10..11 is all there is.
    const beyond = range(10, 11)
    feed.publish('s1', beyond)
    await got.upTo(11)
    assert.deepEqual(got.events, [...(await store.read('s1', 0, 100)), ...beyond])
    assert.ok(reads <= 3, `a bounded number of reads (${reads})`)
    stop()
    await feed.close()
  })

  it('retries a failing catch-up read, reporting the failure once', async () => {
    const store = new MemoryStore({ retention: RETENTION })
    await store.append('s1', range(1, 30))
    let failures = 3
    const feed = new MemoryFeed({
      read: async (id, after, limit) => {
        if (failures > 0) { failures--; throw new Error('store down') }
        return await store.read(id, after, limit)
      }
    })
    const got = new Received()
    const stop = feed.follow('s1', 0, got.onEvents, got.onError)
    await got.upTo(30)
    assert.deepEqual(got.events, await expected(store, 's1', 0))
    assert.deepEqual(got.errors.map((e) => e.message), ['store down'])
    stop()
    await feed.close()
  })

  it('reports a throwing listener and keeps serving the other followers', async () => {
    const store = new MemoryStore({ retention: RETENTION })
    const thrower = new Received()
    const other = new Received()
    const stopThrower = store.feed.follow('s1', 0, (events) => { thrower.onEvents(events); throw new Error('listener bug') }, thrower.onError)
    const stopOther = store.feed.follow('s1', 0, other.onEvents, other.onError)
    await store.append('s1', range(1, 4))
    await store.append('s1', range(5, 6))
    await other.upTo(6)
    await thrower.upTo(6)
    await thrower.errorCount(1)
    assert.deepEqual(thrower.events, await expected(store, 's1', 0))
    assert.deepEqual(other.events, await expected(store, 's1', 0))
    stopThrower()
    stopOther()
    await store.close()
  })

  it('reads the log only after the session is watched, holding what is published meanwhile', async () => {
    const store = new MemoryStore({ retention: RETENTION })
    await store.append('s1', range(1, 5))
    let open = (): void => {}
    const watched = new Promise<void>((resolve) => { open = resolve })
    const events: string[] = []
    const feed = new MemoryFeed({
      read: async (id, after, limit) => { events.push(`read ${after}`); return await store.read(id, after, limit) },
      watch: async (id) => { events.push(`watch ${id}`); await watched },
      unwatch: (id) => { events.push(`unwatch ${id}`) }
    })
    const got = new Received()
    const stop = feed.follow('s1', 0, got.onEvents, got.onError)
    const second = new Received()
    const stopSecond = feed.follow('s1', 2, second.onEvents, second.onError)
    await store.append('s1', range(6, 8))
    feed.publish('s1', range(6, 8))
    assert.deepEqual(events, ['watch s1'], 'one watch per session, no read before it resolves')
    open()
    await got.upTo(8)
    await second.upTo(8)
    assert.deepEqual(got.events, await expected(store, 's1', 0))
    assert.deepEqual(second.events, await expected(store, 's1', 2))
    stop()
    assert.ok(!events.includes('unwatch s1'), 'still followed by the second')
    stopSecond()
    assert.equal(events.at(-1), 'unwatch s1')
    await feed.close()
  })
})
