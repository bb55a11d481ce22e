/**
 * An EventStore that times its appends for the metrics (cgw_store_append_seconds)
 * and otherwise passes every call through. A decorator, so neither store
 * implementation knows about metrics; app.ts gives it to the sessions only,
 * whose event logs are what appends.
 */
import type { EventFeed, EventStore, NodeBus, NodeLoad, Lease, ListOptions, RawEvent, SessionLeases, SessionPage, SessionRecord, StoredEvent, WebhookOutbox } from '../store/store.js'
import type { MetricsSink } from './sink.js'

export class TimedStore implements EventStore {
  readonly #inner: EventStore
  readonly #sink: Pick<MetricsSink, 'appendTimed'>

  constructor (inner: EventStore, sink: Pick<MetricsSink, 'appendTimed'>) {
    this.#inner = inner
    this.#sink = sink
  }

  get kind (): string { return this.#inner.kind }
  get leases (): SessionLeases { return this.#inner.leases }
  get feed (): EventFeed { return this.#inner.feed }
  get bus (): NodeBus { return this.#inner.bus }
  get outbox (): WebhookOutbox { return this.#inner.outbox }
  claimOnce (key: string, ttlMs: number): Promise<boolean> { return this.#inner.claimOnce(key, ttlMs) }
  reportNode (load: NodeLoad, ttlMs: number): Promise<void> { return this.#inner.reportNode(load, ttlMs) }
  listNodes (): Promise<NodeLoad[]> { return this.#inner.listNodes() }
  forgetNode (node: string): Promise<void> { return this.#inner.forgetNode(node) }
  saveConversation (sessionId: string, data: Buffer, lease?: Lease): Promise<void> { return this.#inner.saveConversation(sessionId, data, lease) }
  appendConversation (sessionId: string, at: number, data: Buffer, lease?: Lease, head?: Buffer): Promise<boolean> { return this.#inner.appendConversation(sessionId, at, data, lease, head) }
  loadConversation (sessionId: string): Promise<Buffer | null> { return this.#inner.loadConversation(sessionId) }

  async append (sessionId: string, events: StoredEvent[], lease?: Lease): Promise<void> {
    const started = performance.now()
    try {
      await this.#inner.append(sessionId, events, lease)
    } catch (err) {
      this.#sink.appendTimed((performance.now() - started) / 1000, false)
      throw err
    }
    this.#sink.appendTimed((performance.now() - started) / 1000, true)
  }

  read (sessionId: string, after: number, limit: number, maxBytes?: number): Promise<StoredEvent[]> { return this.#inner.read(sessionId, after, limit, maxBytes) }
  readRaw (sessionId: string, after: number, limit: number, maxBytes?: number, upTo?: number): Promise<RawEvent[]> { return this.#inner.readRaw(sessionId, after, limit, maxBytes, upTo) }
  firstSeq (sessionId: string): Promise<number | null> { return this.#inner.firstSeq(sessionId) }
  lastSeq (sessionId: string): Promise<number | null> { return this.#inner.lastSeq(sessionId) }
  putSession (record: SessionRecord, lease?: Lease): Promise<void> { return this.#inner.putSession(record, lease) }
  getSession (id: string): Promise<SessionRecord | null> { return this.#inner.getSession(id) }
  listSessions (tenant: string, options: ListOptions): Promise<SessionPage> { return this.#inner.listSessions(tenant, options) }
  listLive (): Promise<SessionRecord[]> { return this.#inner.listLive() }
  ping (): Promise<void> { return this.#inner.ping() }
  onReconnect (listener: () => void): void { this.#inner.onReconnect?.(listener) }
  close (): Promise<void> { return this.#inner.close() }
}
