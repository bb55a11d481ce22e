/**
 * The webhook outbox takeover on Redis goes in bounded chunks, each its own
 * script call, so a large backlog never holds Redis for long in one call
 * (10,000 entries of 10 KB in one call held it over a second). Proven by
 * counting, never by timing: the script calls Redis ran (INFO
 * commandstats of a private redis-server, so the counts are only this
 * test's) and the entries and bytes each call answered (seen by wrapping
 * the client's command).
 */
import assert from 'node:assert/strict'
import { after, afterEach, before, describe, it } from 'node:test'
import { Redis } from 'ioredis'
import { OUTBOX_CHUNK_BYTES, OUTBOX_CHUNK_ENTRIES, RedisOutbox } from '../../src/store/redis-outbox.js'
import { OUTBOX_KEEP_COMMAND, OUTBOX_KEEP_SCRIPT, OUTBOX_TAKE_OVER_COMMAND, OUTBOX_TAKE_OVER_SCRIPT } from '../../src/store/redis-scripts.js'
import type { OutboxEntry } from '../../src/store/store.js'
import { type RedisServer, redisCommand, startRedisServer } from '../support/redis-server.js'

const PREFIX = 'chunks:'
type TakeOver = (...args: unknown[]) => Promise<string[]>

/** What one takeover script call answered: entries and their bytes (ids and texts). */
interface Call { entries: number, bytes: number }

/** Script calls Redis ran (EVALSHA and EVAL; a NOSCRIPT refusal is not a run). */
async function scriptRuns (url: string): Promise<number> {
  const info = String(await redisCommand(url, ['INFO', 'commandstats']))
  let runs = 0
  for (const name of ['evalsha', 'eval']) {
    const match = new RegExp(`cmdstat_${name}:calls=(\\d+),.*?failed_calls=(\\d+)`).exec(info)
    if (match !== null) runs += Number(match[1]) - Number(match[2])
  }
  return runs
}

describe('RedisOutbox: a takeover in bounded chunks', () => {
  let server: RedisServer
  let client: Redis
  let outbox: RedisOutbox
  let calls: Call[] = []
  /** Makes the call with this number (from 1) reject once Redis ran it, as a command timeout would. */
  let failAt = 0

  const hashLength = async (node: string): Promise<unknown> => await redisCommand(server.url, ['HLEN', `${PREFIX}{webhooks}:out:${node}`])
  const listed = async (): Promise<string[]> => ((await redisCommand(server.url, ['SMEMBERS', `${PREFIX}{webhooks}:nodes`])) as string[]).sort()
  const keepMany = async (node: string, count: number, text: (id: string) => string): Promise<string[]> => {
    const ids = Array.from({ length: count }, (_, i) => `${node}-delivery-${i}`)
    for (let at = 0; at < count; at += 1000) await Promise.all(ids.slice(at, at + 1000).map((id) => outbox.keep(node, { id, text: text(id) })))
    return ids
  }
  /** Takes over with the script loaded and the counts reset, so every call counted is a chunk of this takeover. */
  const counted = async (from: string, to: string): Promise<{ taken: OutboxEntry[], runs: number }> => {
    await outbox.takeOver('warm-up', 'warm-up')
    await redisCommand(server.url, ['CONFIG', 'RESETSTAT'])
    calls = []
    const taken = await outbox.takeOver(from, to)
    return { taken, runs: await scriptRuns(server.url) }
  }

  before(async () => {
    server = await startRedisServer()
    client = new Redis(server.url, { lazyConnect: true })
    client.defineCommand(OUTBOX_KEEP_COMMAND, { numberOfKeys: 2, lua: OUTBOX_KEEP_SCRIPT })
    client.defineCommand(OUTBOX_TAKE_OVER_COMMAND, { numberOfKeys: 3, lua: OUTBOX_TAKE_OVER_SCRIPT })
    const commands = client as unknown as Record<string, TakeOver>
    const takeOver = (commands[OUTBOX_TAKE_OVER_COMMAND] as TakeOver).bind(client)
    commands[OUTBOX_TAKE_OVER_COMMAND] = async (...args) => {
      const reply = await takeOver(...args)
      let bytes = 0
      for (const s of reply.slice(1)) bytes += Buffer.byteLength(s)
      calls.push({ entries: (reply.length - 1) / 2, bytes })
      if (calls.length === failAt) throw new Error('Command timed out')
      return reply
    }
    await client.connect()
    outbox = new RedisOutbox({ client, prefix: PREFIX })
  })

  afterEach(async () => {
    failAt = 0
    await redisCommand(server.url, ['FLUSHALL'])
  })

  after(async () => {
    client?.disconnect()
    await server?.kill()
  })

  it(`moves 5,000 entries in script calls of at most ${OUTBOX_CHUNK_ENTRIES}, every entry returned once`, async () => {
    const ids = await keepMany('gone', 5000, (id) => `text of ${id}`)
    const { taken, runs } = await counted('gone', 'taker')
    assert.equal(runs, calls.length, 'one script run per call')
    assert.ok(runs >= Math.ceil(5000 / OUTBOX_CHUNK_ENTRIES), `${runs} script calls`)
    assert.ok(calls.every((c) => c.entries <= OUTBOX_CHUNK_ENTRIES), `entries per call: ${calls.map((c) => c.entries).join(', ')}`)
    assert.deepEqual(taken.map((e) => e.id).sort(), [...ids].sort())
    assert.ok(taken.every((e) => e.text === `text of ${e.id}`))
    assert.equal(await hashLength('gone'), 0)
    assert.equal(await hashLength('taker'), 5000)
    assert.deepEqual(await listed(), ['taker'])
  })

  it('stops taking entries in a call once it took OUTBOX_CHUNK_BYTES', async () => {
    const text = 'x'.repeat(10_000)
    const ids = await keepMany('gone', 1000, () => text)
    const { taken, runs } = await counted('gone', 'taker')
    const largest = 10_000 + Buffer.byteLength(ids[ids.length - 1] as string)
    assert.ok(runs >= Math.ceil(1000 * 10_000 / OUTBOX_CHUNK_BYTES), `${runs} script calls for ~10 MB`)
    assert.ok(calls.every((c) => c.bytes < OUTBOX_CHUNK_BYTES + largest), `bytes per call: ${calls.map((c) => c.bytes).join(', ')}`)
    assert.deepEqual(taken.map((e) => e.id).sort(), [...ids].sort())
    assert.deepEqual(await listed(), ['taker'])
  })

  it('moves an entry larger than the byte bound alone in its call', async () => {
    const big = 'y'.repeat(OUTBOX_CHUNK_BYTES + 1)
    await keepMany('gone', 2, () => big)
    const { taken, runs } = await counted('gone', 'taker')
    assert.equal(runs, 2)
    assert.deepEqual(calls.map((c) => c.entries), [1, 1])
    assert.equal(taken.length, 2)
    assert.ok(taken.every((e) => e.text === big))
  })

  it('reads a node taking itself over in chunks, every entry once, and keeps them', async () => {
    const ids = await keepMany('self', 5000, (id) => `text of ${id}`)
    const { taken, runs } = await counted('self', 'self')
    assert.equal(runs, calls.length)
    assert.ok(runs >= Math.ceil(5000 / OUTBOX_CHUNK_ENTRIES), `${runs} script calls`)
    assert.deepEqual(taken.map((e) => e.id).sort(), [...ids].sort())
    assert.equal(await hashLength('self'), 5000)
    assert.deepEqual(await listed(), ['self'])
  })

  it('rejects when a call fails, leaving what moved before under the taker and the rest with the node', async () => {
    const ids = await keepMany('gone', 5000, (id) => `text of ${id}`)
    calls = []
    failAt = 3
    await assert.rejects(outbox.takeOver('gone', 'taker'), /timed out/)
    // The failed call ran in Redis: its chunk moved too.
    const moved = calls.reduce((n, c) => n + c.entries, 0)
    assert.equal(await hashLength('taker'), moved)
    assert.equal(await hashLength('gone'), 5000 - moved)
    assert.deepEqual(await listed(), ['gone', 'taker'], 'the node taken over stays listed while it keeps entries')
    failAt = 0
    const own = await outbox.takeOver('taker', 'taker')
    const rest = await outbox.takeOver('gone', 'taker')
    assert.equal(own.length, moved)
    assert.deepEqual([...own, ...rest].map((e) => e.id).sort(), [...ids].sort())
    assert.deepEqual(await listed(), ['taker'])
  })
})
