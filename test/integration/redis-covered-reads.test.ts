/**
 * History pages the node wrote itself are plain XRANGEs: the Redis store
 * reads a budgeted page up to a seq without its read script when every frame
 * up to that seq is known to fit the budget (this node appended them, or read
 * the stream's largest-frame mark as it appended). Frames another node wrote
 * past that, a stream without a mark, or a lease taken anew send the read
 * through the script, so the budget holds whoever wrote what. A private
 * redis-server, so its command counts are only this test's.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { RedisStore } from '../../src/store/redis.js'
import type { Lease, StoredEvent } from '../../src/store/store.js'
import { type RedisServer, redisCommand, startRedisServer } from '../support/redis-server.js'
import { DEFAULT_RETENTION } from '../support/store-contract.js'

const PREFIX = 'cover:'

/** A frame of exactly `bytes` bytes. */
function sized (seq: number, bytes: number): StoredEvent {
  const head = `{"seq":${seq},"type":"assistant","text":"`
  const frame = `${head}${'x'.repeat(bytes - head.length - 2)}"}`
  assert.equal(Buffer.byteLength(frame), bytes)
  return { seq, frame }
}

function run (from: number, to: number, bytes: number): StoredEvent[] {
  return Array.from({ length: to - from + 1 }, (_v, i) => sized(from + i, bytes))
}

describe('RedisStore: pages read without the script where the node knows the frames fit', () => {
  let server: RedisServer
  let a: RedisStore
  let b: RedisStore

  /** Calls Redis has run so far of each command. */
  async function calls (): Promise<{ scripts: number, xrange: number }> {
    const info = String(await redisCommand(server.url, ['INFO', 'commandstats']))
    const count = (name: string): number => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(info)?.[1] ?? 0)
    return { scripts: count('eval') + count('evalsha'), xrange: count('xrange') }
  }

  /** The seqs of a page, and whether it took the read script. */
  async function page (store: RedisStore, id: string, after: number, limit: number, maxBytes: number, upTo?: number): Promise<{ seqs: number[], script: boolean, frames: string[] }> {
    const before = await calls()
    const events = await store.readRaw(id, after, limit, maxBytes, upTo)
    const now = await calls()
    assert.ok(now.xrange > before.xrange, 'every page is read by XRANGE, in the script or not')
    return { seqs: events.map((e) => e.seq), script: now.scripts > before.scripts, frames: events.map((e) => e.frame.toString('utf8')) }
  }

  /** Both nodes' view of who holds a session's lease: its lease hash, as the lease code keeps it. */
  async function leaseTo (id: string, node: string, epoch: number): Promise<Lease> {
    await redisCommand(server.url, ['HSET', `${PREFIX}{${id}}:lease`, 'node', node, 'epoch', String(epoch)])
    return { sessionId: id, node, epoch }
  }

  before(async () => {
    server = await startRedisServer()
    a = new RedisStore({ url: server.url, prefix: PREFIX, retention: DEFAULT_RETENTION })
    b = new RedisStore({ url: server.url, prefix: PREFIX, retention: DEFAULT_RETENTION })
    await Promise.all([a.ping(), b.ping()])
  })

  after(async () => {
    await a?.close()
    await b?.close()
    await server?.kill()
  })

  it('reads a page of frames it appended as one plain XRANGE, the same frames as the script, none past the seq asked', async () => {
    const all = [...run(1, 400, 512), ...run(401, 600, 300), ...run(601, 1000, 700)]
    await a.append('own', all.slice(0, 500))
    await a.append('own', all.slice(500))
    const plain = await page(a, 'own', 0, 1000, 1024 * 1024, 1000)
    assert.equal(plain.script, false)
    assert.deepEqual(plain.frames, all.map((e) => e.frame))
    const scripted = await page(a, 'own', 0, 1000, 1024 * 1024)
    assert.equal(scripted.script, true, 'with no seq to stop at, the script')
    assert.deepEqual(scripted.frames, plain.frames)
    const upTo = await page(a, 'own', 250, 1000, 1024 * 1024, 700)
    assert.equal(upTo.script, false)
    assert.deepEqual(upTo.seqs, all.slice(250, 700).map((e) => e.seq))
    // Another node with nothing remembered of the session reads through the script.
    const other = await page(b, 'own', 0, 1000, 1024 * 1024, 1000)
    assert.equal(other.script, true)
    assert.deepEqual(other.frames, plain.frames)
  })

  it('takes the script when the longest frame times the count would not fit the budget, and the budget cuts the page', async () => {
    await a.append('wide', [...run(1, 4, 100), sized(5, 5000), ...run(6, 10, 100)])
    const cut = await page(a, 'wide', 0, 10, 2000, 10)
    assert.equal(cut.script, true)
    assert.deepEqual(cut.seqs, [1, 2, 3, 4])
    // A count the budget holds at the longest frame: plain.
    const fits = await page(a, 'wide', 0, 2, 10_000, 10)
    assert.equal(fits.script, false)
    assert.deepEqual(fits.seqs, [1, 2])
  })

  it('takes the script past what it wrote when another node appended longer frames, until an append of its own reads the mark', async () => {
    await a.append('shared', run(1, 10, 100))
    await b.append('shared', run(11, 20, 3000))
    assert.equal((await page(a, 'shared', 0, 10, 3500, 10)).script, false, 'its own frames')
    const past = await page(a, 'shared', 0, 20, 3500, 20)
    assert.equal(past.script, true)
    assert.deepEqual(past.seqs, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 'the budget holds over the other node\'s frames')
    // An append that does not follow on from what it covers, with frames no longer than it knew: it learns nothing.
    await a.append('shared', [sized(21, 100)])
    assert.equal((await page(a, 'shared', 15, 2, 10_000, 21)).script, true)
    // A longer frame makes the script read the mark: the other node's 3000 now bounds everything up to 22.
    await a.append('shared', [sized(22, 200)])
    const known = await page(a, 'shared', 12, 3, 9000, 22)
    assert.equal(known.script, false, '3 frames of at most 3000 bytes fit 9000')
    assert.deepEqual(known.seqs, [13, 14, 15])
    assert.equal((await page(a, 'shared', 12, 4, 9000, 22)).script, true, '4 of them might not')
  })

  it('takes the script for a stream that existed without a mark', async () => {
    await redisCommand(server.url, ['XADD', `${PREFIX}{old}:events`, '1-0', 'f', sized(1, 5000).frame])
    // Its seq 1 is skipped as held: the stream keeps the old, longer frame.
    await a.append('old', run(1, 4, 100))
    const cut = await page(a, 'old', 0, 10, 5150, 4)
    assert.equal(cut.script, true)
    assert.deepEqual(cut.seqs, [1, 2], 'the old frame counts against the budget')
  })

  it('forgets what it covered when it appends under another lease epoch: another node may have written since', async () => {
    await a.append('moved', run(1, 5, 100), await leaseTo('moved', 'a', 1))
    // Node b takes the session over and writes long frames after them.
    await b.append('moved', run(6, 10, 3000), await leaseTo('moved', 'b', 2))
    // Node a takes it back and appends frames it held since before (seqs b has written: skipped as held).
    await a.append('moved', run(6, 7, 100), await leaseTo('moved', 'a', 3))
    const back = await page(a, 'moved', 0, 7, 2000, 7)
    assert.equal(back.script, true)
    assert.deepEqual(back.seqs, [1, 2, 3, 4, 5], 'b\'s frames 6 and 7 stay within the budget')
    assert.ok(back.frames.every((f) => Buffer.byteLength(f) === 100))
  })
})
