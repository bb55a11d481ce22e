/**
 * The Redis store's webhook outbox scripts (redis-outbox.ts): keep an entry,
 * and take another node's entries over in bounded chunks.
 */

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
