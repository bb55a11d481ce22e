// The event log (src/session/event-log.ts) as the store comes back from an
// outage that dropped frames (past STORE_QUEUE_MAX). The real EventLog over
// a MemoryStore whose appends can fail and whose reads the test holds, so
// each race happens the same way every time.
//
// - It reads the dropped ranges back before it says the store is healthy,
//   and frames relayed meanwhile are held. They must reach the store before
//   any later frame: the store skips a seq at or below the last it holds, so
//   a frame written after a later one is lost from history, and no lost
//   range says so.
// - A history read that starts before the held frames asks the store first
//   and serves the held frames when the store has nothing there. Held frames
//   written back while it waits for the store's answer leave the held list:
//   the read must not skip them (an empty page, or a replay's gap over seqs
//   the store has).
import assert from 'node:assert/strict'
import { afterEach, beforeEach, describe, it } from 'node:test'
import pino from 'pino'
import { EventLog } from '../../src/session/event-log.js'
import { MemoryStore } from '../../src/store/memory.js'
import type { StoredEvent } from '../../src/store/store.js'

/** A MemoryStore whose appends can fail, and whose reads can be held (before or after the store answered). */
class SwitchedStore extends MemoryStore {
  failing = false
  #hold: { when: 'before' | 'after', reached: () => void, gate: Promise<void> } | null = null
  #open = (): void => {}

  /** The next read waits at a gate, `before` or `after` the store answers; resolves once it waits there. */
  holdNextRead (when: 'before' | 'after'): Promise<void> {
    return new Promise((resolve) => {
      this.#hold = { when, reached: resolve, gate: new Promise((release) => { this.#open = release }) }
    })
  }

  releaseRead (): void { this.#open() }

  override async append (sessionId: string, events: StoredEvent[]): Promise<void> {
    if (this.failing) throw new Error('store down')
    await super.append(sessionId, events)
  }

  override async read (sessionId: string, after: number, limit: number, maxBytes?: number): Promise<StoredEvent[]> {
    const hold = this.#hold
    this.#hold = null
    if (hold?.when === 'before') { hold.reached(); await hold.gate }
    const answer = await super.read(sessionId, after, limit, maxBytes)
    if (hold?.when === 'after') { hold.reached(); await hold.gate }
    return answer
  }
}

const frameFor = (seq: number): string => JSON.stringify({ seq })
/** Lets every queued microtask run (the log batches per microtask); not a timed wait. */
const settled = async (): Promise<void> => { await new Promise((resolve) => setImmediate(resolve)) }

describe('event log as the store comes back', () => {
  let store: SwitchedStore
  let log: EventLog
  let degraded: boolean
  let back: Promise<void>
  // The log's retry timer is unref'd: this keeps the process alive while a test waits on it.
  let alive: NodeJS.Timeout

  /** Seqs 1 and 2 dropped past STORE_QUEUE_MAX (2), 3 and 4 held: the store is down. */
  beforeEach(async () => {
    alive = setInterval(() => {}, 1000)
    store = new SwitchedStore({ retention: { maxEventsPerSession: 100_000, ttlSecondsAfterEnd: 0 } })
    degraded = false
    let recovered: () => void = () => {}
    back = new Promise<void>((resolve) => { recovered = resolve })
    let down: () => void = () => {}
    const wentDown = new Promise<void>((resolve) => { down = resolve })
    log = new EventLog({
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
    assert.equal(log.heldFrom, 3)
  })

  afterEach(() => {
    log.close()
    clearInterval(alive)
  })

  it('frames relayed while an outage\'s losses are checked reach the store before later ones, none lost', { timeout: 10_000 }, async () => {
    // The store answers again; the retry writes 3 and 4, then reads the dropped range back (held here).
    const checking = store.holdNextRead('before')
    store.failing = false
    await checking
    assert.equal(degraded, true)
    const five = log.push(frameFor)
    await settled() // the batch of 5 is taken: relayed and held, the store not yet declared healthy
    assert.equal(log.unsavedCount, 1)
    store.releaseRead()
    await back
    const six = log.push(frameFor)
    await log.flush(5000)

    const stored = (await store.read('s1', 0, 100)).map((e) => e.seq)
    assert.deepEqual(stored, [3, 4, five, six], 'every seq not reported lost is in history, once, in order')
    assert.deepEqual(log.lostRanges, [[1, 2]])
  })

  it('held frames the store takes while a read waits for it are served from the store, not skipped', { timeout: 10_000 }, async () => {
    // A page from the start: the store (empty) answers, but the answer comes back only after the write-back.
    const answered = store.holdNextRead('after')
    const page = log.read(0, 10)
    await answered
    store.failing = false
    await back
    assert.equal(log.unsavedCount, 0, 'held frames written back meanwhile')
    store.releaseRead()
    assert.deepEqual((await page).map((e) => e.seq), [3, 4], 'the page has every frame after the lost range')
  })
})
