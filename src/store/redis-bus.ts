/**
 * The Redis node bus: reliable messages between gateway nodes sharing one
 * Redis (or Redis Cluster), such as client frames routed to the node that
 * owns a session, and the replies.
 *
 * Each node's inbox is one stream, `P node:{<node>}:inbox` (the hash tag
 * keeps it one key, so one slot on a Cluster), one field `m` per entry.
 * `send` is XADD (MAXLEN ~) plus PEXPIRE in one MULTI: the inbox of a node
 * that is gone expires instead of staying for ever.
 *
 * The owner reads its inbox with one XREAD BLOCK loop on a connection of
 * its own, always from the id of the last entry it delivered (at start, the
 * stream's last id then). Never `$` after the first read: whatever is
 * appended between two reads, or while the connection is down, is still
 * after that id, so a reconnect resumes where it stopped, losing nothing
 * and repeating nothing. Messages older than the MAXLEN trim or the TTL are
 * gone, by design: a reader that far behind is a node that is gone.
 */
import { Cluster, type Redis } from 'ioredis'
import type { NodeBus } from './store.js'
import { whenReady } from './redis-ready.js'

type RedisClient = Redis | Cluster

export interface RedisBusConfig {
  /**
   * A connection for the blocking read alone (make it with
   * `client.duplicate()`); the bus owns it and `close()` disconnects it. Its
   * connection errors are swallowed here: `client` reports the same outages.
   */
  reader: RedisClient
  /** For XADD and the inbox lookups. Not closed by the bus. */
  client: RedisClient
  /** The store's key prefix. */
  prefix: string
  /** Entries kept per inbox (XADD MAXLEN ~, so approximately). Default 10000. */
  maxLen?: number | undefined
  /** An inbox expires this long after its last message. Default 3600000 (an hour). */
  ttlMs?: number | undefined
  /**
   * Failures the bus recovers from by itself (a read retried; reported once
   * per episode), and errors thrown by `onMessage`. For logs.
   */
  onError?: ((err: Error) => void) | undefined
}

const DEFAULT_MAX_LEN = 10_000
const DEFAULT_TTL_MS = 3_600_000
const BLOCK_MS = 2000
/** Time left to a reply of an idle BLOCK before the reader's command timeout would fire. */
const BLOCK_MARGIN_MS = 500
const COUNT = 500
/**
 * A read not answered this long after its BLOCK should have ended is given
 * up, and a reader that looks connected is made to reconnect: ioredis drops
 * a command lost with its connection when it does not resend it
 * (`autoResendUnfulfilledCommands: false`), and a dead connection may not
 * report itself. Reading again from the last id makes a false alarm cost a
 * reconnect, never a message.
 */
const ANSWER_GRACE_MS = 1500
const RETRY_FIRST_MS = 100
const RETRY_MAX_MS = 2000
/** How long a read waits for the reader to connect before trying anyway (and retrying). */
const READY_WAIT_MS = 5000
/** `close()` does not wait longer than this for the loop to notice the disconnect. */
const CLOSE_WAIT_MS = 1000

export class RedisBus implements NodeBus {
  readonly #reader: RedisClient
  readonly #client: RedisClient
  readonly #prefix: string
  readonly #maxLen: number
  readonly #ttlMs: number
  readonly #onError: ((err: Error) => void) | undefined
  readonly #blockMs: number
  #loop: Promise<void> | null = null
  #closed = false
  /** Ends the current pause (a backoff or a wait for `ready`) early, on close. */
  #wake: (() => void) | null = null

  constructor (config: RedisBusConfig) {
    if (/[{}]/.test(config.prefix)) throw new Error(`redis prefix must not contain { or }: ${config.prefix}`)
    this.#reader = config.reader
    this.#client = config.client
    this.#prefix = config.prefix
    this.#maxLen = Math.max(1, Math.floor(config.maxLen ?? DEFAULT_MAX_LEN))
    this.#ttlMs = Math.max(1, Math.floor(config.ttlMs ?? DEFAULT_TTL_MS))
    this.#onError = config.onError
    this.#blockMs = blockFor(commandTimeoutOf(this.#reader))
    // Without a listener ioredis prints every reconnect failure to stderr.
    this.#reader.on('error', () => {})
  }

  /**
   * Finds the inbox's last id (retried until the store answers), then
   * resolves and reads from there in the background. One inbox per bus.
   */
  async start (node: string, onMessage: (message: string) => void): Promise<void> {
    if (this.#closed) throw new Error('node bus is closed')
    if (this.#loop !== null) throw new Error('node bus is already reading an inbox')
    const key = this.#inbox(node)
    let began = (): void => {}
    const started = new Promise<void>((resolve) => { began = resolve })
    this.#loop = this.#run(key, onMessage, began)
    await Promise.race([started, this.#loop])
    if (this.#closed) throw new Error('node bus closed before its inbox was read')
  }

  async send (node: string, message: string): Promise<void> {
    if (this.#closed) throw new Error('node bus is closed')
    const key = this.#inbox(node)
    const replies = await this.#client.multi()
      .xadd(key, 'MAXLEN', '~', this.#maxLen, '*', 'm', message)
      .pexpire(key, this.#ttlMs)
      .exec()
    if (replies === null) throw new Error(`send to node ${node} was discarded`)
    for (const [err] of replies) if (err !== null) throw err
  }

  async close (): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    this.#wake?.()
    // A pending BLOCK fails at once with the connection; QUIT would wait for it.
    this.#reader.disconnect()
    if (this.#loop === null) return
    let timer: NodeJS.Timeout | undefined
    await Promise.race([
      this.#loop,
      new Promise((resolve) => { timer = setTimeout(resolve, CLOSE_WAIT_MS) })
    ])
    clearTimeout(timer)
  }

  #inbox (node: string): string { return `${this.#prefix}node:{${node}}:inbox` }

  /** The read loop: the start id, then XREAD from the last id delivered until closed, retrying with backoff. */
  async #run (key: string, onMessage: (message: string) => void, began: () => void): Promise<void> {
    let last: string | null = null
    let delay = RETRY_FIRST_MS
    let reported = false
    while (!this.#closed) {
      try {
        await this.#ready()
        if (this.#closed) return
        if (last === null) {
          last = await this.#answered(this.#lastId(key), BLOCK_MS + ANSWER_GRACE_MS)
          began()
          continue
        }
        const reply: unknown = await this.#answered(
          this.#reader.xread('COUNT', COUNT, 'BLOCK', this.#blockMs, 'STREAMS', key, last),
          this.#blockMs + ANSWER_GRACE_MS)
        delay = RETRY_FIRST_MS
        reported = false
        for (const [id, message] of entriesOf(reply)) {
          if (this.#closed) return
          last = id
          if (message === null) continue
          try {
            onMessage(message)
          } catch (err) {
            // A throwing listener must not stop the inbox; the message counts as delivered.
            this.#report(err)
          }
        }
      } catch (err) {
        if (this.#closed) return
        if (!reported) this.#report(err)
        reported = true
        await this.#pause(delay)
        delay = Math.min(delay * 2, RETRY_MAX_MS)
      }
    }
  }

  /**
   * `reply`, or a rejection when it does not come within `ms` (see
   * ANSWER_GRACE_MS): then a reader that says it is ready reconnects. A
   * reply given up on is ignored when it comes.
   */
  async #answered<T> (reply: Promise<T>, ms: number): Promise<T> {
    let timer: NodeJS.Timeout | undefined
    const late = new Promise<never>((resolve, reject) => {
      timer = setTimeout(() => {
        if (!this.#closed && this.#reader.status === 'ready') this.#reader.disconnect(true)
        reject(new Error(`redis did not answer the inbox read within ${ms} ms`))
      }, ms)
    })
    reply.catch(() => {})
    try {
      return await Promise.race([reply, late])
    } finally {
      clearTimeout(timer)
    }
  }

  /** The id of the inbox's newest entry, or 0-0 when it has none: where reading starts. */
  async #lastId (key: string): Promise<string> {
    const newest = await this.#reader.xrevrange(key, '+', '-', 'COUNT', 1)
    const id = newest[0]?.[0]
    return typeof id === 'string' ? id : '0-0'
  }

  /**
   * Waits (bounded) while the reader is connecting: a duplicate of the
   * store's Cluster has no offline queue, so a command sent before it is
   * ready fails. A lazy client (`wait`) connects on its first command.
   */
  async #ready (): Promise<void> {
    try {
      await whenReady(this.#reader, READY_WAIT_MS, (wake) => { this.#wake = wake })
    } finally {
      this.#wake = null
    }
  }

  /** Waits `ms`, or less if the bus closes meanwhile. */
  async #pause (ms: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined
    await new Promise<void>((resolve) => {
      this.#wake = resolve
      timer = setTimeout(resolve, ms)
    })
    clearTimeout(timer)
    this.#wake = null
  }

  #report (err: unknown): void {
    try {
      this.#onError?.(err instanceof Error ? err : new Error(String(err)))
    } catch {
      // The logger's own problem; the loop goes on.
    }
  }
}

/**
 * BLOCK time for a reader with this command timeout: an idle BLOCK must be
 * answered before the timeout fires, else every quiet period would count as
 * a failure (and its late reply be thrown away).
 */
function blockFor (commandTimeoutMs: number | undefined): number {
  if (commandTimeoutMs === undefined || commandTimeoutMs <= 0) return BLOCK_MS
  return Math.max(1, Math.min(BLOCK_MS, Math.max(Math.floor(commandTimeoutMs / 2), commandTimeoutMs - BLOCK_MARGIN_MS)))
}

/** The per-command timeout the reader's connections use (a Cluster's come from its redisOptions). */
function commandTimeoutOf (client: RedisClient): number | undefined {
  const timeout = client instanceof Cluster ? client.options.redisOptions?.commandTimeout : client.options.commandTimeout
  return typeof timeout === 'number' ? timeout : undefined
}

/**
 * The `[id, message]` pairs of an XREAD reply for one stream, in order; the
 * message is null for an entry without an `m` field (not ours: skipped, but
 * reading goes on after it). Accepts the RESP2 shape and a RESP3 map.
 */
function entriesOf (reply: unknown): Array<[string, string | null]> {
  if (reply === null || reply === undefined) return []
  let items: unknown
  if (reply instanceof Map) items = [...reply.values()][0]
  else if (Array.isArray(reply)) items = (reply[0] as unknown[] | undefined)?.[1]
  else if (typeof reply === 'object') items = Object.values(reply)[0]
  if (!Array.isArray(items)) return []
  const out: Array<[string, string | null]> = []
  for (const item of items as unknown[]) {
    if (!Array.isArray(item) || typeof item[0] !== 'string') continue
    const fields = Array.isArray(item[1]) ? item[1] as unknown[] : []
    let message: string | null = null
    for (let i = 0; i + 1 < fields.length; i += 2) {
      if (fields[i] === 'm' && typeof fields[i + 1] === 'string') message = fields[i + 1] as string
    }
    out.push([item[0], message])
  }
  return out
}
