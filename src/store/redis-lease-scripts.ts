/**
 * The Redis store's lease scripts (redis-leases.ts): take, renew and release
 * a session's lease hash under the epochs its counter hands out.
 */
import { EXPIRY_LUA } from './redis-script-parts.js'

/**
 * Takes the lease hash KEYS[1] for node ARGV[1] for ARGV[2] ms under the next
 * epoch of the counter KEYS[2], unless another node holds it (then nil). A
 * lease held by ARGV[1] itself or by ARGV[3] (a node known dead) is taken over.
 * A counter this creates gets the TTL the record KEYS[3] has left, or ARGV[4]
 * seconds (the retention TTL, 0: none) when there is no record (a create
 * whose record save then fails): it must not be kept for ever. A record
 * saved later makes it persistent or gives it its TTL (PUT_RECORD_SCRIPT).
 */
export const LEASE_ACQUIRE_SCRIPT = `${EXPIRY_LUA}
local cur = redis.call('HGET', KEYS[1], 'node')
if cur and cur ~= ARGV[1] and cur ~= ARGV[3] then return false end
local created = redis.call('EXISTS', KEYS[2]) == 0
local epoch = redis.call('INCR', KEYS[2])
if created then
  local left = expiry(KEYS[3], tonumber(ARGV[4]))
  if left then redis.call('PEXPIRE', KEYS[2], left) end
end
redis.call('HSET', KEYS[1], 'node', ARGV[1], 'epoch', epoch)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return epoch`
export const LEASE_ACQUIRE_COMMAND = 'cgwLeaseAcquire'
export type LeaseAcquire = (lease: string, epoch: string, meta: string, node: string, ttlMs: number, takeFrom: string, ttl: number) => Promise<number | null>

/**
 * Extends the lease KEYS[1] of node ARGV[1] under epoch ARGV[2] to ARGV[3]
 * ms; 1 when done. A lease that lapsed is re-created under the same epoch
 * when the counter KEYS[2] still says ARGV[2] (nobody acquired since) or is
 * gone (Redis lost its data, and with it every other node's claim; or the
 * ended session's keys expired); 0 else. A counter made again gets the TTL
 * the record KEYS[3] has left, or ARGV[4] seconds (the retention TTL, 0:
 * none) when the record is gone: a renew after the session's keys expired
 * (its keeper late, a paused node) must not keep it for ever. A live
 * session's record, saved again after a data loss, makes it persistent.
 */
export const LEASE_RENEW_SCRIPT = `${EXPIRY_LUA}
local epoch = redis.call('HGET', KEYS[1], 'epoch')
if epoch then
  if epoch == ARGV[2] and redis.call('HGET', KEYS[1], 'node') == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
    return 1
  end
  return 0
end
local last = redis.call('GET', KEYS[2])
if last and last ~= ARGV[2] then return 0 end
-- Set only when gone: SET would drop the TTL an ended session's counter has, and it would outlive it.
if not last then
  redis.call('SET', KEYS[2], ARGV[2])
  local left = expiry(KEYS[3], tonumber(ARGV[4]))
  if left then redis.call('PEXPIRE', KEYS[2], left) end
end
redis.call('HSET', KEYS[1], 'node', ARGV[1], 'epoch', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`
export const LEASE_RENEW_COMMAND = 'cgwLeaseRenew'
export type LeaseRenew = (lease: string, epoch: string, meta: string, node: string, epochValue: number, ttlMs: number, ttl: number) => Promise<number>

/** Deletes the lease KEYS[1] if node ARGV[1] holds it under epoch ARGV[2] (HDEL of both fields: the store's ACL user has no DEL). */
export const LEASE_RELEASE_SCRIPT = `if redis.call('HGET', KEYS[1], 'epoch') == ARGV[2] and redis.call('HGET', KEYS[1], 'node') == ARGV[1] then
  redis.call('HDEL', KEYS[1], 'node', 'epoch')
end
return 0`
export const LEASE_RELEASE_COMMAND = 'cgwLeaseRelease'
export type LeaseRelease = (lease: string, node: string, epoch: number) => Promise<number>
