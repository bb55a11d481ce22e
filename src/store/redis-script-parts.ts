/**
 * What the Redis store's scripts share: the fence a write carries, the Lua
 * helpers spliced into several scripts (lease check, expiry of a key a late
 * write creates), and how a script's FENCED refusal reaches callers.
 */
import { FencedError, type Lease } from './store.js'

/**
 * The fence a write with a lease carries (the scripts' epoch argument):
 * `<epoch> <node>`. The epoch alone is not enough: a Redis restarted
 * without persistence, or a replica promoted before it got the last INCR of
 * a session's epoch counter, hands the same epoch out again, to another
 * node, while the old owner still holds it.
 */
export function fenceOf (lease: Lease | undefined): string {
  return lease === undefined ? '' : `${lease.epoch} ${lease.node}`
}

/**
 * Lua: true when the lease hash `lease` holds the fence (fenceOf): its
 * epoch and its node. With pcall, so a lease that is no hash is not held
 * (APPEND_SCRIPT must not abort the other sessions of its call).
 */
export const HOLDS_LUA = `local function holds (lease, fence)
  local at = string.find(fence, ' ', 1, true)
  if not at then return false end
  return redis.pcall('HGET', lease, 'epoch') == string.sub(fence, 1, at - 1) and redis.pcall('HGET', lease, 'node') == string.sub(fence, at + 1)
end`

/**
 * Lua: how long (ms) a key of a session created now must live, given the
 * session's record key and the retention TTL in seconds: the record's
 * remaining TTL, the whole TTL when the record is gone (it expired: the key
 * would otherwise outlive it for ever), nil when the record is kept for ever
 * or the TTL is 0. With pcall: a record key that is not there as expected
 * must not abort a whole wave (APPEND_SCRIPT).
 */
export const EXPIRY_LUA = `local function expiry (record, ttl)
  if not ttl or ttl <= 0 then return nil end
  local left = redis.pcall('PTTL', record)
  if type(left) ~= 'number' then return nil end
  if left > 0 then return left end
  if left == -2 then return ttl * 1000 end
  return nil
end`

/** A script's FENCED refusal as the store's FencedError; any other error as it is. */
export function fenced (sessionId: string, err: unknown): unknown {
  return err instanceof Error && err.message.startsWith('FENCED') ? new FencedError(sessionId) : err
}
