// The event log (src/session/event-log.ts) in-process, over the memory store
// with a switch and a gate on appends: seqs, store-before-relay, one append in
// flight, degraded mode (relay goes on, frames held and written back in
// order), the bound on held frames, and the backlog signal that pauses the
// CLI while the store is behind.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import pino from 'pino'
import { BACKLOG_CHARS, EventLog, type LogEvent, type OverflowEpisode } from '../../src/session/event-log.js'
import { MemoryStore } from '../../src/store/memory.js'
import type { StoredEvent } from '../../src/store/store.js'

const RETENTION = { maxEventsPerSession: 100_000, ttlSecondsAfterEnd: 0 }

/** A MemoryStore whose appends can fail, or wait until the test opens the gate. */
class GatedStore extends MemoryStore {
  appends: number[][] = []
  failing = false
  /** Appends are applied but reported as failed (a timed-out command a paused Redis runs later). */
  appliedButFailing = false
  #gate: Promise<void> | null = null
  #open = (): void => {}

  hold (): void { this.#gate = new Promise((resolve) => { this.#open = resolve }) }
  release (): void { this.#gate = null; this.#open() }

  override async append (sessionId: string, events: StoredEvent[]): Promise<void> {
    this.appends.push(events.map((e) => e.seq))
    if (this.#gate !== null) await this.#gate
    if (this.failing) throw new Error('store down')
    await super.append(sessionId, events)
    if (this.appliedButFailing) throw new Error('command timed out')
  }
}

interface Probe {
  log: EventLog
  store: GatedStore
  committed: LogEvent[]
  degraded: boolean[]
  overflow: OverflowEpisode[]
  /** What each `onDegraded(false, …)` said the outage dropped. */
  recovered: Array<OverflowEpisode | null>
  /** Each `onBacklog` signal, in order. */
  backlog: boolean[]
  /** Resolves once `check` holds after a commit or a state change. */
  until: (check: () => boolean) => Promise<void>
}

function probe (options: { lastSeq?: number, maxUnsaved?: number, store?: GatedStore } = {}): Probe {
  const store = options.store ?? new GatedStore({ retention: RETENTION })
  const waiters: Array<{ check: () => boolean, done: () => void }> = []
  const poke = (): void => {
    for (const w of [...waiters]) if (w.check()) { waiters.splice(waiters.indexOf(w), 1); w.done() }
  }
  const p: Probe = {
    store,
    committed: [],
    degraded: [],
    overflow: [],
    recovered: [],
    backlog: [],
    log: new EventLog({
      sessionId: 's1',
      store,
      lastSeq: options.lastSeq ?? 0,
      maxUnsaved: options.maxUnsaved ?? 1000,
      logger: pino({ level: 'silent' }),
      onCommit: (events) => { p.committed.push(...events); poke() },
      onDegraded: (d, lost) => { p.degraded.push(d); if (!d) p.recovered.push(lost); poke() },
      onOverflow: (n) => { p.overflow.push(n); poke() },
      onBacklog: (full) => { p.backlog.push(full); poke() }
    }),
    // The log's retry timer is unref'd: the deadline keeps the process alive meanwhile, and bounds the wait.
    until: (check) => check()
      ? Promise.resolve()
      : new Promise((resolve, reject) => {
        const deadline = setTimeout(() => reject(new Error('condition not reached within 10 s')), 10_000)
        waiters.push({ check, done: () => { clearTimeout(deadline); resolve() } })
      })
  }
  return p
}

const frameFor = (text: string) => (seq: number): string => JSON.stringify({ seq, text })
/** Lets every queued microtask run (the log batches per microtask); not a timed wait. */
const settled = async (): Promise<void> => { await new Promise((resolve) => setImmediate(resolve)) }
const seqs = (events: StoredEvent[]): number[] => events.map((e) => e.seq)

describe('event log', () => {
  it('assigns seqs after the stored last one, in push order, with the frame built for that seq', async () => {
    const p = probe({ lastSeq: 41 })
    assert.equal(p.log.push(frameFor('a')), 42)
    assert.equal(p.log.push(frameFor('b'), (s) => `notice ${s}`), 43)
    assert.equal(p.log.lastSeq, 43)
    await p.until(() => p.committed.length === 2)
    assert.deepEqual(p.committed.map(({ seq, frame, observerFrame }) => ({ seq, frame, observerFrame })), [
      { seq: 42, frame: '{"seq":42,"text":"a"}', observerFrame: undefined },
      { seq: 43, frame: '{"seq":43,"text":"b"}', observerFrame: 'notice 43' }
    ])
    for (const e of p.committed) assert.deepEqual(e.bytes, Buffer.from(e.frame), 'each frame is committed with its UTF-8 bytes, encoded once for the store and clients')
    assert.deepEqual(await p.store.read('s1', 0, 10), [{ seq: 42, frame: '{"seq":42,"text":"a"}' }, { seq: 43, frame: '{"seq":43,"text":"b"}' }], 'observer renderings are not stored')
  })

  it('hands a batch to clients only after the store has it, one append in flight, batches in order', async () => {
    const p = probe()
    p.store.hold()
    p.log.push(frameFor('1'))
    p.log.push(frameFor('2'))
    await settled()
    assert.deepEqual(p.store.appends, [[1, 2]], 'lines pushed together form one batch')
    p.log.push(frameFor('3'))
    await settled()
    assert.deepEqual(p.store.appends, [[1, 2]], 'no second append while one is in flight')
    assert.deepEqual(p.committed, [], 'nothing relayed before the store acknowledged it')
    assert.equal(p.log.committedSeq, 0)
    p.store.release()
    await p.until(() => p.committed.length === 3)
    assert.deepEqual(p.store.appends, [[1, 2], [3]])
    assert.deepEqual(seqs(p.committed), [1, 2, 3])
    assert.equal(p.log.committedSeq, 3)
  })

  it('while the store is down, relays at once, holds frames, serves them, and writes them back in order', async () => {
    const p = probe()
    p.store.failing = true
    p.log.push(frameFor('1'))
    await p.until(() => p.degraded.length === 1)
    assert.deepEqual(p.degraded, [true])
    assert.deepEqual(seqs(p.committed), [1], 'relayed although not stored')
    for (const t of ['2', '3', '4']) p.log.push(frameFor(t))
    await p.until(() => p.committed.length === 4)
    assert.equal(p.log.unsavedCount, 4)
    assert.deepEqual(seqs(await p.log.read(1, 10)), [2, 3, 4], 'history comes from the held frames')
    assert.equal(await p.log.firstSeq(), 1)

    p.store.failing = false
    await p.until(() => p.degraded.length === 2)
    assert.deepEqual(p.degraded, [true, false])
    assert.equal(p.log.unsavedCount, 0)
    assert.deepEqual(seqs(await p.store.read('s1', 0, 10)), [1, 2, 3, 4], 'written back, in order, each once')
    p.log.push(frameFor('5'))
    await p.until(() => p.committed.length === 5)
    assert.deepEqual(seqs(await p.store.read('s1', 0, 10)), [1, 2, 3, 4, 5], 'healthy again: straight to the store')
    p.log.close()
  })

  it('past STORE_QUEUE_MAX the oldest held frames are dropped from history, and said so', async () => {
    const p = probe({ maxUnsaved: 3 })
    p.store.failing = true
    p.log.push(frameFor('1'))
    await p.until(() => p.degraded.length === 1)
    for (const t of ['2', '3', '4', '5']) p.log.push(frameFor(t))
    await p.until(() => p.committed.length === 5)
    assert.deepEqual(seqs(p.committed), [1, 2, 3, 4, 5], 'live relay lost nothing')
    assert.deepEqual(p.overflow, [{ from: 1, to: 2, dropped: 2 }], 'reported once per outage, at its first drop')
    assert.equal(p.log.unsavedCount, 3)
    assert.deepEqual(p.log.lostRanges, [[1, 2]], 'the exact range dropped')
    assert.deepEqual(p.log.lostWithin(1, 5), [[2, 2]], 'clipped to what is asked')
    assert.deepEqual(seqs(await p.log.read(0, 10)), [3, 4, 5])
    p.store.failing = false
    await p.until(() => p.degraded.length === 2)
    assert.deepEqual(p.recovered, [{ from: 1, to: 2, dropped: 2 }], 'the totals come with the recovery')
    assert.deepEqual(seqs(await p.store.read('s1', 0, 10)), [3, 4, 5])
    p.log.close()
  })

  it('a second outage is a new episode: reported again, its range kept beside the first', async () => {
    const p = probe({ maxUnsaved: 2 })
    p.store.failing = true
    for (const t of ['1', '2', '3']) p.log.push(frameFor(t))
    await p.until(() => p.committed.length === 3)
    p.store.failing = false
    await p.until(() => p.degraded.length === 2)
    p.log.push(frameFor('4'))
    await p.until(() => p.committed.length === 4)
    p.store.failing = true
    for (const t of ['5', '6', '7', '8']) p.log.push(frameFor(t))
    await p.until(() => p.committed.length === 8)
    assert.deepEqual(p.overflow.map((e) => e.from), [1, 5])
    assert.deepEqual(p.log.lostRanges, [[1, 1], [5, 6]])
    assert.deepEqual(seqs(await p.log.read(0, 10)), [2, 3, 4], 'a page ends where the stored part ends')
    assert.deepEqual(seqs(await p.log.read(4, 10)), [7, 8], 'held frames are served after it')
    p.store.failing = false
    await p.until(() => p.degraded.length === 4)
    assert.deepEqual(seqs(await p.store.read('s1', 0, 10)), [2, 3, 4, 7, 8])
    p.log.close()
  })

  it('frames dropped as unsaved that the store applied after all are not reported lost', async () => {
    const p = probe({ maxUnsaved: 2 })
    p.store.appliedButFailing = true
    for (const t of ['1', '2', '3']) p.log.push(frameFor(t))
    await p.until(() => p.degraded.length === 1)
    // The rest really fails: of the dropped range [1, 5], 1..3 reached the store, 4..5 did not.
    p.store.appliedButFailing = false
    p.store.failing = true
    for (const t of ['4', '5', '6', '7']) p.log.push(frameFor(t))
    await p.until(() => p.committed.length === 7)
    assert.deepEqual(p.log.lostRanges, [[1, 5]], 'while down, everything dropped counts as lost')
    p.store.failing = false
    await p.until(() => p.degraded.length === 2)
    assert.deepEqual(p.log.lostRanges, [[4, 5]], 'narrowed to what the store lacks')
    assert.deepEqual(p.recovered, [{ from: 4, to: 5, dropped: 2 }])
    assert.deepEqual(seqs(await p.store.read('s1', 0, 10)), [1, 2, 3, 6, 7])
    p.log.close()
  })

  it('an outage whose dropped frames all reached the store reports nothing lost', async () => {
    const p = probe({ maxUnsaved: 1 })
    p.store.appliedButFailing = true
    for (const t of ['1', '2', '3']) p.log.push(frameFor(t))
    await p.until(() => p.degraded.length === 1)
    assert.equal(p.overflow.length, 1)
    p.store.appliedButFailing = false
    await p.until(() => p.degraded.length === 2)
    assert.deepEqual(p.log.lostRanges, [])
    assert.deepEqual(p.recovered, [null])
    p.log.close()
  })

  it('signals a backlog when BACKLOG_CHARS of frames wait behind the append in flight, and its end when they leave for the store', async () => {
    const p = probe()
    const big = 'x'.repeat(10_000)
    const frame = (seq: number): string => JSON.stringify({ seq, big })
    // Pushed with nothing in flight, however much: one batch, no signal.
    for (let i = 0; i < 200; i++) p.log.push(frame)
    assert.deepEqual(p.backlog, [])
    p.store.hold()
    await settled()
    assert.equal(p.store.appends.length, 1, 'the first batch is in flight')
    let pushed = 0
    let chars = 0
    while (p.backlog.length === 0) {
      const seq = p.log.push(frame)
      chars += frame(seq).length
      pushed++
    }
    assert.deepEqual(p.backlog, [true])
    assert.ok(chars >= BACKLOG_CHARS && chars - frame(p.log.lastSeq).length < BACKLOG_CHARS, 'signalled at the push that reached the mark')
    p.log.push(frame)
    assert.deepEqual(p.backlog, [true], 'signalled once')
    p.store.release()
    await p.until(() => p.backlog.length === 2)
    assert.deepEqual(p.backlog, [true, false], 'the waiting frames left for the store')
    await p.until(() => p.committed.length === 200 + pushed + 1)
    assert.deepEqual(seqs(p.committed), Array.from({ length: 200 + pushed + 1 }, (_v, i) => i + 1))
    p.log.close()
  })
})
