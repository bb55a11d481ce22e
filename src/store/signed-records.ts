/**
 * Never trust what the store returns: a decorator over any EventStore that
 * signs every session record it writes (HMAC-SHA256 over the record's
 * canonical JSON, keyed by the gateway's store secret) and checks every
 * record it reads. A record with a missing or wrong MAC, one that fails the
 * record schema, one stored under another id, or one whose options ask for
 * bypassPermissions while the operator forbids it, is logged at error level
 * and answered as absent: every route says 404 (its tenant field cannot be
 * believed), listings and recovery skip it, it is never started or resumed.
 *
 * Its node bus signs and checks every message too (src/store/signed-bus.ts),
 * each stored conversation copy carries a seal checked before a CLI
 * reads it (src/store/conversation-seal.ts), and each webhook outbox entry
 * one checked before another node sends it (src/store/signed-outbox.ts),
 * and each node's load report a MAC checked before placement, tenant
 * limits or the webhook sweep believe it (src/store/signed-nodes.ts).
 * Event streams are not signed: they are only relayed, never acted on.
 */
import { createHmac, timingSafeEqual } from 'node:crypto'
import type { Logger } from 'pino'
import { sessionRecordSchema } from './record-schema.js'
import type { EventFeed, EventStore, NodeBus, NodeLoad, Lease, ListOptions, RawEvent, SessionLeases, SessionPage, SessionRecord, StoredEvent, WebhookOutbox } from './store.js'
import { firstIssue } from '../protocol/first-issue.js'
import { canonicalJson } from './canonical-json.js'
import { SignedNodeReports } from './signed-nodes.js'
import { FirstSight } from '../util/first-sight.js'
import { type BusRefusal, SignedBus } from './signed-bus.js'
import { ConversationSeals, SEAL_BYTES } from './conversation-seal.js'
import { SignedOutbox } from './signed-outbox.js'

/**
 * What the store held that was refused (the labels of
 * `cgw_store_refused_total`): a session record, a conversation copy, a
 * webhook outbox entry, a node's load report; and why, in short: no MAC or seal (`unsigned`), one
 * that does not match (`mac`), a record stored under another id (`id`), not
 * a valid record (`schema`), or options today's policy forbids (`policy`).
 */
export const STORE_REFUSALS = {
  record: ['unsigned', 'mac', 'id', 'schema', 'policy'],
  conversation: ['unsigned', 'mac'],
  webhook: ['unsigned', 'mac'],
  node: ['unsigned', 'mac']
} as const
export type StoreRefusalKind = keyof typeof STORE_REFUSALS
export type StoreRefusal = (typeof STORE_REFUSALS)[StoreRefusalKind][number]

export interface SignedStoreOptions {
  /** The MAC key (STORE_SECRET, or the generated `$DATA_DIR/store-secret`). */
  secret: string
  allowBypassPermissions: boolean
  logger: Logger
  /**
   * Deliver node bus messages without a signature, and read conversation
   * copies without a seal, logged at warn (messages: the first one) (STORE_ACCEPT_UNSIGNED: what a
   * version before they were signed wrote, for the upgrade).
   */
  acceptUnsigned?: boolean | undefined
  /** Each node bus message refused, with why. */
  onBusRefused?: ((why: BusRefusal) => void) | undefined
  /** Each record, conversation copy or outbox entry refused when read (a record refused at every read of it). */
  onRefused?: ((kind: StoreRefusalKind, why: StoreRefusal) => void) | undefined
}

/** Versioned, so a future change of what is signed cannot be confused with this one. */
const DOMAIN = 'cgw-session-record-v1\n'
/** Refusals already logged at error level (one line per record and reason, not one per listing). */
const REPORTED_MAX = 10_000

export class SignedStore implements EventStore {
  readonly #inner: EventStore
  readonly #o: SignedStoreOptions
  readonly #reported = new FirstSight(REPORTED_MAX)
  #bus: SignedBus | null = null
  #outbox: SignedOutbox | null = null
  readonly #seals: ConversationSeals
  readonly #nodes: SignedNodeReports

  constructor (inner: EventStore, options: SignedStoreOptions) {
    this.#inner = inner
    this.#o = options
    this.#seals = new ConversationSeals(options.secret)
    this.#nodes = new SignedNodeReports(options.secret)
  }

  get kind (): string { return this.#inner.kind }
  /** The wrapped store (health reporting reads its connection state). */
  get inner (): EventStore { return this.#inner }

  get leases (): SessionLeases { return this.#inner.leases }
  get feed (): EventFeed { return this.#inner.feed }
  /** The inner store's bus, its messages signed and checked (made on first use, as the Redis store's bus is). */
  get bus (): NodeBus {
    this.#bus ??= new SignedBus(this.#inner.bus, {
      secret: this.#o.secret,
      logger: this.#o.logger,
      acceptUnsigned: this.#o.acceptUnsigned,
      onRefused: this.#o.onBusRefused
    })
    return this.#bus
  }
  /** The inner store's webhook outbox, its entries sealed and checked (unsigned ones refused whatever acceptUnsigned says: no version kept them unsigned). */
  get outbox (): WebhookOutbox {
    this.#outbox ??= new SignedOutbox(this.#inner.outbox, {
      secret: this.#o.secret,
      logger: this.#o.logger,
      onRefused: (why) => { this.#o.onRefused?.('webhook', why) }
    })
    return this.#outbox
  }
  claimOnce (key: string, ttlMs: number): Promise<boolean> { return this.#inner.claimOnce(key, ttlMs) }
  reportNode (load: NodeLoad, ttlMs: number): Promise<void> { return this.#inner.reportNode(this.#nodes.seal(load, ttlMs), ttlMs) }

  /** The reports whose MAC holds and whose time has not run out; the others are logged and left out. */
  async listNodes (): Promise<NodeLoad[]> {
    const now = Date.now()
    const believed: NodeLoad[] = []
    for (const report of await this.#inner.listNodes()) {
      const checked = this.#nodes.check(report, now)
      if (checked === 'stale') continue // its node stopped reporting: gone, as the store would have it a moment later
      if (typeof checked !== 'string') { believed.push(checked); continue }
      if (checked === 'unsigned' && this.#o.acceptUnsigned === true) {
        if (this.#reported.first(`node\0${report.node}\0accepted`)) this.#o.logger.warn({ node: report.node }, 'node load report without a MAC believed (STORE_ACCEPT_UNSIGNED): a node of an older version')
        const { mac: _mac, ...plain } = report
        believed.push(plain)
        continue
      }
      this.#o.onRefused?.('node', checked)
      this.#o.logger[this.#reported.first(`node\0${report.node}\0${checked}`) ? 'error' : 'debug']({ node: report.node, reason: checked }, 'node load report refused: written outside the gateway or with another STORE_SECRET; that node is taken as not reporting')
    }
    return believed
  }
  forgetNode (node: string): Promise<void> { return this.#inner.forgetNode(node) }

  append (sessionId: string, events: StoredEvent[], lease?: Lease): Promise<void> { return this.#inner.append(sessionId, events, lease) }
  read (sessionId: string, after: number, limit: number, maxBytes?: number): Promise<StoredEvent[]> { return this.#inner.read(sessionId, after, limit, maxBytes) }
  readRaw (sessionId: string, after: number, limit: number, maxBytes?: number, upTo?: number): Promise<RawEvent[]> { return this.#inner.readRaw(sessionId, after, limit, maxBytes, upTo) }
  firstSeq (sessionId: string): Promise<number | null> { return this.#inner.firstSeq(sessionId) }
  lastSeq (sessionId: string): Promise<number | null> { return this.#inner.lastSeq(sessionId) }
  ping (): Promise<void> { return this.#inner.ping() }
  onReconnect (listener: () => void): void { this.#inner.onReconnect?.(listener) }
  close (): Promise<void> { return this.#inner.close() }

  async saveConversation (sessionId: string, data: Buffer, lease?: Lease): Promise<void> {
    const { copy, hash } = this.#seals.whole(sessionId, data)
    await this.#inner.saveConversation(sessionId, copy, lease)
    this.#seals.stored(sessionId, data.length, hash)
  }

  /** False (the caller saves whole) also when this node does not know what the stored copy holds. */
  async appendConversation (sessionId: string, at: number, data: Buffer, lease?: Lease): Promise<boolean> {
    const next = this.#seals.appended(sessionId, at, data)
    if (next === null) return false
    this.#seals.forget(sessionId)
    if (!await this.#inner.appendConversation(sessionId, SEAL_BYTES + at, data, lease, next.seal)) return false
    this.#seals.stored(sessionId, at + data.length, next.hash)
    return true
  }

  /** The copy's file when its seal holds; a copy without one or with a wrong one is logged and read as absent. */
  async loadConversation (sessionId: string): Promise<Buffer | null> {
    const stored = await this.#inner.loadConversation(sessionId)
    if (stored === null) return null
    const opened = this.#seals.open(sessionId, stored)
    if (opened.ok) return opened.data
    if (opened.why === 'no seal' && this.#o.acceptUnsigned === true) {
      this.#o.logger.warn({ session: sessionId }, 'conversation copy without a seal read (STORE_ACCEPT_UNSIGNED): turn it off once every copy was saved again')
      return opened.data
    }
    this.#o.onRefused?.('conversation', opened.why === 'no seal' ? 'unsigned' : 'mac')
    this.#report(sessionId, `conversation: ${opened.why}`, 'conversation copy refused: changed outside the gateway or saved without a seal; the session resumes without it')
    return null
  }

  async putSession (record: SessionRecord, lease?: Lease): Promise<void> {
    const { mac: _ignored, ...plain } = record
    await this.#inner.putSession({ ...plain, mac: recordMac(this.#o.secret, plain) }, lease)
  }

  async getSession (id: string): Promise<SessionRecord | null> {
    const record = await this.#inner.getSession(id)
    return record === null ? null : this.#checked(record, id)
  }

  async listSessions (tenant: string, options: ListOptions): Promise<SessionPage> {
    const page = await this.#inner.listSessions(tenant, options)
    const sessions: SessionRecord[] = []
    for (const record of page.sessions) {
      const ok = this.#checked(record, record.id)
      if (ok !== null && ok.tenant === tenant) sessions.push(ok)
    }
    return { sessions, next_cursor: page.next_cursor }
  }

  async listLive (): Promise<SessionRecord[]> {
    const live: SessionRecord[] = []
    for (const record of await this.#inner.listLive()) {
      const ok = this.#checked(record, record.id)
      if (ok !== null) live.push(ok)
    }
    return live
  }

  /** The record without its MAC when it may be acted on, else null (and logged). */
  #checked (record: SessionRecord, id: string): SessionRecord | null {
    const refused = this.#refusal(record, id)
    if (refused === null) {
      const { mac: _mac, ...plain } = record
      return plain
    }
    this.#o.onRefused?.('record', refused.why)
    this.#report(id, refused.detail, 'session record refused: changed outside the gateway or not valid; treated as absent')
    return null
  }

  /** Logs a refusal at error level once per session and reason, at debug after. */
  #report (id: string, why: string, message: string): void {
    this.#o.logger[this.#reported.first(`${id}\0${why}`) ? 'error' : 'debug']({ session: id, reason: why }, message)
  }

  /** Why `record` may not be acted on (its metric label, and the detail logged), or null. */
  #refusal (record: SessionRecord, id: string): { why: StoreRefusal, detail: string } | null {
    const { mac, ...plain } = record as SessionRecord & { mac?: unknown }
    if (typeof mac !== 'string' || mac === '') return { why: 'unsigned', detail: 'no MAC' }
    const expected = Buffer.from(recordMac(this.#o.secret, plain))
    const given = Buffer.from(mac)
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { why: 'mac', detail: 'MAC does not match' }
    if (plain.id !== id) return { why: 'id', detail: `stored under id ${id} but names ${String(plain.id)}` }
    const parsed = sessionRecordSchema.safeParse(plain)
    if (!parsed.success) {
      const { path, message } = firstIssue(parsed.error)
      return { why: 'schema', detail: `not a valid record: ${path || '(record)'}: ${message}` }
    }
    if (parsed.data.options.permission_mode === 'bypassPermissions' && !this.#o.allowBypassPermissions) {
      return { why: 'policy', detail: 'options.permission_mode is bypassPermissions and ALLOW_BYPASS_PERMISSIONS is false' }
    }
    return null
  }
}

/** HMAC-SHA256 (base64url) of a record's canonical JSON, the `mac` field left out. */
export function recordMac (secret: string, record: Omit<SessionRecord, 'mac'>): string {
  return createHmac('sha256', secret).update(DOMAIN).update(canonicalJson(record)).digest('base64url')
}
