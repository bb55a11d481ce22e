/**
 * The Redis store's session indexes: the per-tenant sorted set
 * `P tenant:<tenant>:sessions` (score = created_at in ms) that listing walks
 * newest first, and the set `P live` of sessions not in a final state that
 * listLive reads at start-up. Both live on slots of their own, so they are
 * written with separate commands after the session's own keys, and members
 * whose record is gone are removed lazily by whoever reads them. Keys are
 * named by the store (`keys`), which owns the layout (redis.ts).
 */
import { type ListOptions, type SessionPage, type SessionRecord, decodeCursor, encodeCursor, isFinal } from './store.js'
import type { RedisClient } from './redis.js'

/** Members scanned per round trip when listing; more than a page so skipped members rarely need a second trip. */
const LIST_CHUNK_MIN = 32

export interface RedisSessionIndexConfig {
  client: RedisClient
  keys: { tenantIndex: (tenant: string) => string, live: () => string }
  /** The store's record read (RedisStore.getSession): null when the record is gone. */
  getSession: (id: string) => Promise<SessionRecord | null>
}

export class RedisSessionIndex {
  readonly #client: RedisClient
  readonly #keys: RedisSessionIndexConfig['keys']
  readonly #getSession: RedisSessionIndexConfig['getSession']

  constructor (config: RedisSessionIndexConfig) {
    this.#client = config.client
    this.#keys = config.keys
    this.#getSession = config.getSession
  }

  /** Enters a record just saved in its tenant's index, and in the live set or out of it by its status. */
  async add (record: SessionRecord): Promise<void> {
    await Promise.all([
      this.#client.zadd(this.#keys.tenantIndex(record.tenant), scoreOf(record), record.id),
      isFinal(record.status) ? this.#client.srem(this.#keys.live(), record.id) : this.#client.sadd(this.#keys.live(), record.id)
    ])
  }

  async listSessions (tenant: string, options: ListOptions): Promise<SessionPage> {
    const index = this.#keys.tenantIndex(tenant)
    const after = options.cursor === undefined ? null : decodeCursor(options.cursor)
    const want = Math.max(0, options.limit) + 1 // one more than a page tells whether there is a next page
    const chunk = Math.max(LIST_CHUNK_MIN, want * 2)
    const found: SessionRecord[] = []
    const stale: string[] = []
    let offset = 0
    while (found.length < want) {
      // Members at or below the cursor's time, newest first; the cursor's own
      // tie group is filtered by id below.
      const flat = await this.#client.zrevrangebyscore(index, after === null ? '+inf' : after.ms, '-inf', 'WITHSCORES', 'LIMIT', offset, chunk)
      const members: string[] = []
      for (let i = 0; i + 1 < flat.length; i += 2) {
        const id = flat[i] as string
        const ms = Number(flat[i + 1])
        if (after === null || ms < after.ms || Buffer.compare(Buffer.from(id), Buffer.from(after.id)) < 0) members.push(id)
      }
      const records = await Promise.all(members.map((id) => this.#getSession(id)))
      for (let i = 0; i < members.length && found.length < want; i++) {
        const record = records[i]
        if (record == null || record.tenant !== tenant) stale.push(members[i] as string)
        // A record naming another session (copied under this key) is not this member's: it would list its session twice.
        else if (record.id === members[i]) found.push(record)
      }
      offset += chunk
      if (flat.length < chunk * 2) break
    }
    if (stale.length > 0) await this.#dropStale(index, tenant, stale)
    const page = found.slice(0, options.limit)
    const last = page[page.length - 1]
    return { sessions: page, next_cursor: found.length > page.length && last !== undefined ? encodeCursor(last) : null }
  }

  /** Removes index members whose record expired, restoring any that a concurrent putSession re-created meanwhile. */
  async #dropStale (index: string, tenant: string, ids: string[]): Promise<void> {
    await this.#client.zrem(index, ...ids)
    const again = await Promise.all(ids.map((id) => this.#getSession(id)))
    await Promise.all(again.map((record) => record != null && record.tenant === tenant
      ? this.#client.zadd(index, scoreOf(record), record.id)
      : null))
  }

  async listLive (): Promise<SessionRecord[]> {
    const ids = await this.#client.smembers(this.#keys.live())
    const records = await Promise.all(ids.map((id) => this.#getSession(id)))
    const live: SessionRecord[] = []
    const stale: string[] = []
    records.forEach((record, i) => {
      // A record naming another session (copied under this key) is not this member's, and is left as it is.
      if (record != null && record.id !== ids[i]) return
      if (record != null && !isFinal(record.status)) live.push(record)
      else stale.push(ids[i] as string)
    })
    if (stale.length > 0) {
      await this.#client.srem(this.#keys.live(), ...stale)
      // A session put live again while we looked must stay in the set.
      const again = await Promise.all(stale.map((id) => this.#getSession(id)))
      const back = again.filter((r): r is SessionRecord => r != null && !isFinal(r.status)).map((r) => r.id)
      if (back.length > 0) await this.#client.sadd(this.#keys.live(), ...back)
    }
    return live
  }
}

function scoreOf (record: SessionRecord): number {
  const ms = Date.parse(record.created_at)
  return Number.isFinite(ms) ? ms : 0
}
