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
  /**
   * `frame` as UTF-8, when the writer encoded it already (session/frame-bytes.ts):
   * a store that sends bytes sends these. Appends only; a store keeps `seq`
   * and `frame`, never these (they are views of a whole batch's buffer).
   */
  bytes?: Buffer | undefined
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
  /** Processes of the CLI (it or its tools) the kernel killed at its memory limit (CLI_MEMORY_MAX_MB); absent when none. */
  oom_kills?: number
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

/**
 * A node's hold on a session: the right to run its CLI and to write its log
 * and record. `epoch` grows with every acquisition of the session's lease by
 * any node (a fencing token): writes carry it and the store refuses them
 * once another acquisition happened or the lease lapsed and was taken.
 */
export interface Lease {
  sessionId: string
  node: string
  epoch: number
}

/** Who holds a session's lease now, and for how much longer (ms). */
export interface LeaseHolder {
  node: string
  epoch: number
  ttlMs: number
}

/**
 * Thrown by a fenced write (`append`, `putSession` with a lease) when the
 * lease is no longer the session's current one: another node acquired it
 * since, or it lapsed and was not renewed. The write did not happen.
 */
export class FencedError extends Error {
  readonly code = 'fenced'
  constructor (sessionId: string) {
    super(`write to session ${sessionId} refused: its lease is held under a newer epoch or has lapsed`)
    this.name = 'FencedError'
  }
}

/** How full a gateway node said it was, and when (placement of new sessions). */
export interface NodeLoad {
  node: string
  /** CLIs running (and creates reserved). */
  running: number
  /** Its MAX_SESSIONS. */
  max: number
  /** When it said so, ms since the epoch. */
  at: number
  /** CLIs running (and creates reserved) per tenant on that node: MAX_SESSIONS_PER_TENANT counts every node's. */
  tenants?: Record<string, number>
  /** Until when it holds, ms since the epoch, and the MAC over it all: set and checked by SignedStore, kept as given by the store. */
  until?: number
  mac?: string
}

/** Session leases with fencing epochs, kept in the store every node shares. */
export interface SessionLeases {
  /**
   * Takes the session's lease for `ttlMs` under a new epoch, or null when
   * another node holds it. A lease held by `node` itself, or by
   * `options.takeFrom` (a node known to be dead), is taken over.
   */
  acquire(sessionId: string, node: string, ttlMs: number, options?: { takeFrom?: string }): Promise<Lease | null>
  /**
   * Extends the lease by `ttlMs` from now. A lease that lapsed is taken back
   * under the same epoch when no node acquired the session since (a pause
   * that nobody used); false when another acquisition happened: the holder
   * is fenced and must stop.
   */
  renew(lease: Lease, ttlMs: number): Promise<boolean>
  /** Gives the lease up (only if it is still this one), so any node may take the session at once. */
  release(lease: Lease): Promise<void>
  /** The current holder, or null when nobody holds the session. */
  holder(sessionId: string): Promise<LeaseHolder | null>
}

/** Live events of sessions, whichever node appends them. */
export interface EventFeed {
  /**
   * Calls `onEvents` with the session's events with seq > `after`, ascending,
   * each seq at most once, as they are appended (by any node), until the
   * returned function is called. Catches up from the stored log first and
   * whenever it may have missed something (a batch that does not follow the
   * last seq delivered, a reconnect). A seq range trimmed from the log is
   * skipped (delivery jumps). `onError` gets failures it could not recover by
   * itself (logged by the caller).
   */
  follow(sessionId: string, after: number, onEvents: (events: StoredEvent[]) => void, onError?: (err: Error) => void): () => void
  close(): Promise<void>
}

/** Reliable messages between gateway nodes: one inbox per node, read by that node alone. */
export interface NodeBus {
  /**
   * Starts reading `node`'s inbox: `onMessage` gets every message sent to it from now on, in the order
   * they were sent (per sender), each once, until `close`. Resolves once reading has begun (a message
   * sent after that is delivered). Survives lost connections: reading resumes where it stopped.
   */
  start(node: string, onMessage: (message: string) => void): Promise<void>
  /** Appends a message to `node`'s inbox; resolves once the store holds it. Rejects when the store does not answer. */
  send(node: string, message: string): Promise<void>
  close(): Promise<void>
}

/** One webhook delivery as the outbox keeps it: its id and a text only the webhook module reads. */
export interface OutboxEntry {
  id: string
  text: string
}

/**
 * Webhook deliveries not yet ended, kept under the node that sends them, so
 * that a node that stops or dies leaves its own for another node (or for its
 * own next start, under a fixed NODE_ID) to send.
 */
export interface WebhookOutbox {
  /** Keeps `entry` under `node` until it is removed or taken over; resolves once stored. */
  keep(node: string, entry: OutboxEntry): Promise<void>
  /** Forgets entries of `node` that ended (sent, refused, given up, dropped); ids not kept are ignored. */
  remove(node: string, ids: readonly string[]): Promise<void>
  /** The nodes that have entries kept (a node may stay listed with none left until it is taken over). */
  nodes(): Promise<string[]>
  /**
   * Moves every entry kept under `from` to `to` and resolves with them, each
   * once, in no particular order. A store may move them in several steps
   * (Redis: in chunks, so a backlog never holds it for long): of two nodes
   * taking the same node over at once, each entry goes to exactly one of
   * them, which may split them. `from` leaves the list once nothing is kept
   * under it. A takeover that rejects may have moved some entries to `to`
   * already. With `from === to` it resolves with the node's own entries and
   * moves nothing.
   */
  takeOver(from: string, to: string): Promise<OutboxEntry[]>
}

export interface EventStore {
  /** Human name for logs and /readyz: `memory` or `redis`. */
  readonly kind: string
  /** Session leases (one owner per session across nodes). */
  readonly leases: SessionLeases
  /** Live events appended by any node, for sessions owned elsewhere. */
  readonly feed: EventFeed
  /** Messages between gateway nodes (client frames routed to a session's owner, and replies). */
  readonly bus: NodeBus
  /** Webhook deliveries not yet ended, per node (src/webhooks/). */
  readonly outbox: WebhookOutbox
  /**
   * Appends events in order. `events` are contiguous and ascending, and follow
   * the last appended seq of the session. Idempotent per seq: appending a seq
   * that is already held is a no-op, so a retried batch never duplicates.
   * With `lease`, refused with FencedError (nothing written) unless it is the
   * session's current lease.
   */
  append(sessionId: string, events: StoredEvent[], lease?: Lease): Promise<void>
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
   * are assembled from these without a string per frame. With `upTo`, none
   * past that seq: the caller's bound lets a store that knows every frame up
   * to it fits the budget skip measuring them.
   */
  readRaw(sessionId: string, after: number, limit: number, maxBytes?: number, upTo?: number): Promise<RawEvent[]>
  /** Oldest seq still held (after trimming), or null when the log is empty. */
  firstSeq(sessionId: string): Promise<number | null>
  /** Newest seq held, or null when the log is empty: where a loaded session continues, in one round trip. */
  lastSeq(sessionId: string): Promise<number | null>
  /**
   * True the first time `key` is claimed within `ttlMs` (on any node sharing
   * the store), false after: what makes a WebSocket ticket single-use.
   */
  claimOnce(key: string, ttlMs: number): Promise<boolean>
  /** Records how full this node is (it says so again well within `ttlMs`, or is left out of `listNodes`). */
  reportNode(load: NodeLoad, ttlMs: number): Promise<void>
  /** Every node that reported within its `ttlMs`, in no particular order. */
  listNodes(): Promise<NodeLoad[]>
  /** This node leaves (shutdown): it is no longer offered new sessions. */
  forgetNode(node: string): Promise<void>
  /**
   * Keeps the CLI's own conversation file of a session (src/session/conversation-file.ts),
   * so another node can resume it; fenced as `append` is, and expires with the record.
   */
  saveConversation(sessionId: string, data: Buffer, lease?: Lease): Promise<void>
  /**
   * Adds `data` to the end of the stored conversation if it is exactly `at`
   * bytes long (the CLI only appends to its file, so a save mid-turn sends
   * what is new); false, changing nothing, when it is not. Fenced as `append` is.
   * With `head`, those bytes are written over the copy's first bytes in the
   * same step (SignedStore keeps a seal of the whole copy there).
   */
  appendConversation(sessionId: string, at: number, data: Buffer, lease?: Lease, head?: Buffer): Promise<boolean>
  /** The conversation last saved, or null. */
  loadConversation(sessionId: string): Promise<Buffer | null>
  /** Creates or replaces a session record; with `lease`, fenced as `append` is. */
  putSession(record: SessionRecord, lease?: Lease): Promise<void>
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
