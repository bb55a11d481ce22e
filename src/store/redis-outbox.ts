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

  async takeOver (from: string, to: string): Promise<OutboxEntry[]> {
    const flat = await this.#commands[OUTBOX_TAKE_OVER_COMMAND](this.#entries(from), this.#entries(to), this.#nodes(), from, to)
    const taken: OutboxEntry[] = []
    for (let i = 0; i + 1 < flat.length; i += 2) taken.push({ id: flat[i] as string, text: flat[i + 1] as string })
    return taken
  }
}
