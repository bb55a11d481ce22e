/**
 * The Redis store's budgeted read (READ_SCRIPT): a page of a session's
 * stream within a byte budget, in one round trip.
 */

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
