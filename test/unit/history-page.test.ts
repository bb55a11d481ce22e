/**
 * History pages over a real EventLog: a page bounded by bytes costs one store
 * read (issue 11's byte budget must not turn a page into several round
 * trips), and frames held in memory while the store is down are bounded the
 * same way.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import pino from 'pino'
import { EventLog } from '../../src/session/event-log.js'
import { readHistoryPage } from '../../src/session/history-page.js'
import { MemoryStore } from '../../src/store/memory.js'
import type { StoredEvent } from '../../src/store/store.js'
import { sizedFrame } from '../support/store-contract.js'

const RETENTION = { maxEventsPerSession: 100_000, ttlSecondsAfterEnd: 0 }

/** A MemoryStore that counts reads, and whose appends can be made to fail. */
class CountingStore extends MemoryStore {
  reads: Array<{ after: number, limit: number, maxBytes: number | undefined }> = []
  failAppends = false

  override async append (sessionId: string, events: StoredEvent[]): Promise<void> {
    if (this.failAppends) throw new Error('store down')
    return super.append(sessionId, events)
  }

  override async read (sessionId: string, after: number, limit: number, maxBytes?: number): Promise<StoredEvent[]> {
    this.reads.push({ after, limit, maxBytes })
    return super.read(sessionId, after, limit, maxBytes)
  }
}

/** An EventLog holding `sizes.length` committed frames of those byte sizes (seq 1…). */
async function logWith (store: CountingStore, sizes: number[]): Promise<{ log: EventLog, frames: StoredEvent[] }> {
  let committed = (): void => {}
  const done = new Promise<void>((resolve) => { committed = resolve })
  const log = new EventLog({
    sessionId: 's',
    store,
    lastSeq: 0,
    maxUnsaved: 100_000,
    logger: pino({ level: 'silent' }),
    onCommit: () => { if (log.committedSeq === sizes.length) committed() },
    onDegraded: () => {},
    onOverflow: () => {}
  })
  for (const bytes of sizes) log.push((seq) => sizedFrame(seq, bytes))
  await done
  store.reads = []
  return { log, frames: sizes.map((bytes, i) => ({ seq: i + 1, frame: sizedFrame(i + 1, bytes) })) }
}

async function pageAll (log: EventLog, limit: number, maxBytes: number): Promise<StoredEvent[][]> {
  const pages: StoredEvent[][] = []
  for (let after = 0; after < log.committedSeq;) {
    const page = await readHistoryPage(log, after, limit, maxBytes)
    assert.ok(page.events.length > 0, `an empty page after ${after}`)
    assert.equal(page.cut, page.events.length < limit && (page.events.at(-1) as StoredEvent).seq < log.committedSeq)
    pages.push(page.events.map((e) => ({ seq: e.seq, frame: e.frame })))
    after = (page.events.at(-1) as StoredEvent).seq
  }
  return pages
}

describe('history pages', () => {
  it('a page is one store read, with the budget in it, whether the count or the bytes end it', async () => {
    const store = new CountingStore({ retention: RETENTION })
    const { log, frames } = await logWith(store, Array.from({ length: 1200 }, () => 500))

    const full = await readHistoryPage(log, 0, 1000, 4 * 1024 * 1024)
    assert.deepEqual(full, { events: frames.slice(0, 1000), cut: false })
    assert.deepEqual(store.reads, [{ after: 0, limit: 1000, maxBytes: 4 * 1024 * 1024 }])

    store.reads = []
    const cut = await readHistoryPage(log, 0, 1000, 100_000)
    assert.deepEqual(cut, { events: frames.slice(0, 200), cut: true })
    assert.equal(store.reads.length, 1)

    // Never asks for events past upTo (seqs are contiguous), so the budget is not spent on them.
    store.reads = []
    const upTo = await readHistoryPage(log, 1150, 1000, 4 * 1024 * 1024)
    assert.deepEqual(upTo, { events: frames.slice(1150), cut: false })
    assert.deepEqual(store.reads, [{ after: 1150, limit: 50, maxBytes: 4 * 1024 * 1024 }])
    store.reads = []
    assert.deepEqual(await readHistoryPage(log, 1200, 1000, 4 * 1024 * 1024), { events: [], cut: false })
    assert.deepEqual(store.reads, [])
  })

  it('pages of frames held in memory while the store is down stop at the byte budget too, and lose nothing', async () => {
    const store = new CountingStore({ retention: RETENTION })
    store.failAppends = true
    const sizes = [300, 300, 300, 5000, 300, 300, 300, 300]
    const { log, frames } = await logWith(store, sizes)
    assert.equal(log.unsavedCount, sizes.length, 'every frame is held, none stored')
    const pages = await pageAll(log, 1000, 1000)
    assert.deepEqual(pages.map((p) => p.map((e) => e.seq)), [[1, 2, 3], [4], [5, 6, 7], [8]])
    assert.deepEqual(pages.flat(), frames)
    log.close()
  })
})
