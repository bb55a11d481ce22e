// A history read of the event log (src/session/event-log.ts) that starts
// before the frames held through an outage (after a range the outage
// dropped) asks the store first and, when the store has nothing there,
// serves the held frames. The store may write those held frames back while
// the read waits for its answer: they leave the held list, and the read must
// not then skip them, which would lose them from the page (and from an event
// stream's replay, as a gap the store does not have).
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import pino from 'pino'
import { EventLog } from '../../src/session/event-log.js'
import { MemoryStore } from '../../src/store/memory.js'
import type { StoredEvent } from '../../src/store/store.js'

/** A MemoryStore whose appends can fail, and whose next read answers at once but is handed back only when the test says so. */
class SwitchedStore extends MemoryStore {
  failing = false
  #next: { answered: () => void, gate: Promise<void> } | null = null
  #open = (): void => {}

  /** The next read takes its answer when called and waits; returns a promise settled once it has answered. */
  holdNextRead (): Promise<void> {
    return new Promise((resolve) => {
      this.#next = { answered: resolve, gate: new Promise((release) => { this.#open = release }) }
    })
  }

  releaseRead (): void { this.#open() }

  override async append (sessionId: string, events: StoredEvent[]): Promise<void> {
    if (this.failing) throw new Error('store down')
    await super.append(sessionId, events)
  }

  override async read (sessionId: string, after: number, limit: number, maxBytes?: number): Promise<StoredEvent[]> {
    const held = this.#next
    this.#next = null
    const answer = await super.read(sessionId, after, limit, maxBytes)
    if (held !== null) { held.answered(); await held.gate }
    return answer
  }
}

const frameFor = (seq: number): string => JSON.stringify({ seq })
/** Lets every queued microtask run (the log batches per microtask); not a timed wait. */
const settled = async (): Promise<void> => { await new Promise((resolve) => setImmediate(resolve)) }

describe('event log read during write-back', () => {
  it('held frames the store takes while a read waits for it are served from the store, not skipped', { timeout: 10_000 }, async () => {
    // The log's retry timer is unref'd: this keeps the process alive while the test waits on it.
    const alive = setInterval(() => {}, 1000)
    try {
      const store = new SwitchedStore({ retention: { maxEventsPerSession: 100_000, ttlSecondsAfterEnd: 0 } })
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
        onDegraded: (d) => { if (d) down(); else recovered() },
        onOverflow: () => {}
      })
      store.failing = true
      log.push(frameFor)
      await wentDown
      for (let i = 0; i < 3; i++) log.push(frameFor)
      await settled()
      assert.deepEqual(log.lostRanges, [[1, 2]], 'seqs 1 and 2 dropped past STORE_QUEUE_MAX')
      assert.equal(log.heldFrom, 3)

      // A page from the start: the store (empty) answers, but the answer comes back only after the write-back.
      const answered = store.holdNextRead()
      const page = log.read(0, 10)
      await answered
      store.failing = false
      await back
      assert.equal(log.unsavedCount, 0, 'held frames written back meanwhile')
      store.releaseRead()
      assert.deepEqual((await page).map((e) => e.seq), [3, 4], 'the page has every frame after the lost range')
      log.close()
    } finally {
      clearInterval(alive)
    }
  })
})
