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
 * run: that Redis may have lost every key meanwhile.
 */
import { Cluster, type Redis } from 'ioredis'
import {
  type EventFeed, type EventStore, type Lease, type NodeBus, type NodeLoad, type ListOptions, type RetentionOptions, type SessionPage,
  type RawEvent, type SessionRecord, type StoredEvent, isFinal
} from './store.js'
import { RedisAppender } from './redis-append.js'
import { RedisBus } from './redis-bus.js'
import { redisClient } from './redis-client.js'
import { RedisFeed } from './redis-feed.js'
import { RedisSessionIndex } from './redis-index.js'
import { RedisLeases } from './redis-leases.js'
import { RedisNodes } from './redis-nodes.js'
import { RedisOutbox } from './redis-outbox.js'
import { RedisReader } from './redis-read.js'
import {
  LEASE_ACQUIRE_COMMAND, LEASE_ACQUIRE_SCRIPT, LEASE_RELEASE_COMMAND,
  LEASE_RELEASE_SCRIPT, LEASE_RENEW_COMMAND, LEASE_RENEW_SCRIPT, OUTBOX_KEEP_COMMAND, OUTBOX_KEEP_SCRIPT,
  OUTBOX_TAKE_OVER_COMMAND, OUTBOX_TAKE_OVER_SCRIPT, PUT_RECORD_COMMAND, PUT_RECORD_SCRIPT, type PutRecord,
  PUT_CONVERSATION_COMMAND, PUT_CONVERSATION_SCRIPT, type PutConversation, APPEND_CONVERSATION_COMMAND, APPEND_CONVERSATION_SCRIPT, type AppendConversation, READ_COMMAND, READ_SCRIPT,
  fenced, fenceOf
} from './redis-scripts.js'
import { withTimeout } from '../util/with-timeout.js'

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
  readonly #client: RedisClient
  readonly #ownsClient: boolean
  readonly #prefix: string
  readonly #retention: RetentionOptions
  readonly #timeoutMs: number
  #lastError: Error | null = null
  readonly #reconnectListeners: Array<() => void> = []
  /** Set at the first `ready`: later ones follow a lost connection. */
  #everReady = false
  readonly leases: RedisLeases
  /** Webhook deliveries not yet ended, per node: a few commands on the store's client, no connection of its own. */
  readonly outbox: RedisOutbox
  readonly #appender: RedisAppender
  readonly #reader: RedisReader
  readonly #index: RedisSessionIndex
  readonly #nodes: RedisNodes
  #feed: RedisFeed | null = null
  #bus: RedisBus | null = null

  constructor (config: RedisStoreConfig) {
    const prefix = config.prefix ?? 'cgw:'
    if (/[{}]/.test(prefix)) throw new Error(`redis prefix must not contain { or }: ${prefix}`)
    this.#prefix = prefix
    this.#retention = config.retention
    this.#timeoutMs = config.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS
    if (config.client !== undefined) {
      this.#client = config.client
      this.#ownsClient = false
    } else {
      const url = config.url ?? 'redis://127.0.0.1:6379'
      this.#client = redisClient(url, config.cluster === true, this.#timeoutMs)
      this.#ownsClient = true
      const failed = (error: Error): void => {
        this.#lastError = error
        config.onError?.(error)
      }
      // Without a listener ioredis prints every reconnect failure to stderr.
      this.#client.on('error', failed)
      if (this.#client instanceof Cluster) {
        const cluster = this.#client
        // A Cluster reports a failing node apart from its own errors.
        cluster.on('node error', failed)
        // A Cluster's own offline queue has no command timeout: while no node
        // answers, queued commands would wait for ever. It holds the commands
        // of start-up until the cluster is first reached; after that a command
        // fails at once while the cluster (or the node of its slot) is down,
        // as the session layer expects of a store (see redis-client.ts).
        cluster.once('ready', () => { cluster.options.enableOfflineQueue = false })
      }
      this.#client.on('ready', () => { this.#lastError = null })
    }
    // On an injected client too: the same name always carries the same script.
    this.#client.defineCommand(READ_COMMAND, { numberOfKeys: 2, lua: READ_SCRIPT })
    this.#client.defineCommand(PUT_RECORD_COMMAND, { numberOfKeys: 6, lua: PUT_RECORD_SCRIPT })
    this.#client.defineCommand(PUT_CONVERSATION_COMMAND, { numberOfKeys: 3, lua: PUT_CONVERSATION_SCRIPT })
    this.#client.defineCommand(APPEND_CONVERSATION_COMMAND, { numberOfKeys: 2, lua: APPEND_CONVERSATION_SCRIPT })
    this.#client.defineCommand(LEASE_ACQUIRE_COMMAND, { numberOfKeys: 3, lua: LEASE_ACQUIRE_SCRIPT })
    this.#client.defineCommand(LEASE_RENEW_COMMAND, { numberOfKeys: 3, lua: LEASE_RENEW_SCRIPT })
    this.#client.defineCommand(LEASE_RELEASE_COMMAND, { numberOfKeys: 1, lua: LEASE_RELEASE_SCRIPT })
    this.#client.defineCommand(OUTBOX_KEEP_COMMAND, { numberOfKeys: 2, lua: OUTBOX_KEEP_SCRIPT })
    this.#client.defineCommand(OUTBOX_TAKE_OVER_COMMAND, { numberOfKeys: 3, lua: OUTBOX_TAKE_OVER_SCRIPT })
    const client = this.#client
    this.#appender = new RedisAppender({
      client,
      retention: this.#retention,
      keys: (id) => ({ events: this.#events(id), meta: this.#meta(id), lease: this.#lease(id), followed: this.#followed(id), largest: this.#largest(id), channel: this.#channel(id) })
    })
    this.#reader = new RedisReader({
      client,
      keys: { events: (id) => this.#events(id), largest: (id) => this.#largest(id) },
      bound: (id, upTo) => this.#appender.bound(id, upTo)
    })
    this.#index = new RedisSessionIndex({
      client,
      keys: { tenantIndex: (tenant) => this.#tenantIndex(tenant), live: () => this.#live() },
      getSession: async (id) => await this.getSession(id)
    })
    this.#nodes = new RedisNodes({ client, key: `${this.#prefix}nodes` })
    this.leases = new RedisLeases({
      client: this.#client,
      retention: this.#retention,
      keys: { lease: (id) => this.#lease(id), epoch: (id) => this.#epoch(id), meta: (id) => this.#meta(id) }
    })
    this.outbox = new RedisOutbox({ client: this.#client, prefix: this.#prefix })
    // ioredis emits `ready` after every (re)connection; a Cluster once all its nodes answer.
    if (this.#client.status === 'ready') this.#everReady = true
    this.#client.on('ready', () => {
      if (!this.#everReady) {
        this.#everReady = true
        return
      }
      for (const listener of this.#reconnectListeners) {
        try {
          listener()
        } catch {
          // Listeners log their own failures; thrown inside ioredis' event, one would end the process.
        }
      }
    })
  }

  /** Connection state for health reporting: `ready` when commands go straight to Redis. */
  get status (): string {
    return this.#client.status
  }

  /** The last connection error seen since the client was last ready (clients created here only). */
  get lastError (): Error | null {
    return this.#lastError
  }

  /**
   * Live events for followers on this node: one subscriber connection (made
   * on first use, a duplicate of the store's client) for every session followed.
   */
  get feed (): EventFeed {
    this.#feed ??= new RedisFeed({
      // Same kind and options as the store's client (a Cluster duplicates as a Cluster).
      subscriber: this.#client instanceof Cluster ? this.#client.duplicate() : this.#client.duplicate(),
      client: this.#client,
      prefix: this.#prefix,
      read: async (id, after, limit) => await this.read(id, after, limit)
    })
    return this.#feed
  }

  /** Messages between nodes: this node's inbox is read by one blocking reader (made on first use, a duplicate of the store's client). */
  get bus (): NodeBus {
    this.#bus ??= new RedisBus({
      reader: this.#client instanceof Cluster ? this.#client.duplicate() : this.#client.duplicate(),
      client: this.#client,
      prefix: this.#prefix
    })
    return this.#bus
  }

  #events (id: string): string { return `${this.#prefix}{${sessionTag(id)}}:events` }
  #meta (id: string): string { return `${this.#prefix}{${sessionTag(id)}}:meta` }
  #lease (id: string): string { return `${this.#prefix}{${sessionTag(id)}}:lease` }
  #epoch (id: string): string { return `${this.#prefix}{${sessionTag(id)}}:epoch` }
  #conversation (id: string): string { return `${this.#prefix}{${sessionTag(id)}}:conversation` }
  #followed (id: string): string { return `${this.#prefix}{${sessionTag(id)}}:followed` }
  #largest (id: string): string { return `${this.#prefix}{${sessionTag(id)}}:largest` }
  #channel (id: string): string { return `${this.#prefix}{${sessionTag(id)}}:feed` }
  #tenantIndex (tenant: string): string { return `${this.#prefix}tenant:${tenant}:sessions` }
  #live (): string { return `${this.#prefix}live` }

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
    const json = JSON.stringify(record)
    const ttl = this.#retention.ttlSecondsAfterEnd
    const final = isFinal(record.status)
    // Record, events and epoch counter first, in one script on the session's slot; the
    // index entries after, so a listed member without meta always means expired.
    const client = this.#client as unknown as Record<typeof PUT_RECORD_COMMAND, PutRecord>
    try {
      await client[PUT_RECORD_COMMAND](this.#meta(record.id), this.#events(record.id), this.#lease(record.id), this.#epoch(record.id), this.#conversation(record.id), this.#largest(record.id),
        json, final && ttl > 0 ? ttl : 0, fenceOf(lease))
    } catch (err) {
      throw fenced(record.id, err)
    }
    await this.#index.add(record)
  }

  async getSession (id: string): Promise<SessionRecord | null> {
    let json: string | null
    try {
      json = await this.#client.get(this.#meta(id))
    } catch (err) {
      if (!isWrongType(err)) throw err
      return unreadable(id)
    }
    if (json === null) return null
    try {
      return JSON.parse(json) as SessionRecord
    } catch {
      return unreadable(id)
    }
  }

  async listSessions (tenant: string, options: ListOptions): Promise<SessionPage> {
    return await this.#index.listSessions(tenant, options)
  }

  async listLive (): Promise<SessionRecord[]> {
    return await this.#index.listLive()
  }

  async saveConversation (sessionId: string, data: Buffer, lease?: Lease): Promise<void> {
    const client = this.#client as unknown as Record<typeof PUT_CONVERSATION_COMMAND, PutConversation>
    try {
      await client[PUT_CONVERSATION_COMMAND](this.#conversation(sessionId), this.#lease(sessionId), this.#meta(sessionId), fenceOf(lease), data, Math.max(0, Math.floor(this.#retention.ttlSecondsAfterEnd)))
    } catch (err) {
      throw fenced(sessionId, err)
    }
  }

  async appendConversation (sessionId: string, at: number, data: Buffer, lease?: Lease, head?: Buffer): Promise<boolean> {
    const client = this.#client as unknown as Record<typeof APPEND_CONVERSATION_COMMAND, AppendConversation>
    try {
      return await client[APPEND_CONVERSATION_COMMAND](this.#conversation(sessionId), this.#lease(sessionId), fenceOf(lease), at, data, head ?? '') === 1
    } catch (err) {
      throw fenced(sessionId, err)
    }
  }

  async loadConversation (sessionId: string): Promise<Buffer | null> {
    return await this.#client.getBuffer(this.#conversation(sessionId))
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
    await withTimeout(this.#client.ping(), this.#timeoutMs, 'redis ping timed out')
  }

  /** After a lost connection, Redis may be another, empty one (restarted without persistence). */
  onReconnect (listener: () => void): void {
    this.#reconnectListeners.push(listener)
  }

  async close (): Promise<void> {
    await this.#feed?.close()
    await this.#bus?.close()
    if (!this.#ownsClient) return
    try {
      await withTimeout(this.#client.quit(), this.#timeoutMs, 'redis quit timed out')
    } catch {
      // Unreachable or slow: drop the connection without waiting.
    } finally {
      this.#client.disconnect()
    }
  }
}

/**
 * The hash-tag body for a session id. Redis hashes the text between the first
 * `{` and the next `}`, so an id holding `}` still gives one slot per session;
 * an empty id would give an empty tag (no tag at all), so it is refused.
 */
function sessionTag (id: string): string {
  if (id === '') throw new Error('session id must not be empty')
  return id
}

/**
 * What a meta key holds when it is no record (text that is not JSON, a key
 * of another type): not the gateway's writing, so it reads as one without a
 * MAC, which SignedStore refuses (logged, counted) like any other. Thrown,
 * it would fail every listing of the tenant and every listLive it is in.
 */
function unreadable (id: string): SessionRecord {
  return { id } as unknown as SessionRecord
}

function isWrongType (err: unknown): boolean {
  return err instanceof Error && err.message.startsWith('WRONGTYPE')
}
