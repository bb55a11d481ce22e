/**
 * The Redis store's copies of the CLIs' conversation files, kept so that
 * another node can --resume a session: written whole or appended to, fenced
 * by the session's lease, expiring with the session's record. Keys are named
 * by the store (`keys`), which owns the layout (redis.ts).
 */
import type { Lease, RetentionOptions } from './store.js'
import {
  APPEND_CONVERSATION_COMMAND, type AppendConversation, PUT_CONVERSATION_COMMAND, type PutConversation, fenced, fenceOf
} from './redis-scripts.js'
import type { RedisClient } from './redis.js'

export interface RedisConversationsConfig {
  /** A client with the conversation scripts defined (RedisStore defines them). */
  client: RedisClient
  retention: RetentionOptions
  keys: { conversation: (id: string) => string, lease: (id: string) => string, meta: (id: string) => string }
}

export class RedisConversations {
  readonly #o: RedisConversationsConfig

  constructor (config: RedisConversationsConfig) {
    this.#o = config
  }

  async save (sessionId: string, data: Buffer, lease?: Lease): Promise<void> {
    const keys = this.#o.keys
    const client = this.#o.client as unknown as Record<typeof PUT_CONVERSATION_COMMAND, PutConversation>
    try {
      await client[PUT_CONVERSATION_COMMAND](keys.conversation(sessionId), keys.lease(sessionId), keys.meta(sessionId), fenceOf(lease), data, Math.max(0, Math.floor(this.#o.retention.ttlSecondsAfterEnd)))
    } catch (err) {
      throw fenced(sessionId, err)
    }
  }

  async append (sessionId: string, at: number, data: Buffer, lease?: Lease, head?: Buffer): Promise<boolean> {
    const keys = this.#o.keys
    const client = this.#o.client as unknown as Record<typeof APPEND_CONVERSATION_COMMAND, AppendConversation>
    try {
      return await client[APPEND_CONVERSATION_COMMAND](keys.conversation(sessionId), keys.lease(sessionId), fenceOf(lease), at, data, head ?? '') === 1
    } catch (err) {
      throw fenced(sessionId, err)
    }
  }

  async load (sessionId: string): Promise<Buffer | null> {
    return await this.#o.client.getBuffer(this.#o.keys.conversation(sessionId))
  }
}
