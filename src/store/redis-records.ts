/**
 * The Redis store's session records: the meta key, written by the record
 * script together with the TTLs of the session's other keys (then the
 * indexes), and read back without failing on what the gateway did not
 * write. Keys are named by the store (`keys`), which owns the layout
 * (redis.ts).
 */
import { type Lease, type RetentionOptions, type SessionRecord, isFinal } from './store.js'
import { PUT_RECORD_COMMAND, type PutRecord, fenced, fenceOf } from './redis-scripts.js'
import type { RedisClient } from './redis.js'

export interface RedisRecordsConfig {
  /** A client with the record script defined (RedisStore defines it). */
  client: RedisClient
  retention: RetentionOptions
  keys: {
    meta: (id: string) => string
    events: (id: string) => string
    lease: (id: string) => string
    epoch: (id: string) => string
    conversation: (id: string) => string
    largest: (id: string) => string
  }
  /** Adds the record to the tenant index and the live set (RedisSessionIndex.add). */
  index: (record: SessionRecord) => Promise<void>
}

export class RedisRecords {
  readonly #o: RedisRecordsConfig

  constructor (config: RedisRecordsConfig) {
    this.#o = config
  }

  async put (record: SessionRecord, lease?: Lease): Promise<void> {
    const keys = this.#o.keys
    const json = JSON.stringify(record)
    const ttl = this.#o.retention.ttlSecondsAfterEnd
    const final = isFinal(record.status)
    // Record, events and epoch counter first, in one script on the session's slot; the
    // index entries after, so a listed member without meta always means expired.
    const client = this.#o.client as unknown as Record<typeof PUT_RECORD_COMMAND, PutRecord>
    try {
      await client[PUT_RECORD_COMMAND](keys.meta(record.id), keys.events(record.id), keys.lease(record.id), keys.epoch(record.id), keys.conversation(record.id), keys.largest(record.id),
        json, final && ttl > 0 ? ttl : 0, fenceOf(lease))
    } catch (err) {
      throw fenced(record.id, err)
    }
    await this.#o.index(record)
  }

  async get (id: string): Promise<SessionRecord | null> {
    let json: string | null
    try {
      json = await this.#o.client.get(this.#o.keys.meta(id))
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
