/**
 * The event store: one append-only log of frames per session, plus the
 * session records that let a restarted gateway list and resume sessions.
 *
 * Two implementations pass the same contract suite (test/unit/store-contract):
 * `memory.ts` (the embedded default) and `redis.ts` (scale-out). The session
 * core talks only to this interface; `app.ts` picks the implementation.
 */

/** One recorded frame. `frame` is the exact JSON text clients received, `seq` included. */
export interface StoredEvent {
  seq: number
  frame: string
}

/** A recorded frame as the UTF-8 bytes the store holds, for pages sent on unchanged (GET /events). */
export interface RawEvent {
  seq: number
  frame: Buffer
}

/** How the CLI process of a session last ended. */
export interface ExitInfo {
  code: number | null
  signal: string | null
  /** Last lines the CLI wrote to stderr, oldest first. */
  stderr_tail: string[]
  /** Why it ended: the CLI exited on its own, or the gateway stopped it. */
  reason: 'exited' | 'stopped' | 'spawn_failed' | 'lost'
  at: string
  /** With `spawn_failed`: why the process could not be started. */
  error?: string
}

export type SessionStatus = 'starting' | 'running' | 'stopping' | 'stopped' | 'exited'

/** What the store keeps about a session besides its events. */
export interface SessionRecord {
  id: string
  tenant: string
  status: SessionStatus
  created_at: string
  updated_at: string
  /** The validated options the session was created with (see protocol/session-options). */
  options: Record<string, unknown>
  metadata: unknown
  /** Highest seq assigned so far. */
  last_seq: number
  /** True once the CLI has stored the conversation, so a restart must use --resume. */
  resumable: boolean
  exit: ExitInfo | null
  /**
   * The holder's last `initialize` request (hooks, systemPrompt, sdkMcpServers, …),
   * given again to a restarted or resumed CLI. Absent until a client sent one.
   */
  initialize?: Record<string, unknown> | undefined
  /**
   * Seq ranges `[from, to]` (inclusive) dropped from history because the store
   * was down longer than STORE_QUEUE_MAX allowed; resume verdicts name them.
   */
  lost_ranges?: Array<[number, number]> | undefined
  /** Set by SignedStore (signed-records.ts) on the way into the store; records handed to callers never carry it. */
  mac?: string | undefined
}

export interface ListOptions {
  limit: number
  /** Opaque cursor from a previous page's `next_cursor`. */
  cursor?: string | undefined
}

export interface SessionPage {
  sessions: SessionRecord[]
  next_cursor: string | null
}

export interface EventStore {
  /** Human name for logs and /readyz: `memory` or `redis`. */
  readonly kind: string
  /**
   * Appends events in order. `events` are contiguous and ascending, and follow
   * the last appended seq of the session. Idempotent per seq: appending a seq
   * that is already held is a no-op, so a retried batch never duplicates.
   */
  append(sessionId: string, events: StoredEvent[]): Promise<void>
  /**
   * Up to `limit` events with seq > `after`, ascending. With `maxBytes`, the
   * read also stops before the event that would take the sum of frame sizes
   * (UTF-8 bytes) past `maxBytes`, but returns at least one event however
   * large: one CLI line may be MiBs, so a page is bounded in one round trip.
   */
  read(sessionId: string, after: number, limit: number, maxBytes?: number): Promise<StoredEvent[]>
  /**
   * `read` with each frame as its UTF-8 bytes, never decoded: the same events
   * (order, limit, budget), byte-identical to the text appended. History pages
   * are assembled from these without a string per frame.
   */
  readRaw(sessionId: string, after: number, limit: number, maxBytes?: number): Promise<RawEvent[]>
  /** Oldest seq still held (after trimming), or null when the log is empty. */
  firstSeq(sessionId: string): Promise<number | null>
  /** Newest seq held, or null when the log is empty: where a loaded session continues, in one round trip. */
  lastSeq(sessionId: string): Promise<number | null>
  /** Creates or replaces a session record. */
  putSession(record: SessionRecord): Promise<void>
  getSession(id: string): Promise<SessionRecord | null>
  /** A tenant's sessions, newest first. */
  listSessions(tenant: string, options: ListOptions): Promise<SessionPage>
  /** Every session record not in a final state (used at start to mark orphans). */
  listLive(): Promise<SessionRecord[]>
  /** Throws when the store cannot serve requests. */
  ping(): Promise<void>
  /**
   * Calls `listener` each time the store answers again after losing its
   * connection (not at the first connection). It may have lost data
   * meanwhile (a Redis restarted without persistence), so callers write
   * their records again. Stores that cannot lose their connection omit it.
   */
  onReconnect?(listener: () => void): void
  close(): Promise<void>
}

/** Retention settings shared by both implementations. */
export interface RetentionOptions {
  /** Events kept per session; older ones are trimmed (approximately, for Redis). */
  maxEventsPerSession: number
  /** Seconds a session's events and record live after it ends (stopped/exited). 0 = for ever. */
  ttlSecondsAfterEnd: number
}

export function isFinal(status: SessionStatus): boolean {
  return status === 'stopped' || status === 'exited'
}

/**
 * The longest prefix of `events` whose frames fit in `maxBytes` (UTF-8
 * bytes), and at least the first event. Without a budget, all of them.
 */
export function withinBytes<T extends StoredEvent> (events: T[], maxBytes: number | undefined): T[] {
  if (maxBytes === undefined) return events
  let total = 0
  for (let i = 0; i < events.length; i++) {
    total += Buffer.byteLength((events[i] as T).frame)
    if (i > 0 && total > maxBytes) return events.slice(0, i)
  }
  return events
}

/** Cursor for newest-first listing: created_at millis and id, so ties are stable. */
export function encodeCursor(record: Pick<SessionRecord, 'created_at' | 'id'>): string {
  return Buffer.from(`${Date.parse(record.created_at)}:${record.id}`).toString('base64url')
}

export function decodeCursor(cursor: string): { ms: number; id: string } | null {
  const text = Buffer.from(cursor, 'base64url').toString()
  const at = text.indexOf(':')
  if (at < 1) return null
  const ms = Number(text.slice(0, at))
  if (!Number.isFinite(ms)) return null
  return { ms, id: text.slice(at + 1) }
}
