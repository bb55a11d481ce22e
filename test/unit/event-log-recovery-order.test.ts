// The event log (src/session/event-log.ts) coming back from an outage that
// dropped frames: it reads the dropped ranges back from the store before it
// says the store is healthy, and frames relayed meanwhile are held. They must
// reach the store before any later frame does: the store skips a seq at or
// below the last it holds (appends are idempotent per seq), so a frame
// written after a later one is lost from history, and no lost range says so.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import pino from 'pino'
import { EventLog } from '../../src/session/event-log.js'
import { MemoryStore } from '../../src/store/memory.js'
import type { StoredEvent } from '../../src/store/store.js'

/** A MemoryStore whose appends can fail, and whose reads can be held at a gate the test opens. */
class SwitchedStore extends MemoryStore {
  failing = false
  #readGate: Promise<void> | null = null
  #openRead = (): void => {}
  #reading: () => void = () => {}
  /** Resolves at the next read that waits at the gate. */
  reading: Promise<void> = Promise.resolve()

  holdReads (): void {
    this.#readGate = new Promise((resolve) => { this.#openRead = resolve })
    this.reading = new Promise((resolve) => { this.#reading = resolve })
  }

  releaseReads (): void { this.#readGate = null; this.#openRead() }

  override async append (sessionId: string, events: StoredEvent[]): Promise<void> {
    if (this.failing) throw new Error('store down')
    await super.append(sessionId, events)
  }

  override async read (sessionId: string, after: number, limit: number, maxBytes?: number): Promise<StoredEvent[]> {
    const gate = this.#readGate
    if (gate !== null) { this.#reading(); await gate }
    return await super.read(sessionId, after, limit, maxBytes)
  }
}

const frameFor = (seq: number): string => JSON.stringify({ seq })
/** Lets every queued microtask run (the log batches per microtask); not a timed wait. */
const settled = async (): Promise<void> => { await new Promise((resolve) => setImmediate(resolve)) }

describe('event log recovery order', () => {
  it('frames relayed while an outage\'s losses are checked reach the store before later ones, none lost', { timeout: 10_000 }, async () => {
    // The log's retry timer is unref'd: this keeps the process alive while the test waits on it.
    const alive = setInterval(() => {}, 1000)
    try {
      const store = new SwitchedStore({ retention: { maxEventsPerSession: 100_000, ttlSecondsAfterEnd: 0 } })
      let degraded = true
      let recovered: () => void = () => {}
      const back = new Promise<void>((resolve) => { recovered = resolve })
      let down: () => void = () => {}
      const wentDown = new Promise<void>((resolve) => { down = resolve })
      const log = new EventLog({
        sessionId: 's1',
        store,
        lastSeq: 0,
        maxUnsaved: 2,
        logger: pino({ level: 'silent' }),
        onCommit: () => {},
        onDegraded: (d) => { degraded = d; if (d) down(); else recovered() },
        onOverflow: () => {}
      })
      store.failing = true
      log.push(frameFor)
      await wentDown
      for (let i = 0; i < 3; i++) log.push(frameFor)
      await settled()
      assert.deepEqual(log.lostRanges, [[1, 2]], 'seqs 1 and 2 dropped past STORE_QUEUE_MAX')

      // The store answers again; the retry writes 3 and 4, then reads the dropped range back (held here).
      store.holdReads()
      store.failing = false
      await store.reading
      assert.equal(degraded, true)
      const five = log.push(frameFor)
      await settled() // the batch of 5 is taken: relayed and held, the store not yet declared healthy
      assert.equal(log.unsavedCount, 1)
      store.releaseReads()
      await back
      const six = log.push(frameFor)
      await log.flush(5000)

      const stored = (await store.read('s1', 0, 100)).map((e) => e.seq)
      assert.deepEqual(stored, [3, 4, five, six], 'every seq not reported lost is in history, once, in order')
      assert.deepEqual(log.lostRanges, [[1, 2]])
      log.close()
    } finally {
      clearInterval(alive)
    }
  })
})
