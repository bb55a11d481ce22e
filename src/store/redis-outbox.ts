/**
 * The webhook outbox in Redis: deliveries a node has not ended yet, kept
 * where every node sees them, so those of a node that crashes or stops are
 * sent by another (or by its own next start under the same NODE_ID).
 *
 *   P{webhooks}:out:<node>   Hash: delivery id → the webhook module's text.
 *   P{webhooks}:nodes        Set of the nodes that have (or had, until they
 *                            are taken over) entries kept.
 *
 * Every key carries the one hash tag `{webhooks}`, not the node's name: a
 * takeover reads one node's hash and writes another's in one script, which
 * a Redis Cluster runs only on keys of one slot. The outbox is small (a few
 * entries per turn, removed as they end), so one slot holds it easily.
 *
 * A takeover is a loop of script calls, each moving a bounded chunk, not
 * one call: a node that died with its receiver down for long leaves a
 * backlog, and moving 10,000 entries of 10 KB in one call held Redis for
 * over a second, while every session's appends on every node waited. Each
 * chunk moves atomically, so two nodes taking one node over at once split
 * its entries and never share one; a failed call leaves the chunks moved
 * before it (and its own, had it run) under the taker, which its own
 * takeover at the next sweep reads back (outbox-sweep.ts).
 *
 * `keep` is HSET and SADD in one script, so a kept entry's node is always
 * listed; `remove` is HDEL alone, leaving a node listed with nothing kept
 * until a takeover drops it (the interface allows it, and the call made
 * for every delivery that ends stays one plain command). Keys are named
 * here; RedisStore defines the outbox's scripts on the client, with its others.
 */
import type { OutboxEntry, WebhookOutbox } from './store.js'
import { OUTBOX_KEEP_COMMAND, type OutboxKeep, OUTBOX_TAKE_OVER_COMMAND, type OutboxTakeOver } from './redis-scripts.js'
import type { RedisClient } from './redis.js'

export interface RedisOutboxConfig {
  /** The store's client, with the outbox commands defined (RedisStore defines them). Not closed by the outbox. */
  client: RedisClient
  /** The store's key prefix (no `{` or `}`: the hash tag must be the key's first). */
  prefix: string
}

/**
 * Most entries one takeover script call moves: small entries cost Redis
 * mostly per entry (about 10 ms a chunk of 1,000 measured on a slow test
 * machine), and the HSET and HDEL of one chunk each stay one `unpack`.
 */
export const OUTBOX_CHUNK_ENTRIES = 1000
/**
 * Bytes (ids and texts) past which one takeover script call takes no more
 * entries: large entries cost Redis by the byte (copied into Lua, written
 * into the taker's hash, answered), 34 ms at most for a 4 MiB chunk on the
 * same machine, where the whole 100 MB backlog in one call took 3.3 s.
 * A 100 MB backlog is still only about 25 round trips.
 */
export const OUTBOX_CHUNK_BYTES = 4 * 1024 * 1024

type Commands = Record<typeof OUTBOX_KEEP_COMMAND, OutboxKeep> & Record<typeof OUTBOX_TAKE_OVER_COMMAND, OutboxTakeOver>

export class RedisOutbox implements WebhookOutbox {
  readonly #client: RedisClient
  readonly #commands: Commands
  readonly #prefix: string

  constructor (config: RedisOutboxConfig) {
    if (/[{}]/.test(config.prefix)) throw new Error(`redis prefix must not contain { or }: ${config.prefix}`)
    this.#client = config.client
    this.#commands = config.client as unknown as Commands
    this.#prefix = config.prefix
  }

  #entries (node: string): string { return `${this.#prefix}{webhooks}:out:${node}` }
  #nodes (): string { return `${this.#prefix}{webhooks}:nodes` }

  async keep (node: string, entry: OutboxEntry): Promise<void> {
    await this.#commands[OUTBOX_KEEP_COMMAND](this.#entries(node), this.#nodes(), entry.id, entry.text, node)
  }

  async remove (node: string, ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return
    await this.#client.hdel(this.#entries(node), ...ids)
  }

  async nodes (): Promise<string[]> {
    return await this.#client.smembers(this.#nodes())
  }

  /**
   * Calls the takeover script (redis-scripts.ts) until `from`'s hash is
   * empty (or, taking itself over, until it was read through), each call a
   * chunk of at most OUTBOX_CHUNK_ENTRIES entries or about
   * OUTBOX_CHUNK_BYTES. A failed call rejects; the chunks moved before it
   * stay under `to`, whose own takeover reads them again.
   */
  async takeOver (from: string, to: string): Promise<OutboxEntry[]> {
    // By id: a scan may answer an entry twice, and an id kept again after its move moves again.
    const taken = new Map<string, string>()
    let cursor = '0'
    do {
      const reply = await this.#commands[OUTBOX_TAKE_OVER_COMMAND](this.#entries(from), this.#entries(to), this.#nodes(), from, to, cursor, OUTBOX_CHUNK_ENTRIES, OUTBOX_CHUNK_BYTES)
      cursor = reply[0] ?? ''
      for (let i = 1; i + 1 < reply.length; i += 2) taken.set(reply[i] as string, reply[i + 1] as string)
    } while (cursor !== '')
    return [...taken].map(([id, text]) => ({ id, text }))
  }
}
