/**
 * The Redis store's connection: the client it was given or made from the URL
 * (redis-client.ts), the last connection error, and the listeners told each
 * time the client is ready again after a lost connection (that Redis may be
 * another, empty one). Apart from redis.ts so the store itself only names
 * keys and hands calls to its parts.
 */
import { Cluster } from 'ioredis'
import { redisClient } from './redis-client.js'
import type { RedisClient } from './redis.js'
import { withTimeout } from '../util/with-timeout.js'

export interface RedisConnectionConfig {
  /** Used when no `client` is given. Default `redis://127.0.0.1:6379`. */
  url?: string | undefined
  /** `url` names the seed nodes of a Redis Cluster. */
  cluster?: boolean | undefined
  /** A ready-made client, which close() leaves open. */
  client?: RedisClient | undefined
  /** Bound on one command of a client made here, on ping and on quit. */
  timeoutMs: number
  /** Connection errors of a client made here. */
  onError?: ((error: Error) => void) | undefined
}

export class RedisConnection {
  readonly client: RedisClient
  readonly #ownsClient: boolean
  readonly #timeoutMs: number
  #lastError: Error | null = null
  readonly #reconnectListeners: Array<() => void> = []
  /** Set at the first `ready`: later ones follow a lost connection. */
  #everReady = false

  constructor (config: RedisConnectionConfig) {
    this.#timeoutMs = config.timeoutMs
    if (config.client !== undefined) {
      this.client = config.client
      this.#ownsClient = false
    } else {
      const url = config.url ?? 'redis://127.0.0.1:6379'
      this.client = redisClient(url, config.cluster === true, this.#timeoutMs)
      this.#ownsClient = true
      const failed = (error: Error): void => {
        this.#lastError = error
        config.onError?.(error)
      }
      // Without a listener ioredis prints every reconnect failure to stderr.
      this.client.on('error', failed)
      if (this.client instanceof Cluster) {
        const cluster = this.client
        // A Cluster reports a failing node apart from its own errors.
        cluster.on('node error', failed)
        // A Cluster's own offline queue has no command timeout: while no node
        // answers, queued commands would wait for ever. It holds the commands
        // of start-up until the cluster is first reached; after that a command
        // fails at once while the cluster (or the node of its slot) is down,
        // as the session layer expects of a store (see redis-client.ts).
        cluster.once('ready', () => { cluster.options.enableOfflineQueue = false })
      }
      this.client.on('ready', () => { this.#lastError = null })
    }
    // ioredis emits `ready` after every (re)connection; a Cluster once all its nodes answer.
    if (this.client.status === 'ready') this.#everReady = true
    this.client.on('ready', () => {
      if (!this.#everReady) {
        this.#everReady = true
        return
      }
      for (const listener of this.#reconnectListeners) {
        try {
          listener()
        } catch {
          // Listeners log their own failures; thrown inside ioredis' event, one would end the process.
        }
      }
    })
  }

  /** The last connection error seen since the client was last ready (clients made here only). */
  get lastError (): Error | null {
    return this.#lastError
  }

  /** A new connection of the same kind and options (a Cluster duplicates as a Cluster). */
  duplicate (): RedisClient {
    return this.client instanceof Cluster ? this.client.duplicate() : this.client.duplicate()
  }

  /** Runs `listener` each time the client is ready again after a lost connection. */
  onReconnect (listener: () => void): void {
    this.#reconnectListeners.push(listener)
  }

  async ping (): Promise<void> {
    await withTimeout(this.client.ping(), this.#timeoutMs, 'redis ping timed out')
  }

  /** Quits a client made here (dropping it if that does not answer in time); an injected one stays open. */
  async close (): Promise<void> {
    if (!this.#ownsClient) return
    try {
      await withTimeout(this.client.quit(), this.#timeoutMs, 'redis quit timed out')
    } catch {
      // Unreachable or slow: drop the connection without waiting.
    } finally {
      this.client.disconnect()
    }
  }
}
