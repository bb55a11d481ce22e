/**
 * The Redis store's node reports: the hash `P nodes`, NODE_ID → how full that
 * node said it was and until when the report counts, read to place new
 * sessions. A node that stops reporting (it died) is dropped lazily, by
 * whoever lists. The key is named by the store (`key`), which owns the
 * layout (redis.ts).
 */
import type { NodeLoad } from './store.js'
import type { RedisClient } from './redis.js'

export interface RedisNodesConfig {
  client: RedisClient
  /** The hash's key. */
  key: string
}

export class RedisNodes {
  readonly #client: RedisClient
  readonly #key: string

  constructor (config: RedisNodesConfig) {
    this.#client = config.client
    this.#key = config.key
  }

  async report (load: NodeLoad, ttlMs: number): Promise<void> {
    await this.#client.hset(this.#key, load.node, JSON.stringify({ ...load, until: load.until ?? load.at + ttlMs }))
  }

  async list (): Promise<NodeLoad[]> {
    const all = await this.#client.hgetall(this.#key)
    const now = Date.now()
    const live: NodeLoad[] = []
    const gone: string[] = []
    for (const [node, json] of Object.entries(all)) {
      try {
        const entry = JSON.parse(json) as NodeLoad & { until: number }
        if (entry.until > now) live.push({ node, running: entry.running, max: entry.max, at: entry.at, until: entry.until, ...(entry.tenants === undefined ? {} : { tenants: entry.tenants }), ...(entry.mac === undefined ? {} : { mac: entry.mac }) })
        else gone.push(node)
      } catch {
        gone.push(node)
      }
    }
    // Nodes that stopped reporting (they died): dropped lazily, by whoever lists.
    if (gone.length > 0) await this.#client.hdel(this.#key, ...gone)
    return live
  }

  async forget (node: string): Promise<void> {
    await this.#client.hdel(this.#key, node)
  }
}
