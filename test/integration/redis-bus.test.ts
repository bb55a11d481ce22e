/**
 * The Redis node bus (src/store/redis-bus.ts) against a real Redis and a
 * private three-master Redis Cluster: 1000 messages from two senders in
 * order and exactly once; nothing from before start; messages sent while
 * the reader's connection was killed arrive after it reconnects; the inbox
 * TTL and trim; close() while a BLOCK is pending; two nodes on one Redis.
 * Each test has its own key prefix; expectations come from what was sent.
 *
 * The cluster half is skipped, saying what to install, when redis-server or
 * redis-cli is missing.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, afterEach, before, describe, it } from 'node:test'
import { Cluster, Redis } from 'ioredis'
import { RedisBus } from '../../src/store/redis-bus.js'
import { type RedisCluster, redisClusterMissing, startRedisCluster } from '../support/redis-cluster.js'
import { REDIS_URL, deleteKeys, redisCommand } from '../support/redis-server.js'
import { eventually } from '../support/gateway.js'
import { Waiters } from '../support/waiters.js'

type RedisClient = Redis | Cluster

const TIMEOUT_MS = 15_000
/** The reader of a single Redis waits this long before reconnecting, so sends right after a kill find it gone. */
const READER_RECONNECT_MS = 250

/** Where the bus runs: a single Redis or the cluster. */
interface Target {
  client: RedisClient
  /** URLs of every master, for CLIENT commands. */
  nodes: string[]
  /**
   * A reader connection named `name`, as the store makes one (a duplicate of
   * its client). With `resend: false`, a command in flight when the
   * connection drops fails instead of being sent again after the reconnect.
   * With `commandTimeout`, commands fail after that long, as the store's do.
   */
  reader: (name: string, options: ReaderOptions) => RedisClient
  /** Removes a test's keys (besides the inboxes the harness deletes itself). */
  cleanup: (prefix: string) => Promise<void>
}

interface ReaderOptions {
  resend: boolean
  commandTimeout?: number | undefined
}

/** What one node's inbox received, with a wait on it. */
class Inbox {
  readonly messages: string[] = []
  readonly #waiters = new Waiters()
  readonly onMessage = (message: string): void => { this.messages.push(message); this.#waiters.wake() }

  async count (n: number): Promise<void> {
    await this.#waiters.until(() => this.messages.length >= n, TIMEOUT_MS, `${n} message(s)`,
      () => `${this.messages.length} so far, last ${this.messages.at(-1) ?? 'none'}`)
  }
}

/** Polls `check` until it holds (client lists announce nothing): the shared poll of the test support. */
async function until (check: () => Promise<boolean>, what: string): Promise<void> {
  await eventually(check, TIMEOUT_MS, what)
}

/** Buses ("nodes") over one target, under a prefix of their own. */
class Harness {
  readonly prefix = `cgw-test:bus:${randomUUID()}:`
  /** Failures the buses reported (retried reads). */
  readonly errors: Error[] = []
  readonly #target: Target
  readonly #buses: RedisBus[] = []
  readonly #nodes = new Set<string>()
  readonly #clients: RedisClient[] = []

  constructor (target: Target) {
    this.#target = target
  }

  /** A node name of this test; its inbox is deleted at the end. */
  node (): string {
    const node = `node-${randomUUID()}`
    this.#nodes.add(node)
    return node
  }

  inbox (node: string): string { return `${this.prefix}node:{${node}}:inbox` }

  bus (options: { name?: string, client?: RedisClient, maxLen?: number, ttlMs?: number, resend?: boolean, reader?: RedisClient } = {}): RedisBus {
    const bus = new RedisBus({
      reader: options.reader ?? this.#target.reader(options.name ?? `bus-test-${randomUUID()}`, { resend: options.resend ?? true }),
      client: options.client ?? this.#target.client,
      prefix: this.prefix,
      maxLen: options.maxLen,
      ttlMs: options.ttlMs,
      onError: (err) => { this.errors.push(err) }
    })
    this.#buses.push(bus)
    return bus
  }

  /** Another connection to send with (a second sender), once it is ready; closed at the end. */
  async client (): Promise<RedisClient> {
    const target = this.#target.client
    const client: RedisClient = target instanceof Cluster ? target.duplicate() : target.duplicate()
    client.on('error', () => {})
    this.#clients.push(client)
    // A duplicate of the cluster has no offline queue: it takes commands once ready.
    if (client.status !== 'ready') await new Promise((resolve) => client.once('ready', resolve))
    return client
  }

  /** The CLIENT LIST lines of connections named `name`, over all masters, with the master's URL. */
  async connections (name: string): Promise<Array<{ url: string, line: string }>> {
    const found: Array<{ url: string, line: string }> = []
    for (const url of this.#target.nodes) {
      const list = String(await redisCommand(url, ['CLIENT', 'LIST']))
      for (const line of list.split('\n')) if (line.includes(` name=${name} `)) found.push({ url, line })
    }
    return found
  }

  /** The reader's connection that reads the inbox (its last command is XREAD), once there is one. */
  async readerConnection (name: string, blocked = false): Promise<{ url: string, id: string }> {
    let hit: { url: string, id: string } | undefined
    await until(async () => {
      const line = (await this.connections(name)).find((c) => / cmd=xread /.test(c.line) && (!blocked || / flags=\w*b\w* /.test(c.line)))
      const id = line?.line.match(/^id=(\d+) /)?.[1]
      if (line !== undefined && id !== undefined) hit = { url: line.url, id }
      return hit !== undefined
    }, `a connection named ${name} reading with XREAD${blocked ? ' (blocked)' : ''}`)
    return hit as { url: string, id: string }
  }

  async close (): Promise<void> {
    await Promise.all(this.#buses.map((b) => b.close()))
    for (const node of this.#nodes) await this.#target.client.del(this.inbox(node))
    for (const client of this.#clients) client.disconnect()
    await this.#target.cleanup(this.prefix)
  }
}

/** `count` messages tagged with their sender and index, with text that must survive as is. */
function messages (sender: string, count: number): string[] {
  const out: string[] = []
  for (let i = 0; i < count; i++) out.push(JSON.stringify({ sender, i, text: `line ${i}\nline two ü ✓` }))
  return out
}

function busCases (target: () => Target): void {
  let h: Harness | undefined
  const setup = (): Harness => { h = new Harness(target()); return h }
  afterEach(async () => { await h?.close(); h = undefined })

  it('delivers 1000 messages from two senders in order, exactly once', async () => {
    const h = setup()
    const node = h.node()
    const inbox = new Inbox()
    await h.bus().start(node, inbox.onMessage)
    const senders = { a: h.bus(), b: h.bus({ client: await h.client() }) }
    const sent = { a: messages('a', 500), b: messages('b', 500) }
    // Each sender fires all its sends at once: they keep their order on its connection.
    await Promise.all([
      ...sent.a.map((m) => senders.a.send(node, m)),
      ...sent.b.map((m) => senders.b.send(node, m))
    ])
    const total = sent.a.length + sent.b.length
    await inbox.count(total)
    assert.equal(inbox.messages.length, total)
    const from = (sender: string): string[] => inbox.messages.filter((m) => (JSON.parse(m) as { sender: string }).sender === sender)
    assert.deepEqual(from('a'), sent.a)
    assert.deepEqual(from('b'), sent.b)
    // Nothing more comes: a later message is the next one delivered.
    await senders.a.send(node, 'end')
    await inbox.count(total + 1)
    assert.deepEqual(inbox.messages.slice(total), ['end'])
    assert.deepEqual(h.errors, [])
  })

  it('does not deliver a message sent before start, and delivers one sent after start resolves', async () => {
    const h = setup()
    const node = h.node()
    const sender = h.bus()
    await sender.send(node, 'too early')
    const inbox = new Inbox()
    await h.bus().start(node, inbox.onMessage)
    const later = ['in time', 'and this']
    for (const m of later) await sender.send(node, m)
    await inbox.count(later.length)
    assert.deepEqual(inbox.messages, later)
  })

  it('starts on an empty inbox and refuses a second start on one bus', async () => {
    const h = setup()
    const node = h.node()
    const bus = h.bus()
    const inbox = new Inbox()
    await bus.start(node, inbox.onMessage)
    await assert.rejects(bus.start(h.node(), () => {}), /already reading/)
    await h.bus().send(node, 'first')
    await inbox.count(1)
    assert.deepEqual(inbox.messages, ['first'])
  })

  for (const resend of [true, false]) {
    // ioredis sends a pending XREAD again after a reconnect; without that, the XREAD is lost and the bus gives up on it and reads again.
    const how = resend ? 'the pending XREAD resent by ioredis' : 'the pending XREAD lost with the connection'
    it(`delivers messages sent while its reader connection was killed, after it reconnects (${how})`, async () => {
      const h = setup()
      const node = h.node()
      const name = `bus-test-${randomUUID()}`
      const inbox = new Inbox()
      await h.bus({ name, resend }).start(node, inbox.onMessage)
      const sender = h.bus()
      const before = messages('before', 5)
      for (const m of before) await sender.send(node, m)
      await inbox.count(before.length)
      const reader = await h.readerConnection(name)
      const killed = await redisCommand(reader.url, ['CLIENT', 'KILL', 'ID', reader.id])
      assert.equal(killed, 1, 'the reader connection was killed')
      // Sent at once, then nothing more until they arrived: only reading on from the last id can bring them.
      const during = messages('during', 20)
      await Promise.all(during.map((m) => sender.send(node, m)))
      if (target().nodes.length === 1) {
        assert.equal((await h.connections(name)).length, 0, 'the messages were sent while the reader was not connected')
      }
      await inbox.count(before.length + during.length)
      const after = messages('after', 3)
      for (const m of after) await sender.send(node, m)
      await inbox.count(before.length + during.length + after.length)
      assert.deepEqual(inbox.messages, [...before, ...during, ...after])
      const now = await h.readerConnection(name)
      assert.notEqual(`${now.url} ${now.id}`, `${reader.url} ${reader.id}`, 'a new connection reads the inbox')
      // On a single Redis nothing but the bus reads it again (on a cluster ioredis may retry the command itself).
      if (!resend && target().nodes.length === 1) assert.ok(h.errors.length > 0, 'the lost read was reported (and read again)')
    })
  }

  it('keeps its BLOCK within the reader\'s command timeout: idle reads are not failures', async () => {
    const h = setup()
    const node = h.node()
    const reader = target().reader(`bus-test-${randomUUID()}`, { resend: true, commandTimeout: 600 })
    // Counts the reads the bus makes (an instance property shadows ioredis' method).
    let reads = 0
    const xread = reader.xread.bind(reader) as (...args: unknown[]) => Promise<unknown>
    const waiters = new Waiters()
    Object.assign(reader, { xread: async (...args: unknown[]) => { try { return await xread(...args) } finally { reads++; waiters.wake() } } })
    const inbox = new Inbox()
    await h.bus({ reader }).start(node, inbox.onMessage)
    await waiters.until(() => reads >= 4, TIMEOUT_MS, '4 reads', () => `${reads} reads`)
    assert.deepEqual(h.errors, [], 'no read timed out')
    await h.bus().send(node, 'still reading')
    await inbox.count(1)
    assert.deepEqual(inbox.messages, ['still reading'])
  })

  it('gives the inbox key its TTL and trims it to about maxLen', async () => {
    const h = setup()
    const node = h.node()
    const ttlMs = 60_000
    const maxLen = 10
    const bus = h.bus({ ttlMs, maxLen })
    const first = 'one message'
    await bus.send(node, first)
    const key = h.inbox(node)
    const ttl = await target().client.pttl(key)
    assert.ok(ttl > 0 && ttl <= ttlMs, `the inbox has its TTL (${ttl} ms)`)
    const entries = await target().client.xrange(key, '-', '+')
    assert.deepEqual(entries.map(([, fields]) => fields), [['m', first]])
    const many = messages('trim', 500)
    for (const m of many) await bus.send(node, m)
    const length = await target().client.xlen(key)
    // MAXLEN ~ trims whole macro nodes (100 entries by default), so the length is maxLen or a little more.
    assert.ok(length >= maxLen && length < many.length / 2, `the inbox was trimmed (${length} entries)`)
  })

  it('closes within a second while a BLOCK is pending, and delivers nothing after', async () => {
    const h = setup()
    const node = h.node()
    const name = `bus-test-${randomUUID()}`
    const bus = h.bus({ name })
    const inbox = new Inbox()
    await bus.start(node, inbox.onMessage)
    await h.readerConnection(name, true)
    const started = Date.now()
    await bus.close()
    const took = Date.now() - started
    assert.ok(took < 1000, `close took ${took} ms`)
    await until(async () => (await h.connections(name)).length === 0, 'the reader connection to go')
    await h.bus().send(node, 'after close')
    await assert.rejects(bus.start(node, () => {}), /closed/)
    await assert.rejects(bus.send(node, 'x'), /closed/)
    assert.deepEqual(inbox.messages, [])
  })

  it('gives two nodes on one Redis only their own messages', async () => {
    const h = setup()
    const one = h.node()
    const two = h.node()
    const inboxOne = new Inbox()
    const inboxTwo = new Inbox()
    await h.bus().start(one, inboxOne.onMessage)
    await h.bus().start(two, inboxTwo.onMessage)
    const sender = h.bus()
    const toOne = messages(one, 30)
    const toTwo = messages(two, 20)
    const sends: Array<Promise<void>> = []
    for (let i = 0; i < Math.max(toOne.length, toTwo.length); i++) {
      if (i < toOne.length) sends.push(sender.send(one, toOne[i] as string))
      if (i < toTwo.length) sends.push(sender.send(two, toTwo[i] as string))
    }
    await Promise.all(sends)
    await inboxOne.count(toOne.length)
    await inboxTwo.count(toTwo.length)
    // One more to each, so anything misdelivered would have arrived before it.
    await sender.send(one, 'last one')
    await sender.send(two, 'last two')
    await inboxOne.count(toOne.length + 1)
    await inboxTwo.count(toTwo.length + 1)
    assert.deepEqual(inboxOne.messages, [...toOne, 'last one'])
    assert.deepEqual(inboxTwo.messages, [...toTwo, 'last two'])
  })
}

describe('RedisBus on a single Redis', () => {
  let client: Redis
  const target = (): Target => ({
    client,
    nodes: [REDIS_URL],
    reader: (name, options) => client.duplicate({
      connectionName: name,
      retryStrategy: () => READER_RECONNECT_MS,
      autoResendUnfulfilledCommands: options.resend,
      ...(options.commandTimeout !== undefined ? { commandTimeout: options.commandTimeout } : {})
    }),
    cleanup: async (prefix) => { await deleteKeys(REDIS_URL, prefix) }
  })
  before(() => {
    client = new Redis(REDIS_URL)
    client.on('error', () => {})
  })
  after(() => { client?.disconnect() })
  busCases(target)
})

const missing = redisClusterMissing()
// Started with the file, so its start overlaps the single-Redis cases (it only waits on its own processes).
const clusterStarting = missing === null ? startRedisCluster() : null
clusterStarting?.catch(() => {}) // its failure is the cluster cases' (their before awaits it), not the file's

describe('RedisBus on a Redis Cluster', { skip: missing ?? false }, () => {
  let cluster: RedisCluster | undefined
  let client: Cluster
  let nodes: string[] = []
  const target = (): Target => ({
    client,
    nodes,
    reader: (name, options) => client.duplicate([], {
      redisOptions: {
        ...client.options.redisOptions,
        connectionName: name,
        autoResendUnfulfilledCommands: options.resend,
        ...(options.commandTimeout !== undefined ? { commandTimeout: options.commandTimeout } : {})
      }
    }),
    cleanup: async () => {}
  })
  before(async () => {
    cluster = await (clusterStarting as Promise<RedisCluster>)
    nodes = cluster.ports.map((port) => `redis://127.0.0.1:${port}`)
    client = new Cluster([{ host: '127.0.0.1', port: cluster.ports[0] as number }])
    client.on('error', () => {})
    // As RedisStore sets its own Cluster (and so the duplicate it makes for the bus): no offline queue once ready.
    await new Promise((resolve) => client.once('ready', resolve))
    client.options.enableOfflineQueue = false
  })
  after(() => { client?.disconnect() })
  busCases(target)
})

// At the file's end, whether or not the cluster's cases ran (a run filtered by name starts it all the same).
after(async () => { await (await clusterStarting?.catch(() => null))?.stop() })
