/**
 * The Redis store's read path for session events: plain XRANGE pages, or the
 * budgeted READ_SCRIPT (redis-read-script.ts) when a read has a byte budget
 * that the frames it can reach are not known to fit. Entry ids are `<seq>-0`
 * (redis.ts describes the key layout). Keys are named by the store (`keys`),
 * which owns the layout.
 */
import type { RawEvent, StoredEvent } from './store.js'
import { READ_COMMAND, READ_COMMAND_RAW, type ReadWithinBytes } from './redis-scripts.js'
import type { RedisClient } from './redis.js'

export interface RedisReaderConfig {
  /** A client with the read commands defined (RedisStore defines them). */
  client: RedisClient
  keys: { events: (id: string) => string, largest: (id: string) => string }
  /**
   * The longest any frame of the session with seq <= `upTo` can be, as far
   * as this node knows for sure (RedisAppender.bound); Infinity when it does not.
   */
  bound: (sessionId: string, upTo: number) => number
}

export class RedisReader {
  readonly #client: RedisClient
  readonly #keys: RedisReaderConfig['keys']
  readonly #bound: RedisReaderConfig['bound']

  constructor (config: RedisReaderConfig) {
    this.#client = config.client
    this.#keys = config.keys
    this.#bound = config.bound
  }

  async read (sessionId: string, after: number, limit: number, maxBytes?: number): Promise<StoredEvent[]> {
    if (limit <= 0) return []
    const start = `${Math.max(0, Math.floor(after) + 1)}-0`
    if (maxBytes === undefined || maxBytes === Infinity) return (await this.#client.xrange(this.#keys.events(sessionId), start, '+', 'COUNT', limit)).map(toEvent)
    return await this.#readWithin<string>(READ_COMMAND, sessionId, start, limit, maxBytes)
  }

  async readRaw (sessionId: string, after: number, limit: number, maxBytes?: number, upTo?: number): Promise<RawEvent[]> {
    if (limit <= 0) return []
    const start = `${Math.max(0, Math.floor(after) + 1)}-0`
    const end = upTo === undefined ? '+' : `${Math.floor(upTo)}-0`
    // No budget, or every frame the read can reach is known to fit it (this
    // node wrote them, or read the mark over them as it appended): a plain
    // XRANGE, about 1 ms a page of 1,000 sooner than the budgeted script.
    if (maxBytes === undefined || maxBytes === Infinity || (upTo !== undefined && this.#bound(sessionId, upTo) * limit <= maxBytes)) {
      return (await this.#client.xrangeBuffer(this.#keys.events(sessionId), start, end, 'COUNT', limit)).map(toRawEvent)
    }
    const events = await this.#readWithin<Buffer>(READ_COMMAND_RAW, sessionId, start, limit, maxBytes)
    return upTo === undefined ? events : events.filter((e) => e.seq <= upTo)
  }

  /** READ_SCRIPT's flat answer as events, frames as the command gives them (strings, or bytes with its Buffer variant). */
  async #readWithin<F extends string | Buffer> (command: string, sessionId: string, start: string, limit: number, maxBytes: number): Promise<Array<{ seq: number, frame: F }>> {
    const key = this.#keys.events(sessionId)
    const client = this.#client as unknown as Record<string, ReadWithinBytes<F>>
    const [ids, ...frames] = await (client[command] as ReadWithinBytes<F>)(key, this.#keys.largest(sessionId), start, Math.floor(limit), maxBytes >= 0 ? Math.floor(maxBytes) : 0)
    if (ids === undefined || frames.length === 0) return []
    // Entry ids are ASCII digits, '-' and ','.
    const seqs = (typeof ids === 'string' ? ids : ids.toString('latin1')).split(',')
    if (seqs.length !== frames.length) throw new Error(`budgeted read of ${key} answered ${seqs.length} ids for ${frames.length} frames`)
    return frames.map((frame, i) => ({ seq: seqOf(seqs[i] as string), frame }))
  }

  async firstSeq (sessionId: string): Promise<number | null> {
    const entries = await this.#client.xrange(this.#keys.events(sessionId), '-', '+', 'COUNT', 1)
    const first = entries[0]
    return first === undefined ? null : seqOf(first[0])
  }

  async lastSeq (sessionId: string): Promise<number | null> {
    const entries = await this.#client.xrevrange(this.#keys.events(sessionId), '+', '-', 'COUNT', 1)
    const last = entries[0]
    return last === undefined ? null : seqOf(last[0])
  }
}

function seqOf (entryId: string): number {
  return Number(entryId.slice(0, entryId.indexOf('-')))
}

function toEvent ([id, fields]: [id: string, fields: string[]]): StoredEvent {
  const at = fields.indexOf('f')
  const frame = at >= 0 && at % 2 === 0 ? fields[at + 1] : undefined
  if (frame === undefined) throw new Error(`stream entry ${id} has no frame field`)
  return { seq: seqOf(id), frame }
}

function toRawEvent ([id, fields]: [id: Buffer, fields: Buffer[]]): RawEvent {
  let frame: Buffer | undefined
  for (let i = 0; i + 1 < fields.length; i += 2) {
    if ((fields[i] as Buffer).equals(FRAME_FIELD)) { frame = fields[i + 1]; break }
  }
  const text = id.toString('latin1')
  if (frame === undefined) throw new Error(`stream entry ${text} has no frame field`)
  return { seq: seqOf(text), frame }
}

const FRAME_FIELD = Buffer.from('f')
