/**
 * Session leases in Redis: a hash `P{<id>}:lease` (node, epoch) with a PX
 * TTL, and the counter `P{<id>}:epoch` that hands out fencing epochs. Both
 * carry the session's hash tag, so the scripts (redis-scripts.ts) run on one
 * Cluster slot beside the session's stream, whose append script checks the
 * same hash. Keys are named by the store (`keys`), which owns the layout.
 */
import type { Lease, LeaseHolder, RetentionOptions, SessionLeases } from './store.js'
import {
  LEASE_ACQUIRE_COMMAND, type LeaseAcquire, LEASE_RELEASE_COMMAND, type LeaseRelease, LEASE_RENEW_COMMAND, type LeaseRenew
} from './redis-scripts.js'
import type { RedisClient } from './redis.js'

export interface RedisLeasesConfig {
  /** A client with the lease commands defined (RedisStore defines them). */
  client: RedisClient
  /** Its ttlSecondsAfterEnd: a counter the scripts make for a session whose record is gone expires in that time. */
  retention: RetentionOptions
  keys: { lease: (id: string) => string, epoch: (id: string) => string, meta: (id: string) => string }
}

type Commands = Record<typeof LEASE_ACQUIRE_COMMAND, LeaseAcquire> & Record<typeof LEASE_RENEW_COMMAND, LeaseRenew> &
Record<typeof LEASE_RELEASE_COMMAND, LeaseRelease>

export class RedisLeases implements SessionLeases {
  readonly #client: RedisClient
  readonly #commands: Commands
  readonly #keys: RedisLeasesConfig['keys']
  readonly #retention: RetentionOptions

  constructor (config: RedisLeasesConfig) {
    this.#client = config.client
    this.#commands = config.client as unknown as Commands
    this.#keys = config.keys
    this.#retention = config.retention
  }

  /** The retention TTL the scripts give a counter they make for a session with no record (0: none). */
  #ttl (): number { return Math.max(0, Math.floor(this.#retention.ttlSecondsAfterEnd)) }

  async acquire (sessionId: string, node: string, ttlMs: number, options: { takeFrom?: string } = {}): Promise<Lease | null> {
    const epoch = await this.#commands[LEASE_ACQUIRE_COMMAND](
      this.#keys.lease(sessionId), this.#keys.epoch(sessionId), this.#keys.meta(sessionId), node, Math.ceil(ttlMs), options.takeFrom ?? '', this.#ttl())
    return epoch === null ? null : { sessionId, node, epoch: Number(epoch) }
  }

  async renew (lease: Lease, ttlMs: number): Promise<boolean> {
    const done = await this.#commands[LEASE_RENEW_COMMAND](
      this.#keys.lease(lease.sessionId), this.#keys.epoch(lease.sessionId), this.#keys.meta(lease.sessionId), lease.node, lease.epoch, Math.ceil(ttlMs), this.#ttl())
    return Number(done) === 1
  }

  async release (lease: Lease): Promise<void> {
    await this.#commands[LEASE_RELEASE_COMMAND](this.#keys.lease(lease.sessionId), lease.node, lease.epoch)
  }

  async holder (sessionId: string): Promise<LeaseHolder | null> {
    const key = this.#keys.lease(sessionId)
    // One round trip, one slot: the hash and its TTL.
    const results = await this.#client.multi().hgetall(key).pttl(key).exec()
    if (results === null) throw new Error('redis transaction was aborted')
    for (const [error] of results) if (error != null) throw error
    const hash = results[0]?.[1] as Record<string, string>
    const ttl = results[1]?.[1]
    if (hash.node === undefined || hash.epoch === undefined) return null
    return { node: hash.node, epoch: Number(hash.epoch), ttlMs: Math.max(0, Number(ttl)) }
  }
}
