/**
 * Defines on the store's client the ioredis commands its parts call, each
 * under its name with its Lua script (redis-scripts.ts), also on an injected
 * client: the same name always carries the same script. Apart from redis.ts,
 * which only wires the parts together.
 */
import {
  LEASE_ACQUIRE_COMMAND, LEASE_ACQUIRE_SCRIPT, LEASE_RELEASE_COMMAND,
  LEASE_RELEASE_SCRIPT, LEASE_RENEW_COMMAND, LEASE_RENEW_SCRIPT, OUTBOX_KEEP_COMMAND, OUTBOX_KEEP_SCRIPT,
  OUTBOX_TAKE_OVER_COMMAND, OUTBOX_TAKE_OVER_SCRIPT, PUT_RECORD_COMMAND, PUT_RECORD_SCRIPT,
  PUT_CONVERSATION_COMMAND, PUT_CONVERSATION_SCRIPT, APPEND_CONVERSATION_COMMAND, APPEND_CONVERSATION_SCRIPT, READ_COMMAND, READ_SCRIPT
} from './redis-scripts.js'
import type { RedisClient } from './redis.js'

export function defineStoreCommands (client: RedisClient): void {
  client.defineCommand(READ_COMMAND, { numberOfKeys: 2, lua: READ_SCRIPT })
  client.defineCommand(PUT_RECORD_COMMAND, { numberOfKeys: 6, lua: PUT_RECORD_SCRIPT })
  client.defineCommand(PUT_CONVERSATION_COMMAND, { numberOfKeys: 3, lua: PUT_CONVERSATION_SCRIPT })
  client.defineCommand(APPEND_CONVERSATION_COMMAND, { numberOfKeys: 2, lua: APPEND_CONVERSATION_SCRIPT })
  client.defineCommand(LEASE_ACQUIRE_COMMAND, { numberOfKeys: 3, lua: LEASE_ACQUIRE_SCRIPT })
  client.defineCommand(LEASE_RENEW_COMMAND, { numberOfKeys: 3, lua: LEASE_RENEW_SCRIPT })
  client.defineCommand(LEASE_RELEASE_COMMAND, { numberOfKeys: 1, lua: LEASE_RELEASE_SCRIPT })
  client.defineCommand(OUTBOX_KEEP_COMMAND, { numberOfKeys: 2, lua: OUTBOX_KEEP_SCRIPT })
  client.defineCommand(OUTBOX_TAKE_OVER_COMMAND, { numberOfKeys: 3, lua: OUTBOX_TAKE_OVER_SCRIPT })
}
