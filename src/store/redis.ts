/**
 * Redis event store: the scale-out implementation, selected when REDIS_URL is
 * set. Works against a single Redis (6.2+) or a Redis Cluster (`cluster: true`,
 * or an ioredis `Cluster` as `client`). Only the Redis store's files
 * (src/store/redis*.ts) import ioredis.
 *
 * Key layout (`P` = the configured prefix, default `cgw:`; `{id}` is a Cluster
 * hash tag, so every key of one session hashes to the same slot):
 *
 *   P{<id>}:events          Stream of the session's frames. Entry id `<seq>-0`
 *                           (explicit XADD id), one field `f` = the frame JSON
 *                           text. Because Redis refuses an id <= the stream's
 *                           last id (and keeps that last id even after
 *                           trimming), re-appending a held seq fails
 *                           harmlessly: appends are idempotent per seq.
 *                           Trimmed with `MAXLEN ~ maxEventsPerSession`.
 *   P{<id>}:meta            String: the SessionRecord as JSON.
 *   P{<id>}:lease           Hash (node, epoch) with a PX TTL: which node runs
 *                           the session's CLI (redis-leases.ts).
 *   P{<id>}:epoch           Counter: the last fencing epoch handed out. Appends
 *                           and record saves with a lease are refused unless
 *                           the lease hash holds their epoch.
 *   P{<id>}:conversation    String: the CLI's conversation file (saveConversation),
 *                           so another node can --resume; expires with the record.
 *   P{<id>}:largest         String: the byte length of the longest frame the
 *                           stream has held, kept by the append script so
 *                           budgeted reads need not measure every entry
 *                           (redis-scripts.ts); expires with the stream.
 *   P{<id>}:followed        String with a PX TTL, set by nodes that follow the
 *                           session live; while it exists, appends PUBLISH
 *                           their frames on the channel P{<id>}:feed.
 *   P tenant:<tenant>:sessions
 *                           Sorted set, member = session id, score =
 *                           created_at in ms. Listing walks it newest first
 *                           (ties: higher id first, as ZREVRANGEBYSCORE does).
 *                           Members whose meta has expired are removed lazily
 *                           by listSessions (redis-index.ts).
 *   P nodes                 Hash: NODE_ID → how full that node said it was and
 *                           until when it counts (placement of new sessions;
 *                           redis-nodes.ts).
 *   P live                  Set of ids of sessions not in a final state, read
 *                           by listLive at start-up to find orphans. Stale
 *                           members are removed lazily by listLive
 *                           (redis-index.ts).
 *   P{webhooks}:out:<node>  Hash: delivery id → text, the webhook deliveries
 *                           that node has not ended yet (redis-outbox.ts).
 *   P{webhooks}:nodes       Set of the nodes with outbox entries kept.
 *
 * Multi-key operations (MULTI, pipelines, the scripts' KEYS) only ever touch
 * the keys of one session, or the outbox's keys, which share the one tag
 * `{webhooks}`; the tenant index and the live set are written with
 * separate commands after the session's transaction, in both modes, so the
 * store works on a Cluster where they live on other slots. Nothing uses KEYS
 * or SCAN, so no command has to visit every master.
 *
 * Retention: when a session reaches a final status and ttlSecondsAfterEnd > 0,
 * the record, stream, its largest-frame mark and epoch counter get that TTL (events appended later, and a counter a
 * lease call makes again, inherit the meta's remaining TTL, or the whole TTL once the meta expired); putting a non-final status again makes them persistent.
 *
 * Failure behaviour: a client created here fails a command instead of
 * queueing it for ever while Redis is unreachable (see redis-client.ts): a
 * call rejects within about a second, never later than `commandTimeoutMs`
 * (default 2 s), and the client keeps reconnecting in the background (at most
 * 500 ms between attempts), so calls work again soon after Redis is back.
 * An injected client keeps its own options; configure it likewise. Each time
 * the client is ready again after a lost connection, `onReconnect` listeners
 * run: that Redis may have lost every key meanwhile (redis-connection.ts).
 */
import type { Cluster, Redis } from 'ioredis'
import type {
  EventFeed, EventStore, Lease, NodeBus, NodeLoad, ListOptions, RetentionOptions, SessionPage,
  RawEvent, SessionRecord, StoredEvent
} from './store.js'
import { RedisAppender } from './redis-append.js'
import { RedisBus } from './redis-bus.js'
import { defineStoreCommands } from './redis-commands.js'
import { RedisConnection } from './redis-connection.js'
import { RedisConversations } from './redis-conversations.js'
import { RedisFeed } from './redis-feed.js'
import { RedisSessionIndex } from './redis-index.js'
import { redisKeys } from './redis-keys.js'
import { RedisLeases } from './redis-leases.js'
import { RedisNodes } from './redis-nodes.js'
import { RedisOutbox } from './redis-outbox.js'
import { RedisReader } from './redis-read.js'
import { RedisRecords } from './redis-records.js'

export type RedisClient = Redis | Cluster

export interface RedisStoreConfig {
  /** `redis://` or `rediss://` URL; used when no `client` is given. Default `redis://127.0.0.1:6379`. */
  url?: string | undefined
  /**
   * `url` names one seed node of a Redis Cluster (or several, comma-separated):
   * the client learns the other masters from them, and the first URL's
   * credentials and TLS apply to every node.
   */
  cluster?: boolean | undefined
  /** A ready-made client (e.g. an ioredis `Cluster`). The store does not close an injected client. */
  client?: RedisClient | undefined
  /** Prepended to every key. Must not contain `{` or `}` (they would break the per-session hash tag). Default `cgw:`. */
  prefix?: string | undefined
  retention: RetentionOptions
  /**
   * Upper bound, in ms, on how long one command of a client created here may
   * take before it rejects, and on `ping`. Default 2000.
   */
  commandTimeoutMs?: number | undefined
  /** Connection errors of a client created here (ioredis emits them while reconnecting). */
  onError?: ((error: Error) => void) | undefined
}

const DEFAULT_COMMAND_TIMEOUT_MS = 2000

export class RedisStore implements EventStore {
  readonly kind = 'redis'
  readonly #connection: RedisConnection
  readonly #client: RedisClient
  readonly #prefix: string
  readonly #retention: RetentionOptions
  readonly leases: RedisLeases
  /** Webhook deliveries not yet ended, per node: a few commands on the store's client, no connection of its own. */
  readonly outbox: RedisOutbox
  readonly #appender: RedisAppender
  readonly #reader: RedisReader
  readonly #records: RedisRecords
  readonly #conversations: RedisConversations
  readonly #index: RedisSessionIndex
  readonly #nodes: RedisNodes
  #feed: RedisFeed | null = null
  #bus: RedisBus | null = null

  constructor (config: RedisStoreConfig) {
    const prefix = config.prefix ?? 'cgw:'
    const keys = redisKeys(prefix)
    this.#prefix = prefix
    this.#retention = config.retention
    this.#connection = new RedisConnection({
      url: config.url,
      cluster: config.cluster,
      client: config.client,
      timeoutMs: config.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS,
      onError: config.onError
    })
    this.#client = this.#connection.client
    const client = this.#client
    defineStoreCommands(client)
    this.#appender = new RedisAppender({
      client,
      retention: this.#retention,
      keys: (id) => ({ events: keys.events(id), meta: keys.meta(id), lease: keys.lease(id), followed: keys.followed(id), largest: keys.largest(id), channel: keys.channel(id) })
    })
    this.#reader = new RedisReader({
      client,
      keys,
      bound: (id, upTo) => this.#appender.bound(id, upTo)
    })
    this.#index = new RedisSessionIndex({
      client,
      keys,
      getSession: async (id) => await this.getSession(id)
    })
    this.#records = new RedisRecords({
      client,
      retention: this.#retention,
      keys,
      index: async (record) => { await this.#index.add(record) }
    })
    this.#conversations = new RedisConversations({
      client,
      retention: this.#retention,
      keys
    })
    this.#nodes = new RedisNodes({ client, key: `${this.#prefix}nodes` })
    this.leases = new RedisLeases({
      client: this.#client,
      retention: this.#retention,
      keys
    })
    this.outbox = new RedisOutbox({ client: this.#client, prefix: this.#prefix })
  }

  /** Connection state for health reporting: `ready` when commands go straight to Redis. */
  get status (): string {
    return this.#client.status
  }

  /** The last connection error seen since the client was last ready (clients created here only). */
  get lastError (): Error | null {
    return this.#connection.lastError
  }

  /**
   * Live events for followers on this node: one subscriber connection (made
   * on first use, a duplicate of the store's client) for every session followed.
   */
  get feed (): EventFeed {
    this.#feed ??= new RedisFeed({
      // Same kind and options as the store's client (a Cluster duplicates as a Cluster).
      subscriber: this.#connection.duplicate(),
      client: this.#client,
      prefix: this.#prefix,
      read: async (id, after, limit) => await this.read(id, after, limit)
    })
    return this.#feed
  }

  /** Messages between nodes: this node's inbox is read by one blocking reader (made on first use, a duplicate of the store's client). */
  get bus (): NodeBus {
    this.#bus ??= new RedisBus({
      reader: this.#connection.duplicate(),
      client: this.#client,
      prefix: this.#prefix
    })
    return this.#bus
  }

  async append (sessionId: string, events: StoredEvent[], lease?: Lease): Promise<void> {
    await this.#appender.append(sessionId, events, lease)
  }

  async read (sessionId: string, after: number, limit: number, maxBytes?: number): Promise<StoredEvent[]> {
    return await this.#reader.read(sessionId, after, limit, maxBytes)
  }

  async readRaw (sessionId: string, after: number, limit: number, maxBytes?: number, upTo?: number): Promise<RawEvent[]> {
    return await this.#reader.readRaw(sessionId, after, limit, maxBytes, upTo)
  }

  async firstSeq (sessionId: string): Promise<number | null> {
    return await this.#reader.firstSeq(sessionId)
  }

  async lastSeq (sessionId: string): Promise<number | null> {
    return await this.#reader.lastSeq(sessionId)
  }

  async putSession (record: SessionRecord, lease?: Lease): Promise<void> {
    await this.#records.put(record, lease)
  }

  async getSession (id: string): Promise<SessionRecord | null> {
    return await this.#records.get(id)
  }

  async listSessions (tenant: string, options: ListOptions): Promise<SessionPage> {
    return await this.#index.listSessions(tenant, options)
  }

  async listLive (): Promise<SessionRecord[]> {
    return await this.#index.listLive()
  }

  async saveConversation (sessionId: string, data: Buffer, lease?: Lease): Promise<void> {
    await this.#conversations.save(sessionId, data, lease)
  }

  async appendConversation (sessionId: string, at: number, data: Buffer, lease?: Lease, head?: Buffer): Promise<boolean> {
    return await this.#conversations.append(sessionId, at, data, lease, head)
  }

  async loadConversation (sessionId: string): Promise<Buffer | null> {
    return await this.#conversations.load(sessionId)
  }

  async reportNode (load: NodeLoad, ttlMs: number): Promise<void> {
    await this.#nodes.report(load, ttlMs)
  }

  async listNodes (): Promise<NodeLoad[]> {
    return await this.#nodes.list()
  }

  async forgetNode (node: string): Promise<void> {
    await this.#nodes.forget(node)
  }

  async claimOnce (key: string, ttlMs: number): Promise<boolean> {
    return await this.#client.set(`${this.#prefix}${key}`, '1', 'PX', Math.max(1, Math.ceil(ttlMs)), 'NX') === 'OK'
  }

  async ping (): Promise<void> {
    await this.#connection.ping()
  }

  /** After a lost connection, Redis may be another, empty one (restarted without persistence). */
  onReconnect (listener: () => void): void {
    this.#connection.onReconnect(listener)
  }

  async close (): Promise<void> {
    await this.#feed?.close()
    await this.#bus?.close()
    await this.#connection.close()
  }
}
