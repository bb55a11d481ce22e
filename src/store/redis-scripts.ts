/**
 * The Lua scripts of the Redis store, each with the ioredis command name it
 * is defined under (EVALSHA by hash, EVAL on NOSCRIPT, by ioredis; no SCRIPT
 * command, which the store's ACL user may not run) and its call signature.
 * Every script touches the keys of one session only, so it runs on a Redis
 * Cluster (the session's hash tag puts them in one slot), except that
 * APPEND_SCRIPT takes several sessions at once, given only on a single Redis,
 * and the webhook outbox's scripts touch the outbox's keys instead, which
 * all share the `{webhooks}` hash tag so the takeover may touch two nodes'.
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
const HOLDS_LUA = `local function holds (lease, fence)
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
const EXPIRY_LUA = `local function expiry (record, ttl)
  if not ttl or ttl <= 0 then return nil end
  local left = redis.pcall('PTTL', record)
  if type(left) ~= 'number' then return nil end
  if left > 0 then return left end
  if left == -2 then return ttl * 1000 end
  return nil
end`

/**
 * Appends to the streams of one or more sessions in one call (a wave of the
 * node's append gate, append-gate.ts, or one session's chunk). KEYS hold 5
 * keys per session: the stream, the record, the lease hash, the followed
 * flag and the largest-frame mark. ARGV holds per session, in the same
 * order: MAXLEN, the TTL (ttlSecondsAfterEnd; 0: none), the lease's fence (fenceOf), the feed channel, the largest
 * frame the caller knows the mark covers, the byte length of the call's
 * longest frame, the number of events n, then n pairs of an entry id
 * (`<seq>-0`) and its frame. Each event is written as
 * `XADD stream MAXLEN ~ max <id> f <frame>`. An id that is not above the
 * stream's last id (the error Redis gives for a seq already held) is skipped.
 *
 * Each id and frame is its own argument, as Redis hands them to Lua: the
 * cheapest shape for Redis (docs/PERFORMANCE.md §20). Cutting one string of
 * back-to-back frames by a text layout cost Redis about 0.65 µs more per
 * event, a third of it matching the layout and the rest making each frame's
 * string in Lua; the client side frames its arguments itself
 * (redis-wave.ts), so their number costs it little.
 *
 * Answers one entry per session, when its events are written: the mark
 * after the call if the call read it, else the byte length of its longest
 * frame in this call (never above what the caller says the mark covers), or
 * that length negated when the stream exists without a mark (nothing bounds
 * its older entries). Else the error (a string) that stopped its writing
 * (other sessions of the call are unaffected). A mark the call read bounds
 * every entry up to the call's last id, then and later: ids only grow.
 *
 * - Fencing: with a fence, nothing of that session is written unless its
 *   lease hash holds that epoch and node (`FENCED`): a node whose lease lapsed or was
 *   taken can never write the log again, however late its call lands.
 * - Largest-frame mark: the byte length of the longest frame the stream has
 *   ever held, so READ_SCRIPT can size its reads without measuring every
 *   entry. Raised before the frames are written, and only read when this
 *   call's longest frame exceeds what the caller says it covers. It is only
 *   created together with the stream (never for a stream that exists without
 *   one, e.g. written before the mark existed, or whose mark expired first),
 *   so a mark that exists is never below any entry of its stream.
 * - One session's keys fail only its own append: the lease and the mark are
 *   read with pcall, so a lease that is no hash is FENCED and a mark that
 *   is no number (or no string) is that session's error. A Lua error would
 *   abort the whole call, with every other session of the wave: someone who
 *   can write Redis could stop every tenant's appends with one key.
 * - TTL: with a TTL above 0, a stream without one then gets the remaining
 *   TTL of the session's record, and so does its mark: a stream created after
 *   the session ended (a late retried batch) must expire with its record.
 *   When the record is gone (it expired before the batch landed), they get
 *   the whole TTL: without it they would be kept for ever. A record kept for
 *   ever (a live session) leaves them so; putting one again (a store that
 *   lost its keys) makes them persistent as it does (PUT_RECORD_SCRIPT).
 * - Followers: when the followed flag exists (a node follows the session, see
 *   redis-feed.ts), the session's entries are published on its channel as
 *   `<id>` and `<frame>` lines, joined by "\n" (frames are one-line JSON; the
 *   id says the seq, wherever the frame has its own). The flag keeps this to
 *   sessions somebody follows.
 *
 * Keys of several sessions in one call are only given on a single Redis (on
 * a Cluster they lie in different slots): the store merges only there.
 */
export const APPEND_SCRIPT = `${HOLDS_LUA}
${EXPIRY_LUA}
local results = {}
local a = 1
for s = 0, #KEYS / 5 - 1 do
  local stream, record, lease, followed, mark = KEYS[5 * s + 1], KEYS[5 * s + 2], KEYS[5 * s + 3], KEYS[5 * s + 4], KEYS[5 * s + 5]
  local max, ttl, epoch, channel, known, largest, n = ARGV[a], tonumber(ARGV[a + 1]), ARGV[a + 2], ARGV[a + 3], tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]), tonumber(ARGV[a + 6])
  local first = a + 7
  a = first + 2 * n
  local result = 0
  local created = false
  if epoch ~= '' and not holds(lease, epoch) then
    result = 'FENCED lease epoch ' .. epoch .. ' is not current'
  else
    local answer = largest
    if largest > known then
      local current = redis.pcall('GET', mark)
      if type(current) == 'table' then
        answer = current.err
      elseif current then
        current = tonumber(current)
        if current == nil then
          answer = 'ERR largest-frame mark ' .. mark .. ' is not a number'
        elseif largest > current then
          redis.call('SET', mark, largest, 'KEEPTTL')
        else
          answer = current
        end
      elseif redis.call('EXISTS', stream) == 0 then
        redis.call('SET', mark, largest)
        created = true
      else
        answer = -largest
      end
    end
    -- The mark's error stops this session here: no frame written, nothing published.
    if type(answer) == 'string' then result = answer end
    local published = nil
    if result == 0 and redis.call('EXISTS', followed) == 1 then published = {} end
    for i = first, result == 0 and a - 1 or first - 1, 2 do
      local r = redis.pcall('XADD', stream, 'MAXLEN', '~', max, ARGV[i], 'f', ARGV[i + 1])
      if type(r) == 'table' and r.err ~= nil and not string.find(r.err, 'equal or smaller than the target stream top item', 1, true) then
        result = r.err
        break
      end
      if published then
        published[i - first + 1] = ARGV[i]
        published[i - first + 2] = ARGV[i + 1]
      end
    end
    -- Also after an error: the events written before it (and a mark made for them) must expire too.
    if ttl > 0 and (created or redis.call('PTTL', stream) == -1) then
      local left = expiry(record, ttl)
      if left then
        redis.call('PEXPIRE', stream, left)
        redis.call('PEXPIRE', mark, left)
      end
    end
    if result == 0 then
      result = answer
      if published then
        redis.call('PUBLISH', channel, table.concat(published, '\\n'))
      end
    end
  end
  results[s + 1] = result
end
return results`
/** APPEND_SCRIPT as an ioredis command: EVALSHA, and EVAL on NOSCRIPT, by ioredis. */
export const APPEND_COMMAND = 'cgwAppend'
/** The number of keys (5 per session), the keys, then each session's arguments (7, then an id and a frame per event); one answer per session: the mark it read or its longest frame's bytes (negated: no mark), or an error. */
export type Append = (numKeys: number, ...args: Array<string | number | Buffer>) => Promise<AppendAnswer[]>
/** APPEND_SCRIPT's answer for one session: the mark or the longest frame's bytes (see APPEND_SCRIPT) when written, else the error that stopped it. */
export type AppendAnswer = number | string

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

/**
 * Takes the lease hash KEYS[1] for node ARGV[1] for ARGV[2] ms under the next
 * epoch of the counter KEYS[2], unless another node holds it (then nil). A
 * lease held by ARGV[1] itself or by ARGV[3] (a node known dead) is taken over.
 */
export const LEASE_ACQUIRE_SCRIPT = `local cur = redis.call('HGET', KEYS[1], 'node')
if cur and cur ~= ARGV[1] and cur ~= ARGV[3] then return false end
local epoch = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'node', ARGV[1], 'epoch', epoch)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return epoch`
export const LEASE_ACQUIRE_COMMAND = 'cgwLeaseAcquire'
export type LeaseAcquire = (lease: string, epoch: string, node: string, ttlMs: number, takeFrom: string) => Promise<number | null>

/**
 * Extends the lease KEYS[1] of node ARGV[1] under epoch ARGV[2] to ARGV[3]
 * ms; 1 when done. A lease that lapsed is re-created under the same epoch
 * when the counter KEYS[2] still says ARGV[2] (nobody acquired since) or is
 * gone (Redis lost its data, and with it every other node's claim); 0 else.
 */
export const LEASE_RENEW_SCRIPT = `local epoch = redis.call('HGET', KEYS[1], 'epoch')
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
if not last then redis.call('SET', KEYS[2], ARGV[2]) end
redis.call('HSET', KEYS[1], 'node', ARGV[1], 'epoch', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`
export const LEASE_RENEW_COMMAND = 'cgwLeaseRenew'
export type LeaseRenew = (lease: string, epoch: string, node: string, epochValue: number, ttlMs: number) => Promise<number>

/** Deletes the lease KEYS[1] if node ARGV[1] holds it under epoch ARGV[2] (HDEL of both fields: the store's ACL user has no DEL). */
export const LEASE_RELEASE_SCRIPT = `if redis.call('HGET', KEYS[1], 'epoch') == ARGV[2] and redis.call('HGET', KEYS[1], 'node') == ARGV[1] then
  redis.call('HDEL', KEYS[1], 'node', 'epoch')
end
return 0`
export const LEASE_RELEASE_COMMAND = 'cgwLeaseRelease'
export type LeaseRelease = (lease: string, node: string, epoch: number) => Promise<number>

/**
 * A read with a byte budget, in one round trip: up to ARGV[2] entries of the
 * stream KEYS[1] from the id ARGV[1] on (as XRANGE), stopping before the
 * entry whose frame field `f` would take the sum of frame lengths (bytes)
 * past ARGV[3], but at least one entry. The reply is flat, `[<ids joined by
 * ,>, <frame>, <frame>, …]`: returned in XRANGE's nested shape, a page of
 * 1000 small frames took about twice as long (Lua-to-reply conversion and
 * client parsing). Exclusive `(id` range starts need Redis 6.2.
 *
 * Entries are read inside Redis in batches, so huge frames are never all
 * copied into the script's memory at once. With the stream's largest-frame
 * mark KEYS[2] (APPEND_SCRIPT keeps it), a batch is as many entries as fit
 * the rest of the budget at that size: no batch can pass the budget, and a
 * page of small frames is one XRANGE whose frames need no measuring. Without
 * it (a stream written before the mark, or whose mark expired first),
 * batches start at 4 entries and grow while they fit the rest of the budget
 * at the largest frame seen so far, at most 64.
 *
 * The budget has a price: handing entries to Lua costs Redis about 2 ms per
 * 1000 frames of 512 B with the mark (2.5 ms without), where a plain XRANGE
 * costs 0.5 ms (but ioredis then takes about 3 ms to decode its nested
 * reply, against about 1 ms for this flat one).
 */
export const READ_SCRIPT = `local limit = tonumber(ARGV[2])
local budget = tonumber(ARGV[3])
local mark = tonumber(redis.call('GET', KEYS[2]) or '0')
local ids = {}
local out = {''}
local function frameOf (entry)
  local fields = entry[2]
  if fields[1] == 'f' then return fields[2] end
  for i = 3, #fields, 2 do
    if fields[i] == 'f' then return fields[i + 1] end
  end
  return nil
end
if mark > 0 and mark * limit <= budget then
  for _, entry in ipairs(redis.call('XRANGE', KEYS[1], ARGV[1], '+', 'COUNT', limit)) do
    local frame = frameOf(entry)
    if frame == nil then return redis.error_reply('stream entry ' .. entry[1] .. ' has no frame field') end
    ids[#ids + 1] = entry[1]
    out[#out + 1] = frame
  end
  out[1] = table.concat(ids, ',')
  return out
end
local total = 0
local largest = 1
local batch = 4
if mark > 0 then batch = math.max(1, math.floor(budget / mark)) end
local start = ARGV[1]
while #ids < limit do
  local want = math.min(limit - #ids, batch)
  local entries = redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', want)
  for _, entry in ipairs(entries) do
    local frame = frameOf(entry)
    if frame == nil then return redis.error_reply('stream entry ' .. entry[1] .. ' has no frame field') end
    local size = string.len(frame)
    if #ids > 0 and total + size > budget then
      out[1] = table.concat(ids, ',')
      return out
    end
    ids[#ids + 1] = entry[1]
    out[#out + 1] = frame
    total = total + size
    if size > largest then largest = size end
  end
  if #entries < want then break end
  start = '(' .. entries[#entries][1]
  if mark > 0 then
    batch = math.max(1, math.floor((budget - total) / mark))
  else
    batch = math.max(1, math.min(batch * 4, 64, math.floor((budget - total) / largest)))
  end
end
out[1] = table.concat(ids, ',')
return out`
/** READ_SCRIPT as an ioredis command (defineCommand): EVAL once per connection, EVALSHA after, NOSCRIPT retried by ioredis; no SCRIPT command (the ACL allows none). */
export const READ_COMMAND = 'cgwReadWithinBytes'
/** Its call: frames as strings, or as Buffers with the Buffer variant (READ_COMMAND_RAW). */
export type ReadWithinBytes<F extends string | Buffer = string> = (key: string, largest: string, start: string, limit: number, maxBytes: number) => Promise<F[]>
/** The same command's Buffer variant (ioredis defines `<name>Buffer`): the reply's strings as received, not decoded. */
export const READ_COMMAND_RAW = `${READ_COMMAND}Buffer`

/**
 * Keeps a webhook outbox entry: HSET of ARGV[1] (its id) to ARGV[2] (its
 * text) in the hash KEYS[1] of node ARGV[3], which joins the set KEYS[2] of
 * nodes with entries, in one step (a kept entry's node is always listed).
 * One script call costs Redis and the client less than MULTI, HSET, SADD
 * and EXEC (about a third of the time, measured over 20,000 keeps).
 */
export const OUTBOX_KEEP_SCRIPT = `redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SADD', KEYS[2], ARGV[3])
return 0`
export const OUTBOX_KEEP_COMMAND = 'cgwOutboxKeep'
export type OutboxKeep = (entries: string, nodes: string, id: string, text: string, node: string) => Promise<number>

/** Entries each HSCAN of OUTBOX_TAKE_OVER_SCRIPT asks for: a page read only in part costs Redis the rest for nothing. */
export const OUTBOX_SCAN_PAGE = 100

/**
 * One chunk of a webhook outbox takeover (redis-outbox.ts loops over it):
 * moves entries of the hash KEYS[1] (node ARGV[1]'s, id → text) into the
 * hash KEYS[2] (node ARGV[2]'s), and answers the cursor to call with next
 * (`''` once done), then what it took flat (`id, text, id, text, …`).
 * Each call stops taking at ARGV[4] entries or once ARGV[5] bytes (ids and
 * texts) were taken, with at least one entry: a whole backlog in one call
 * held Redis for over a second (10,000 entries of 10 KB), stalling every
 * session's appends on every node. Each chunk moves atomically, so two
 * nodes taking the same node over at once split the entries, none twice.
 *
 * Entries are found by HSCAN from the cursor ARGV[3], a page of
 * OUTBOX_SCAN_PAGE at a time (a hint: a page may hold a few more). A page
 * taken only in part is not stepped over: the cursor answered is the one
 * it was read from, and what was taken is gone from the hash when it is
 * read again. ARGV[2] joins the set KEYS[3] when anything moved; ARGV[1]
 * leaves it only in the call that leaves (or finds) its hash empty, which
 * answers `''`. A pass over the hash that ends with entries left (kept
 * meanwhile) answers cursor 0: the next call starts another.
 *
 * With ARGV[1] equal to ARGV[2] nothing moves: the entries are only read,
 * whole pages each time (rereading a page taken in part would never end),
 * and the answer is `''` when the scan is back at cursor 0. A scan may
 * answer an entry twice (the hash was resized meanwhile): the caller keeps
 * one per id. A node taking itself over with nothing kept leaves the set.
 *
 * HSET and HDEL go in pieces of 1,000 entries: Lua's `unpack` fails past
 * about 8,000 values (LUAI_MAXCSTACK). The source goes by HDEL of its
 * fields, its last one removing the key: the store's ACL user has no DEL.
 */
export const OUTBOX_TAKE_OVER_SCRIPT = `local moving = ARGV[1] ~= ARGV[2]
local max_entries, max_bytes = tonumber(ARGV[4]), tonumber(ARGV[5])
local cursor, count, bytes = ARGV[3], 0, 0
local answer = {''}
repeat
  local page = redis.call('HSCAN', KEYS[1], cursor, 'COUNT', ${OUTBOX_SCAN_PAGE})
  local found, whole = page[2], true
  for i = 1, #found, 2 do
    if moving and (count >= max_entries or bytes >= max_bytes) then whole = false break end
    answer[#answer + 1] = found[i]
    answer[#answer + 1] = found[i + 1]
    count = count + 1
    bytes = bytes + #found[i] + #found[i + 1]
  end
  if whole then cursor = page[1] end
until not whole or cursor == '0' or count >= max_entries or bytes >= max_bytes
if moving then
  local pairs_per_call = 1000
  for i = 2, #answer, 2 * pairs_per_call do
    redis.call('HSET', KEYS[2], unpack(answer, i, math.min(i + 2 * pairs_per_call - 1, #answer)))
  end
  local fields = {}
  for i = 2, #answer, 2 do fields[#fields + 1] = answer[i] end
  for i = 1, #fields, pairs_per_call do
    redis.call('HDEL', KEYS[1], unpack(fields, i, math.min(i + pairs_per_call - 1, #fields)))
  end
  if count > 0 then redis.call('SADD', KEYS[3], ARGV[2]) end
end
local empty = redis.call('EXISTS', KEYS[1]) == 0
if empty then redis.call('SREM', KEYS[3], ARGV[1]) end
if not empty and (moving or cursor ~= '0') then answer[1] = cursor end
return answer`
export const OUTBOX_TAKE_OVER_COMMAND = 'cgwOutboxTakeOver'
export type OutboxTakeOver = (fromHash: string, toHash: string, nodes: string, from: string, to: string, cursor: string, maxEntries: number, maxBytes: number) => Promise<string[]>

/** A script's FENCED refusal as the store's FencedError; any other error as it is. */
export function fenced (sessionId: string, err: unknown): unknown {
  return err instanceof Error && err.message.startsWith('FENCED') ? new FencedError(sessionId) : err
}
