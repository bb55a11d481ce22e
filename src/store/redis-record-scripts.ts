/**
 * The Redis store's session record and conversation copy scripts: each
 * fenced by the writer's lease, each keeping the TTL an ended session's keys
 * have.
 */
import { EXPIRY_LUA, HOLDS_LUA } from './redis-script-parts.js'

/**
 * Saves a session record: SET of KEYS[1] (meta) to ARGV[1]; with ARGV[2] > 0
 * (a final status) it and the stream KEYS[2], epoch counter KEYS[4],
 * conversation KEYS[5] and the stream's largest-frame mark KEYS[6] expire in
 * that many seconds, else all are made persistent. Fenced like APPEND_SCRIPT by ARGV[3] against the lease KEYS[3].
 */
export const PUT_RECORD_SCRIPT = `${HOLDS_LUA}
if ARGV[3] ~= '' and not holds(KEYS[3], ARGV[3]) then
  return redis.error_reply('FENCED lease epoch ' .. ARGV[3] .. ' is not current')
end
local ttl = tonumber(ARGV[2])
if ttl > 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ttl)
  redis.call('EXPIRE', KEYS[2], ttl)
  redis.call('EXPIRE', KEYS[4], ttl)
  redis.call('EXPIRE', KEYS[5], ttl)
  redis.call('EXPIRE', KEYS[6], ttl)
else
  redis.call('SET', KEYS[1], ARGV[1])
  redis.call('PERSIST', KEYS[2])
  redis.call('PERSIST', KEYS[4])
  redis.call('PERSIST', KEYS[5])
  redis.call('PERSIST', KEYS[6])
end
return 0`
export const PUT_RECORD_COMMAND = 'cgwPutRecord'
export type PutRecord = (meta: string, events: string, lease: string, epoch: string, conversation: string, largest: string, json: string, ttl: number, fence: string) => Promise<unknown>

/**
 * SET of KEYS[1] (a session's conversation file) to ARGV[2], keeping the TTL
 * the record KEYS[3] has (an ended session's copy expires with it), or
 * ARGV[3] seconds (the retention TTL, 0: none) when the record is gone (a
 * late save: it must not be kept for ever); fenced by ARGV[1] against the
 * lease KEYS[2].
 */
export const PUT_CONVERSATION_SCRIPT = `${HOLDS_LUA}
${EXPIRY_LUA}
if ARGV[1] ~= '' and not holds(KEYS[2], ARGV[1]) then
  return redis.error_reply('FENCED lease epoch ' .. ARGV[1] .. ' is not current')
end
redis.call('SET', KEYS[1], ARGV[2])
local left = expiry(KEYS[3], tonumber(ARGV[3]))
if left then redis.call('PEXPIRE', KEYS[1], left) end
return 0`
export const PUT_CONVERSATION_COMMAND = 'cgwPutConversation'
export type PutConversation = (conversation: string, lease: string, meta: string, fence: string, data: Buffer, ttl: number) => Promise<unknown>

/**
 * APPEND of ARGV[3] to KEYS[1] (a session's conversation file) if it is
 * ARGV[2] bytes long, else nothing (0), and SETRANGE of ARGV[4] (when not
 * empty) over its first bytes; fenced by ARGV[1] against the lease KEYS[2].
 * APPEND and SETRANGE keep the TTL the key has.
 */
export const APPEND_CONVERSATION_SCRIPT = `${HOLDS_LUA}
if ARGV[1] ~= '' and not holds(KEYS[2], ARGV[1]) then
  return redis.error_reply('FENCED lease epoch ' .. ARGV[1] .. ' is not current')
end
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('STRLEN', KEYS[1]) ~= tonumber(ARGV[2]) then return 0 end
redis.call('APPEND', KEYS[1], ARGV[3])
if ARGV[4] ~= '' then redis.call('SETRANGE', KEYS[1], 0, ARGV[4]) end
return 1`
export const APPEND_CONVERSATION_COMMAND = 'cgwAppendConversation'
export type AppendConversation = (conversation: string, lease: string, fence: string, at: number, data: Buffer, head: Buffer | string) => Promise<number>
