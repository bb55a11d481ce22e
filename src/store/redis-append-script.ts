/**
 * The Redis store's append script (APPEND_SCRIPT): a wave of one or more
 * sessions' events written in one call (redis-append.ts, append-gate.ts).
 */
import { EXPIRY_LUA, HOLDS_LUA } from './redis-script-parts.js'

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
