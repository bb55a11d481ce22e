/**
 * In-memory event store: the embedded default when REDIS_URL is unset.
 * Lives and dies with the process; bounded by the same retention settings as
 * the Redis store so a long-running gateway does not grow without limit.
 */
import { MemoryBus } from './memory-bus.js'
import { MemoryFeed } from './memory-feed.js'
import { MemoryLeases } from './memory-leases.js'
import { MemoryOutbox } from './memory-outbox.js'
import {
  type EventStore, type Lease, type ListOptions, type NodeLoad, FencedError, type RetentionOptions, type SessionPage,
  type RawEvent, type SessionRecord, type StoredEvent, decodeCursor, encodeCursor, isFinal, withinBytes
} from './store.js'

interface Entry {
  record: SessionRecord | null
  conversation?: Buffer
  /** Contiguous ascending events: events[i].seq === events[0].seq + i. */
  events: StoredEvent[]
  expiresAt: number
}

export class MemoryStore implements EventStore {
  readonly kind = 'memory'
  readonly #entries = new Map<string, Entry>()
  readonly #retention: RetentionOptions
  readonly #now: () => number
  /** claimOnce keys and when each claim ends. */
  readonly #claims = new Map<string, number>()
  readonly #nodes = new Map<string, { load: NodeLoad, until: number }>()
  readonly leases: MemoryLeases
  readonly feed: MemoryFeed
  /** One process is one node: the bus only ever carries messages to itself. */
  readonly bus = new MemoryBus()
  /** Lives and dies with the process, as the deliveries it keeps would anyway. */
  readonly outbox = new MemoryOutbox()

  constructor (options: { retention: RetentionOptions; now?: () => number }) {
    this.#retention = options.retention
    this.#now = options.now ?? Date.now
    this.leases = new MemoryLeases({ now: this.#now })
    this.feed = new MemoryFeed({ read: async (id, after, limit) => await this.read(id, after, limit) })
  }

  #fence (sessionId: string, lease: Lease | undefined): void {
    if (lease !== undefined && !this.leases.isCurrent(lease)) throw new FencedError(sessionId)
  }

  #entry (id: string, create: boolean): Entry | undefined {
    let entry = this.#entries.get(id)
    if (entry !== undefined && entry.expiresAt <= this.#now()) {
      this.#entries.delete(id)
      this.leases.forget(id)
      entry = undefined
    }
    if (entry === undefined && create) {
      // Made by a write without its record (a late append or save after the
      // entry expired): it expires a TTL later, as on Redis, unless a record
      // put (which sets its own expiry) follows.
      const ttl = this.#retention.ttlSecondsAfterEnd
      entry = { record: null, events: [], expiresAt: ttl > 0 ? this.#now() + ttl * 1000 : Infinity }
      this.#entries.set(id, entry)
    }
    return entry
  }

  async append (sessionId: string, events: StoredEvent[], lease?: Lease): Promise<void> {
    this.#fence(sessionId, lease)
    const entry = this.#entry(sessionId, true) as Entry
    const log = entry.events
    // Kept (and published) as seq and frame only: a writer's other fields (observer renderings, bytes) are its own.
    const kept = events.map((e): StoredEvent => ({ seq: e.seq, frame: e.frame }))
    for (const event of kept) {
      const last = log.length === 0 ? 0 : (log[log.length - 1] as StoredEvent).seq
      if (event.seq <= last) continue // already held: a retried batch
      log.push(event)
    }
    // Trim in slices of a tenth so a steady stream does not shift the array on every append.
    const max = this.#retention.maxEventsPerSession
    if (log.length > max + Math.max(1, Math.floor(max / 10))) log.splice(0, log.length - max)
    this.feed.publish(sessionId, kept)
  }

  async read (sessionId: string, after: number, limit: number, maxBytes?: number): Promise<StoredEvent[]> {
    const log = this.#entry(sessionId, false)?.events
    if (log === undefined || log.length === 0 || limit <= 0) return []
    const first = (log[0] as StoredEvent).seq
    const start = Math.max(0, after + 1 - first)
    return withinBytes(log.slice(start, start + limit), maxBytes)
  }

  /** Frames are held as strings here, so each is encoded once per read. */
  async readRaw (sessionId: string, after: number, limit: number, maxBytes?: number, upTo = Infinity): Promise<RawEvent[]> {
    const events = await this.read(sessionId, after, limit, maxBytes)
    return events.filter((e) => e.seq <= upTo).map((e) => ({ seq: e.seq, frame: Buffer.from(e.frame) }))
  }

  async firstSeq (sessionId: string): Promise<number | null> {
    const log = this.#entry(sessionId, false)?.events
    return log === undefined || log.length === 0 ? null : (log[0] as StoredEvent).seq
  }

  async lastSeq (sessionId: string): Promise<number | null> {
    const log = this.#entry(sessionId, false)?.events
    return log === undefined || log.length === 0 ? null : (log[log.length - 1] as StoredEvent).seq
  }

  async putSession (record: SessionRecord, lease?: Lease): Promise<void> {
    this.#fence(record.id, lease)
    const entry = this.#entry(record.id, true) as Entry
    entry.record = structuredClone(record)
    const ttl = this.#retention.ttlSecondsAfterEnd
    entry.expiresAt = isFinal(record.status) && ttl > 0 ? this.#now() + ttl * 1000 : Infinity
  }

  async getSession (id: string): Promise<SessionRecord | null> {
    const record = this.#entry(id, false)?.record
    return record == null ? null : structuredClone(record)
  }

  async listSessions (tenant: string, options: ListOptions): Promise<SessionPage> {
    const after = options.cursor === undefined ? null : decodeCursor(options.cursor)
    const mine: SessionRecord[] = []
    for (const id of [...this.#entries.keys()]) {
      const record = this.#entry(id, false)?.record
      if (record != null && record.tenant === tenant) mine.push(record)
    }
    mine.sort(newestFirst)
    const rest = after === null
      ? mine
      : mine.filter((r) => compareKeys(keyOf(r), after) > 0)
    const page = rest.slice(0, options.limit).map((r) => structuredClone(r))
    const last = page[page.length - 1]
    return { sessions: page, next_cursor: rest.length > options.limit && last !== undefined ? encodeCursor(last) : null }
  }

  async listLive (): Promise<SessionRecord[]> {
    const live: SessionRecord[] = []
    for (const entry of this.#entries.values()) {
      if (entry.record != null && !isFinal(entry.record.status)) live.push(structuredClone(entry.record))
    }
    return live
  }

  async saveConversation (sessionId: string, data: Buffer, lease?: Lease): Promise<void> {
    this.#fence(sessionId, lease)
    ;(this.#entry(sessionId, true) as Entry).conversation = Buffer.from(data)
  }

  async appendConversation (sessionId: string, at: number, data: Buffer, lease?: Lease, head?: Buffer): Promise<boolean> {
    this.#fence(sessionId, lease)
    const entry = this.#entry(sessionId, false)
    if (entry?.conversation === undefined || entry.conversation.length !== at) return false
    const grown = Buffer.concat([entry.conversation, data])
    head?.copy(grown, 0, 0, Math.min(head.length, grown.length))
    entry.conversation = grown
    return true
  }

  async loadConversation (sessionId: string): Promise<Buffer | null> {
    const data = this.#entry(sessionId, false)?.conversation
    return data === undefined ? null : Buffer.from(data)
  }

  /** One process is one node: it is the only one that reports. */
  async reportNode (load: NodeLoad, ttlMs: number): Promise<void> {
    this.#nodes.set(load.node, { load: { ...load }, until: this.#now() + ttlMs })
  }

  async listNodes (): Promise<NodeLoad[]> {
    const now = this.#now()
    return [...this.#nodes.values()].filter((n) => n.until > now).map((n) => ({ ...n.load }))
  }

  async forgetNode (node: string): Promise<void> {
    this.#nodes.delete(node)
  }

  async claimOnce (key: string, ttlMs: number): Promise<boolean> {
    const now = this.#now()
    for (const [k, until] of this.#claims) if (until <= now) this.#claims.delete(k)
    if (this.#claims.has(key)) return false
    this.#claims.set(key, now + ttlMs)
    return true
  }

  async ping (): Promise<void> {}

  /** Never called: the store lives in this process and has no connection to lose. */
  onReconnect (_listener: () => void): void {}

  async close (): Promise<void> {
    await this.feed.close()
    await this.bus.close()
  }
}

/** Sort order for listings: newest created first, id breaking ties. */
function newestFirst (a: Pick<SessionRecord, 'created_at' | 'id'>, b: Pick<SessionRecord, 'created_at' | 'id'>): number {
  return compareKeys(keyOf(a), keyOf(b))
}

/** Listing position of a record, comparable with a decoded cursor (no Date round trip, which throws for out-of-range ms). */
function keyOf (record: Pick<SessionRecord, 'created_at' | 'id'>): { ms: number; id: string } {
  return { ms: Date.parse(record.created_at), id: record.id }
}

function compareKeys (a: { ms: number; id: string }, b: { ms: number; id: string }): number {
  const byTime = b.ms - a.ms
  if (byTime !== 0) return byTime
  return a.id < b.id ? 1 : a.id > b.id ? -1 : 0
}
