/**
 * Reads history in pages bounded by bytes as well as by count. One CLI line
 * may be up to MAX_LINE_BYTES (16 MiB), so a page of 100 or 1000 events read
 * at once could hold gigabytes in memory. The budget is part of the store
 * read itself (EventStore.read's `maxBytes`), so a page costs one round trip:
 * it ends before the event that would take it past `maxBytes`, and always
 * has at least one event, however large.
 */
import type { StoredEvent } from '../store/store.js'

/** What is read from: the session's EventLog (store plus frames held in memory). */
export interface HistorySource {
  readonly committedSeq: number
  read: (after: number, limit: number, upTo?: number, maxBytes?: number) => Promise<StoredEvent[]>
}

export interface HistoryPage {
  events: StoredEvent[]
  /** True when the page ended before `limit` events and before `upTo`: more events follow (the byte budget, or the store's part ending where frames held in memory begin). */
  cut: boolean
}

/** Events with seq > `after` (up to `upTo`), at most `limit` of them and, past the first, at most `maxBytes` of frame text. */
export async function readHistoryPage (log: HistorySource, after: number, limit: number, maxBytes: number, upTo = log.committedSeq): Promise<HistoryPage> {
  const events = await log.read(after, limit, upTo, maxBytes)
  const last = events[events.length - 1]
  return { events, cut: last !== undefined && events.length < limit && last.seq < upTo }
}
