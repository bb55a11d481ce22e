/**
 * The Redis event feed: live events of sessions whose CLI may run on another
 * gateway node sharing the Redis (or Redis Cluster).
 *
 * While a node follows a session it keeps the flag key `P{<id>}:followed`
 * (SET with PX, refreshed at a third of its TTL; never deleted, since other
 * nodes may follow too: it expires). While the flag exists, the store's
 * append script PUBLISHes the entries of each call (`<entry id>` and `<frame>`
 * lines, joined by "\n": the id gives the seq wherever the frame holds it) on
 * `P{<id>}:feed`. One subscriber connection per feed carries every followed
 * session's channel; the follower logic (catch-up from the log, held batches,
 * gaps) is MemoryFeed's (memory-feed.ts).
 *
 * Order on a session's first follow: SUBSCRIBE (answered), then SET of the
 * flag, then the catch-up read. Every append after the SET is published to
 * a live subscription, and every append before it is in the log the read
 * sees, so nothing falls between. Catch-up again, whenever appends may have
 * gone unpublished or unheard:
 * - the subscriber connection came back: ioredis subscribes again by itself
 *   (a Redis on `ready`; a Cluster's subscriber, which ioredis replaces with
 *   a connection to another node when it ends, with the channels of the old
 *   one), but what was published meanwhile is lost. The feed subscribes
 *   again itself, waits for the answer (so the subscription is live), sets
 *   the flags and catches up every follower;
 * - a refresh found the flag gone (expired while the event loop stalled, or
 *   a Redis that lost its keys): appends since went unpublished.
 *
 * On a Cluster, classic PUBLISH reaches every node, so one subscriber
 * connection to any node hears every session.
 */
import { Cluster, type Redis } from 'ioredis'
import { MemoryFeed } from './memory-feed.js'
import type { EventFeed, StoredEvent } from './store.js'
import { whenReady } from './redis-ready.js'

type RedisClient = Redis | Cluster

export interface RedisFeedConfig {
  /**
   * A connection for the feed alone (make it with `client.duplicate()`): it is
   * put into subscriber mode, and `close()` quits it. Its connection errors
   * are swallowed here; `client` reports the same outages.
   */
  subscriber: RedisClient
  /** For normal commands (the flag keys). Not closed by the feed. */
  client: RedisClient
  /** The store's key prefix. */
  prefix: string
  /** The store's read (seq > `after`, ascending, at most `limit`), for catch-up. */
  read: (sessionId: string, after: number, limit: number) => Promise<StoredEvent[]>
  /** TTL of a session's flag key; refreshed at a third of it while followed. Default 30000. */
  flagTtlMs?: number | undefined
}

const DEFAULT_FLAG_TTL_MS = 30_000
const RETRY_FIRST_MS = 100
const RETRY_MAX_MS = 5000
const QUIT_TIMEOUT_MS = 2000
/** How long a first follow waits for the subscriber to connect before trying anyway (and failing, reported). */
const READY_WAIT_MS = 5000

export class RedisFeed implements EventFeed {
  readonly #subscriber: RedisClient
  readonly #client: RedisClient
  readonly #prefix: string
  readonly #flagTtlMs: number
  readonly #core: MemoryFeed
  /** Channel name → session id, for the sessions followed now. */
  readonly #channels = new Map<string, string>()
  /** Channels whose UNSUBSCRIBE failed: ioredis would subscribe them again after a reconnect. */
  readonly #stale = new Set<string>()
  readonly #refreshTimer: NodeJS.Timeout
  /** The subscriber has been ready once: a later `ready` follows a lost connection. */
  #connected: boolean
  /** A Cluster's current subscriber connection, watched for its end. */
  #clusterInstance: RedisClient | null = null
  #resyncing = false
  #resyncAgain = false
  #retryTimer: NodeJS.Timeout | null = null
  #closed = false

  constructor (config: RedisFeedConfig) {
    this.#subscriber = config.subscriber
    this.#client = config.client
    this.#prefix = config.prefix
    this.#flagTtlMs = Math.max(3, config.flagTtlMs ?? DEFAULT_FLAG_TTL_MS)
    this.#core = new MemoryFeed({
      read: config.read,
      watch: async (id) => { await this.#watch(id) },
      unwatch: (id) => { this.#unwatch(id) }
    })
    this.#connected = this.#subscriber.status === 'ready'
    // Without a listener ioredis prints every reconnect failure to stderr.
    this.#subscriber.on('error', () => {})
    this.#subscriber.on('message', (channel: string, message: string) => { this.#onMessage(channel, message) })
    this.#subscriber.on('ready', () => {
      if (!this.#connected) {
        this.#connected = true
        return
      }
      this.#resync()
    })
    this.#refreshTimer = setInterval(() => { this.#refresh() }, Math.floor(this.#flagTtlMs / 3))
    this.#refreshTimer.unref()
  }

  follow (sessionId: string, after: number, onEvents: (events: StoredEvent[]) => void, onError?: (err: Error) => void): () => void {
    if (this.#closed) throw new Error('event feed is closed')
    return this.#core.follow(sessionId, after, onEvents, onError)
  }

  async close (): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    clearInterval(this.#refreshTimer)
    if (this.#retryTimer !== null) clearTimeout(this.#retryTimer)
    await this.#core.close()
    this.#channels.clear()
    let timer: NodeJS.Timeout | undefined
    try {
      await Promise.race([
        this.#subscriber.quit(),
        new Promise((resolve) => { timer = setTimeout(resolve, QUIT_TIMEOUT_MS) })
      ])
    } catch {
      // Unreachable: dropped below without waiting.
    } finally {
      clearTimeout(timer)
      this.#subscriber.disconnect()
    }
  }

  #channel (id: string): string { return `${this.#prefix}{${id}}:feed` }
  #flag (id: string): string { return `${this.#prefix}{${id}}:followed` }

  /** A session's first follower: subscribe (answered), then the flag; its followers read the log after. */
  async #watch (id: string): Promise<void> {
    const channel = this.#channel(id)
    this.#channels.set(channel, id)
    this.#stale.delete(channel)
    await this.#ready()
    await this.#subscriber.subscribe(channel)
    this.#watchClusterSubscriber(true)
    await this.#setFlag(id)
  }

  /**
   * Waits (bounded) while the subscriber is connecting: a duplicate of the
   * store's Cluster has no offline queue, so a SUBSCRIBE sent before it is
   * ready would fail and be reported. A lazy client (`wait`) connects on its
   * first command instead.
   */
  async #ready (): Promise<void> {
    await whenReady(this.#subscriber, READY_WAIT_MS)
  }

  #unwatch (id: string): void {
    const channel = this.#channel(id)
    this.#channels.delete(channel)
    if (this.#closed) return
    this.#subscriber.unsubscribe(channel).catch(() => {
      if (!this.#channels.has(channel)) this.#stale.add(channel)
    })
  }

  /** SET of the flag with its TTL; true when it was not there (appends since it went were not published). */
  async #setFlag (id: string): Promise<boolean> {
    return await this.#client.set(this.#flag(id), '1', 'PX', this.#flagTtlMs, 'GET') === null
  }

  #onMessage (channel: string, message: string): void {
    const id = this.#channels.get(channel)
    if (id === undefined || message === '') return
    // `<entry id>` and `<frame>` lines, as the append script publishes them.
    const lines = message.split('\n')
    const events: StoredEvent[] = []
    for (let i = 0; i < lines.length; i += 2) {
      const seq = seqOf(lines[i] as string)
      const frame = lines[i + 1]
      if (seq === null || frame === undefined || (events.length > 0 && seq !== (events[events.length - 1] as StoredEvent).seq + 1)) {
        // Not what the append script sends: trust the log instead.
        this.#core.fail(id, new Error(`unexpected message on ${channel}: ${message.slice(0, 80)}`))
        this.#core.resync(id)
        return
      }
      events.push({ seq, frame })
    }
    this.#core.publish(id, events)
  }

  /** Keeps the flags alive; a flag found gone means appends went unpublished: catch up. */
  #refresh (): void {
    if (this.#closed) return
    this.#watchClusterSubscriber(true)
    for (const id of this.#core.sessions()) {
      this.#setFlag(id).then((gone) => {
        if (gone && this.#channels.has(this.#channel(id))) this.#core.resync(id)
      }, () => {
        // Redis unreachable: the next refresh tries again, and finds the flag gone if it expired.
      })
    }
  }

  /**
   * After a lost subscriber connection: subscribe every channel again and
   * wait for the answer, set the flags, then every follower catches up.
   * Retried with backoff until it succeeds.
   */
  #resync (): void {
    if (this.#closed) return
    if (this.#resyncing) {
      this.#resyncAgain = true
      return
    }
    this.#resyncing = true
    if (this.#retryTimer !== null) clearTimeout(this.#retryTimer)
    this.#retryTimer = null
    const run = async (delay: number): Promise<void> => {
      this.#resyncAgain = false
      try {
        const stale = [...this.#stale].filter((c) => !this.#channels.has(c))
        if (stale.length > 0) {
          await this.#subscriber.unsubscribe(...stale)
          for (const c of stale) this.#stale.delete(c)
        }
        const channels = [...this.#channels.keys()]
        if (channels.length > 0) await this.#subscriber.subscribe(...channels)
        // The subscription just answered on the current connection: watch that one from now on.
        this.#watchClusterSubscriber(false)
        const ids = [...this.#channels.values()]
        await Promise.all(ids.map((id) => this.#setFlag(id)))
        if (this.#closed) return
        for (const id of ids) this.#core.resync(id)
        if (this.#resyncAgain) return await run(RETRY_FIRST_MS)
        this.#resyncing = false
      } catch {
        if (this.#closed) return
        // Followers' reads do not start before this succeeds, so there is nothing to report yet.
        await new Promise<void>((resolve) => { this.#retryTimer = setTimeout(resolve, delay) })
        this.#retryTimer = null
        if (this.#closed) return
        await run(Math.min(delay * 2, RETRY_MAX_MS))
      }
    }
    void run(RETRY_FIRST_MS)
  }

  /**
   * A Cluster's subscriber connection is ioredis' own (not the Cluster
   * object), replaced by a new one when it ends, with no event on the
   * Cluster: watch the current one's `end` (ioredis has already made its
   * successor when our listener runs, its own being older). The refresh
   * timer checks too, in case a replacement happened unseen. With
   * `resyncIfChanged`, a connection other than the one watched so far (or
   * one already ended) means a replacement we may have missed: resync.
   */
  #watchClusterSubscriber (resyncIfChanged: boolean): void {
    if (!(this.#subscriber instanceof Cluster) || this.#closed) return
    const instance = clusterSubscriberOf(this.#subscriber)
    if (instance === this.#clusterInstance) return
    const replaced = this.#clusterInstance !== null
    this.#clusterInstance = instance
    if (instance !== null) instance.once('end', () => { if (this.#clusterInstance === instance) this.#resync() })
    if (resyncIfChanged && (replaced || instance?.status === 'end')) this.#resync()
  }
}

/** The seq of a stream entry id `<seq>-0`; null if it is not one. */
function seqOf (id: string): number | null {
  const digits = id.endsWith('-0') ? id.slice(0, -2) : ''
  if (!/^[1-9][0-9]*$/.test(digits)) return null
  const seq = Number(digits)
  return Number.isSafeInteger(seq) ? seq : null
}

/** The connection ioredis' ClusterSubscriber uses now (a private field; null if it has none or the layout changed). */
function clusterSubscriberOf (cluster: Cluster): RedisClient | null {
  const holder = (cluster as unknown as { subscriber?: { getInstance?: () => RedisClient | null } }).subscriber
  return typeof holder?.getInstance === 'function' ? holder.getInstance() : null
}
