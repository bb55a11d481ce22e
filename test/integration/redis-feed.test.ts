/**
 * The Redis event feed (src/store/redis-feed.ts) against a real Redis and a
 * private three-master Redis Cluster, with appends made by the real
 * RedisStore.append (whose script publishes while a node follows): live
 * delivery in order and exactly once; backlog then live under a concurrent
 * burst; several followers on one node and on another node; unfollow; a
 * killed subscriber connection; a batch after unpublished appends; a flag
 * that vanished. Each test has its own key prefix; expected sequences are
 * read back from what was appended.
 *
 * The cluster half is skipped, saying what to install, when redis-server or
 * redis-cli is missing.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, afterEach, before, describe, it } from 'node:test'
import { Cluster, Redis } from 'ioredis'
import { RedisFeed } from '../../src/store/redis-feed.js'
import { RedisStore } from '../../src/store/redis.js'
import type { StoredEvent } from '../../src/store/store.js'
import { type RedisCluster, redisClusterMissing, startRedisCluster } from '../support/redis-cluster.js'
import { REDIS_URL, deleteKeys, redisCommand } from '../support/redis-server.js'
import { eventually } from '../support/gateway.js'
import { Waiters } from '../support/waiters.js'

type RedisClient = Redis | Cluster

const RETENTION = { maxEventsPerSession: 100_000, ttlSecondsAfterEnd: 0 }
const TIMEOUT_MS = 15_000
/** The subscriber of a single Redis waits this long before reconnecting, so appends right after a kill go unheard. */
const SUBSCRIBER_RECONNECT_MS = 250

/** Where the feed runs: a single Redis or the cluster. */
interface Target {
  client: RedisClient
  /** URLs of every master, for PUBSUB and CLIENT commands. */
  nodes: string[]
  /** A subscriber connection named `name`, as the store makes one (a duplicate of its client). */
  subscriber: (name: string) => RedisClient
  /** Kills the pubsub connection(s) of the subscriber named `name`; resolves with how many were killed. */
  killSubscriber: (name: string) => Promise<number>
  /** Removes a test's keys. */
  cleanup: (prefix: string) => Promise<void>
}

function frame (seq: number): StoredEvent {
  // A newline inside the text is escaped by JSON, so frames stay one line; non-ASCII must survive too.
  return { seq, frame: JSON.stringify({ seq, type: 'assistant', text: `event ${seq}\nline two ü ✓` }) }
}

function range (from: number, to: number): StoredEvent[] {
  const out: StoredEvent[] = []
  for (let seq = from; seq <= to; seq++) out.push(frame(seq))
  return out
}

/** What one follower received, with a wait on it. */
class Received {
  readonly events: StoredEvent[] = []
  readonly errors: Error[] = []
  readonly #waiters = new Waiters()
  readonly onEvents = (events: StoredEvent[]): void => { this.events.push(...events); this.#waiters.wake() }
  readonly onError = (err: Error): void => { this.errors.push(err); this.#waiters.wake() }

  /** Resolves once the last seq received is `seq` or beyond. */
  async upTo (seq: number): Promise<void> {
    await this.#waiters.until(() => (this.events.at(-1)?.seq ?? 0) >= seq, TIMEOUT_MS, `seq ${seq}`,
      () => `last received ${this.events.at(-1)?.seq ?? 'none'}`)
  }
}

/** A store and feeds ("nodes") over one target, under a prefix of their own. */
class Harness {
  readonly prefix = `cgw-test:feed:${randomUUID()}:`
  readonly store: RedisStore
  readonly id = randomUUID()
  /** Reads made by the feeds (catch-ups). */
  reads = 0
  readonly #target: Target
  readonly #feeds: RedisFeed[] = []

  constructor (target: Target) {
    this.#target = target
    this.store = new RedisStore({ client: target.client, prefix: this.prefix, retention: RETENTION })
  }

  get channel (): string { return `${this.prefix}{${this.id}}:feed` }
  get flag (): string { return `${this.prefix}{${this.id}}:followed` }
  get streamKey (): string { return `${this.prefix}{${this.id}}:events` }

  feed (options: { name?: string, flagTtlMs?: number } = {}): RedisFeed {
    const feed = new RedisFeed({
      subscriber: this.#target.subscriber(options.name ?? `feed-test-${randomUUID()}`),
      client: this.#target.client,
      prefix: this.prefix,
      read: async (id, after, limit) => { this.reads++; return await this.store.read(id, after, limit) },
      flagTtlMs: options.flagTtlMs
    })
    this.#feeds.push(feed)
    return feed
  }

  async append (events: StoredEvent[]): Promise<void> {
    await this.store.append(this.id, events)
  }

  /** Everything stored after `after`: what a follower from there must have received. */
  async stored (after: number): Promise<StoredEvent[]> {
    return await this.store.read(this.id, after, 1_000_000)
  }

  /** Subscribers of the session's channel over all masters. */
  async subscribers (): Promise<number> {
    let total = 0
    for (const url of this.#target.nodes) {
      const reply = await redisCommand(url, ['PUBSUB', 'NUMSUB', this.channel]) as [string, number]
      total += Number(reply[1])
    }
    return total
  }

  /** Polls the subscriber count until it is `n` (a state that announces itself with no event). */
  async subscribersBecome (n: number): Promise<void> {
    await eventually(async () => await this.subscribers() === n, TIMEOUT_MS, `the channel to have ${n} subscriber(s)`)
  }

  async close (): Promise<void> {
    await Promise.all(this.#feeds.map((f) => f.close()))
    await this.store.close()
    await this.#target.cleanup(this.prefix)
  }
}

function feedCases (target: () => Target): void {
  let h: Harness | undefined
  const setup = (): Harness => { h = new Harness(target()); return h }
  afterEach(async () => { await h?.close(); h = undefined })

  it('delivers events appended after follow in order, exactly once', async () => {
    const h = setup()
    const feed = h.feed()
    const got = new Received()
    const stop = feed.follow(h.id, 0, got.onEvents, got.onError)
    // Appends may start before the subscription is live: those come from the catch-up read.
    let seq = 0
    for (let batch = 1; batch <= 40; batch++) {
      await h.append(range(seq + 1, seq + batch))
      seq += batch
    }
    // A retried batch (seqs already held) is published again and must not repeat.
    await h.append(range(seq - 4, seq))
    await got.upTo(seq)
    assert.deepEqual(got.events, await h.stored(0))
    assert.deepEqual(got.errors, [])
    const ttl = await target().client.pttl(h.flag)
    assert.ok(ttl > 0 && ttl <= 30_000, `the flag has its TTL (${ttl} ms)`)
    stop()
  })

  it('takes the seq from the entry id, not the frame: gateway frames (seq after type) and frames with no seq arrive live, no catch-up', async () => {
    const h = setup()
    await h.append(range(1, 1))
    const got = new Received()
    const stop = h.feed().follow(h.id, 1, got.onEvents, got.onError)
    await h.append(range(2, 2))
    await got.upTo(2) // the subscription is live
    const odd: StoredEvent[] = [
      { seq: 3, frame: JSON.stringify({ type: 'gateway', subtype: 'status', seq: 3, status: 'stopped' }) },
      { seq: 4, frame: JSON.stringify({ type: 'assistant', message: { text: 'a "seq":99, inside' }, seq: 4 }) }
    ]
    await h.append(odd)
    await got.upTo(4)
    assert.deepEqual(got.events.slice(-2), odd)
    assert.deepEqual(got.errors, [], 'no message was refused (a refused one would be reported and read back from the log)')
    stop()
  })

  it('gives the stored backlog then live, with no gap or duplicate, while 2000 events are appended in many batches', async () => {
    const h = setup()
    await h.append(range(1, 300))
    const burst = (async () => {
      let seq = 300
      while (seq < 2300) {
        const size = 1 + (seq % 13)
        await h.append(range(seq + 1, seq + size))
        seq += size
      }
      return seq
    })()
    // Two feeds, as two nodes: following starts while the burst runs.
    const a = new Received()
    const b = new Received()
    const stopA = h.feed().follow(h.id, 100, a.onEvents, a.onError)
    await new Promise((resolve) => setImmediate(resolve)) // let the burst get going
    const stopB = h.feed().follow(h.id, 0, b.onEvents, b.onError)
    const last = await burst
    await a.upTo(last)
    await b.upTo(last)
    assert.deepEqual(a.events, await h.stored(100))
    assert.deepEqual(b.events, await h.stored(0))
    assert.deepEqual([...a.errors, ...b.errors], [])
    stopA()
    stopB()
  })

  it('serves two follows of one session on one node (one subscription), and a follow on another node', async () => {
    const h = setup()
    await h.append(range(1, 30))
    const node1 = h.feed()
    const node2 = h.feed()
    const first = new Received()
    const second = new Received()
    const other = new Received()
    const stopFirst = node1.follow(h.id, 0, first.onEvents, first.onError)
    const stopSecond = node1.follow(h.id, 20, second.onEvents, second.onError)
    const stopOther = node2.follow(h.id, 10, other.onEvents, other.onError)
    await h.append(range(31, 50))
    await h.append(range(51, 51))
    await Promise.all([first.upTo(51), second.upTo(51), other.upTo(51)])
    assert.deepEqual(first.events, await h.stored(0))
    assert.deepEqual(second.events, await h.stored(20))
    assert.deepEqual(other.events, await h.stored(10))
    assert.equal(await h.subscribers(), 2, 'one subscription per node')
    stopFirst()
    stopSecond()
    stopOther()
  })

  it('stops delivering once unfollowed, and unsubscribes when the last follower goes (the flag stays)', async () => {
    const h = setup()
    const node1 = h.feed()
    const node2 = h.feed()
    const gone = new Received()
    const stays = new Received()
    const stopGone = node1.follow(h.id, 0, gone.onEvents, gone.onError)
    const stopStays = node2.follow(h.id, 0, stays.onEvents, stays.onError)
    await h.append(range(1, 10))
    await gone.upTo(10)
    stopGone()
    await h.subscribersBecome(1)
    await h.append(range(11, 20))
    // The node still following got the later events: the other would have had them by then too.
    await stays.upTo(20)
    assert.deepEqual(gone.events, await h.store.read(h.id, 0, 10))
    assert.deepEqual(stays.events, await h.stored(0))
    stopStays()
    await h.subscribersBecome(0)
    assert.equal(await target().client.exists(h.flag), 1, 'the flag is left to expire')
  })

  it('loses nothing appended while its subscriber connection was killed', async () => {
    const h = setup()
    const name = `feed-test-${randomUUID()}`
    const feed = h.feed({ name })
    const got = new Received()
    const stop = feed.follow(h.id, 0, got.onEvents, got.onError)
    await h.append(range(1, 10))
    await got.upTo(10)
    const readsBefore = h.reads
    assert.ok(await target().killSubscriber(name) >= 1, 'the subscriber connection was killed')
    // Appended at once, then nothing more: only the feed's own catch-up after reconnecting can bring it.
    await h.append(range(11, 25))
    if (target().nodes.length === 1) assert.equal(await h.subscribers(), 0, 'the batch was published to nobody')
    await got.upTo(25)
    // On a Cluster the subscriber may be back before the batch is published and get it live;
    // the catch-up read after the reconnect still comes (it may land after the batch).
    await eventually(() => h.reads > readsBefore, 10_000, 'the feed read the log after the reconnect')
    // And the subscription is live again.
    await h.append(range(26, 30))
    await got.upTo(30)
    assert.deepEqual(got.events, await h.stored(0))
    stop()
  })

  it('catches up from the log when a published batch does not follow the last seq delivered', async () => {
    const h = setup()
    const got = new Received()
    const stop = h.feed().follow(h.id, 0, got.onEvents, got.onError)
    await h.append(range(1, 5))
    await got.upTo(5)
    const readsBefore = h.reads
    // 6..9 go into the stream without the script, so without a PUBLISH.
    for (const e of range(6, 9)) await target().client.xadd(h.streamKey, `${e.seq}-0`, 'f', e.frame)
    await h.append(range(10, 12))
    await got.upTo(12)
    assert.deepEqual(got.events, await h.stored(0))
    assert.ok(h.reads > readsBefore, 'the gap was filled by a read of the log')
    stop()
  })

  it('catches up when a refresh finds the flag gone (appends meanwhile were not published)', async () => {
    const h = setup()
    const got = new Received()
    const stop = h.feed({ flagTtlMs: 600 }).follow(h.id, 0, got.onEvents, got.onError)
    await h.append(range(1, 3))
    await got.upTo(3)
    await target().client.del(h.flag)
    await h.append(range(4, 8))
    // No later append: the next refresh (every 200 ms) sets the flag again and finds it was gone.
    await got.upTo(8)
    assert.deepEqual(got.events, await h.stored(0))
    stop()
  })
}

describe('RedisFeed on a single Redis', () => {
  let client: Redis
  const target = (): Target => ({
    client,
    nodes: [REDIS_URL],
    subscriber: (name) => client.duplicate({ connectionName: name, retryStrategy: () => SUBSCRIBER_RECONNECT_MS }),
    killSubscriber: async (name) => {
      const list = String(await redisCommand(REDIS_URL, ['CLIENT', 'LIST', 'TYPE', 'pubsub']))
      const line = list.split('\n').find((l) => l.includes(` name=${name} `))
      const id = line?.match(/^id=(\d+) /)?.[1]
      if (id === undefined) return 0
      // Only this test's connection: other test files may share this Redis.
      return await redisCommand(REDIS_URL, ['CLIENT', 'KILL', 'ID', id, 'TYPE', 'pubsub']) as number
    },
    cleanup: async (prefix) => { await deleteKeys(REDIS_URL, prefix) }
  })
  before(() => {
    client = new Redis(REDIS_URL)
    client.on('error', () => {})
  })
  after(() => { client?.disconnect() })
  feedCases(target)
})

const missing = redisClusterMissing()

describe('RedisFeed on a Redis Cluster', { skip: missing ?? false }, () => {
  let cluster: RedisCluster | undefined
  let client: Cluster
  let nodes: string[] = []
  const target = (): Target => ({
    client,
    nodes,
    // ioredis makes a Cluster's subscriber connection itself, on a node of its choice.
    subscriber: () => client.duplicate(),
    killSubscriber: async () => {
      let killed = 0
      for (const url of nodes) killed += await redisCommand(url, ['CLIENT', 'KILL', 'TYPE', 'pubsub']) as number
      return killed
    },
    cleanup: async () => {}
  })
  before(async () => {
    cluster = await startRedisCluster()
    nodes = cluster.ports.map((port) => `redis://127.0.0.1:${port}`)
    client = new Cluster([{ host: '127.0.0.1', port: cluster.ports[0] as number }])
    client.on('error', () => {})
    // As RedisStore sets its own Cluster (and so the duplicate it makes for the feed): no offline queue once ready.
    await new Promise((resolve) => client.once('ready', resolve))
    client.options.enableOfflineQueue = false
  })
  after(async () => {
    client?.disconnect()
    await cluster?.stop()
  })
  feedCases(target)
})
