/**
 * Many sessions appending at once through one RedisStore (one connection):
 * every event lands in its own session's stream, in order, and the appends
 * reach Redis in far fewer reads and script calls than there are appends,
 * because the ones that wait for the append in flight leave together, merged
 * into one script call (src/store/append-gate.ts); a session fenced in a
 * merged call is refused alone; a batch of several calls stops at the first
 * that fails, so written again it leaves no hole. A private redis-server, so its
 * `total_reads_processed` and command counts are only this test's.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { RedisStore } from '../../src/store/redis.js'
import { type RedisServer, redisCommand, startRedisServer } from '../support/redis-server.js'
import { DEFAULT_RETENTION, events, frameFor, sizedFrame } from '../support/store-contract.js'

async function readsProcessed (url: string): Promise<number> {
  const info = String(await redisCommand(url, ['INFO', 'stats']))
  const match = /total_reads_processed:(\d+)/.exec(info)
  assert.ok(match !== null, 'INFO stats has total_reads_processed')
  return Number(match[1])
}

/** Script calls (EVAL and EVALSHA) Redis has run so far. */
async function scriptCalls (url: string): Promise<number> {
  const info = String(await redisCommand(url, ['INFO', 'commandstats']))
  let calls = 0
  for (const match of info.matchAll(/cmdstat_(?:eval|evalsha):calls=(\d+)/g)) calls += Number(match[1])
  return calls
}

describe('RedisStore: appends of many sessions at once', () => {
  let server: RedisServer
  let store: RedisStore

  before(async () => {
    server = await startRedisServer()
    store = new RedisStore({ url: server.url, prefix: 'gate:', retention: DEFAULT_RETENTION })
    await store.ping()
  })

  after(async () => {
    await store?.close()
    await server?.kill()
  })

  it('stores every session\'s events in order, in fewer Redis reads than appends', async () => {
    const sessions = 40
    const batches = 25
    const perBatch = 3
    const before = await readsProcessed(server.url)
    const callsBefore = await scriptCalls(server.url)
    // Each session keeps one append in flight, as its EventLog does; all sessions run at once.
    await Promise.all(Array.from({ length: sessions }, async (_v, k) => {
      for (let b = 0; b < batches; b++) {
        const from = b * perBatch + 1
        await store.append(`s${k}`, events(from, from + perBatch - 1, `s${k}`))
      }
    }))
    const reads = await readsProcessed(server.url) - before
    const calls = await scriptCalls(server.url) - callsBefore
    for (let k = 0; k < sessions; k++) {
      const stored = await store.read(`s${k}`, 0, 1000)
      assert.deepEqual(stored.map((e) => e.seq), Array.from({ length: batches * perBatch }, (_v, i) => i + 1), `session s${k} in order`)
      assert.ok(stored.every((e) => e.frame === frameFor(e.seq, `s${k}`)), `session s${k} holds its own frames`)
    }
    const appends = sessions * batches
    assert.ok(reads <= appends / 4, `${appends} appends reached Redis in ${reads} reads`)
    assert.ok(calls <= appends / 4, `${appends} appends were ${calls} script calls`)
  })

  it('a merged call writes every session it carries, except one whose lease was taken', async () => {
    const ids = ['m0', 'm1', 'm2', 'm3']
    const leases = await Promise.all(ids.map(async (id) => await store.leases.acquire(id, 'node-a', 10_000)))
    const [l0, l1, l2, l3] = leases
    assert.ok(l0 !== null && l1 !== null && l2 !== null && l3 !== null)
    // m2 is taken by another node: node-a's lease for it is stale.
    assert.ok(await store.leases.acquire('m2', 'node-b', 10_000, { takeFrom: 'node-a' }) !== null)
    const callsBefore = await scriptCalls(server.url)
    // Made in one event-loop turn, the four appends leave as one call.
    const outcomes = await Promise.allSettled(ids.map(async (id, k) => { await store.append(id, events(1, 2, id), leases[k] ?? undefined) }))
    assert.equal(await scriptCalls(server.url) - callsBefore, 1, 'the four appends were one script call')
    assert.deepEqual(outcomes.map((o) => o.status), ['fulfilled', 'fulfilled', 'rejected', 'fulfilled'])
    const refused = outcomes[2] as PromiseRejectedResult
    assert.equal((refused.reason as Error).name, 'FencedError')
    for (const id of ['m0', 'm1', 'm3']) assert.deepEqual(await store.read(id, 0, 10), events(1, 2, id), `${id} written`)
    assert.deepEqual(await store.read('m2', 0, 10), [], 'nothing of the fenced session written')
  })

  it('a merged call to a Redis that lost its scripts (NOSCRIPT) is sent again and writes everything, in order', async () => {
    const ids = ['f0', 'f1', 'f2']
    await Promise.all(ids.map(async (id) => { await store.append(id, events(1, 2, id)) }))
    await Promise.all(ids.map(async (id) => { await store.append(id, events(3, 4, id)) }))
    // As after a restart without persistence, or SCRIPT FLUSH: the merged calls (EVALSHA) are refused.
    await redisCommand(server.url, ['SCRIPT', 'FLUSH'])
    const failed = async (): Promise<number> => {
      const info = String(await redisCommand(server.url, ['INFO', 'commandstats']))
      return Number(/cmdstat_evalsha:.*failed_calls=(\d+)/.exec(info)?.[1] ?? 0)
    }
    const evals = async (): Promise<number> => {
      const info = String(await redisCommand(server.url, ['INFO', 'commandstats']))
      return Number(/cmdstat_eval:calls=(\d+)/.exec(info)?.[1] ?? 0)
    }
    const [failedBefore, evalsBefore] = [await failed(), await evals()]
    await Promise.all(ids.map(async (id) => { await store.append(id, events(5, 7, id)) }))
    assert.ok(await failed() > failedBefore, 'the merged call was refused (NOSCRIPT)')
    assert.equal(await evals() - evalsBefore, 1, 'and sent again, loading the script, as one call')
    for (const id of ids) assert.deepEqual(await store.read(id, 0, 10), events(1, 7, id), `${id} whole and in order`)
    // Loaded again: the next merged call goes through at once, one call, refused by nobody.
    const [failedAfter, callsBefore] = [await failed(), await scriptCalls(server.url)]
    await Promise.all(ids.map(async (id) => { await store.append(id, events(8, 8, id)) }))
    assert.equal(await scriptCalls(server.url) - callsBefore, 1)
    assert.equal(await failed(), failedAfter)
    for (const id of ids) assert.deepEqual((await store.read(id, 7, 10)).map((e) => e.seq), [8])
  })

  it('a batch of several script calls refused NOSCRIPT is sent again call by call, in order, beside other sessions\' appends', async () => {
    await store.append('big', events(1, 1, 'big'))
    await redisCommand(server.url, ['SCRIPT', 'FLUSH'])
    // 1,600 events: four calls of one session (500 a call), written back to back, while two other sessions' appends share the wave.
    const batch = events(2, 1601, 'big')
    await Promise.all([
      store.append('big', batch),
      store.append('small0', events(1, 3, 'small0')),
      store.append('small1', events(1, 3, 'small1'))
    ])
    const stored = await store.read('big', 0, 2000)
    assert.equal(stored.length, 1601, 'every event stored, none skipped as held')
    assert.deepEqual(stored, events(1, 1601, 'big'))
    for (const id of ['small0', 'small1']) assert.deepEqual(await store.read(id, 0, 10), events(1, 3, id))
  })

  it('a batch of several script calls stops at the first that fails: nothing past it is written, and the batch written again leaves no hole', async () => {
    // The node then knows the stream's largest-frame mark covers 300 bytes.
    await store.append('holes', [{ seq: 1, frame: sizedFrame(1, 300) }])
    // A mark Redis cannot read as a string: a call that must read it (a frame over 300 bytes) fails inside the script.
    const mark = 'gate:{holes}:largest'
    await redisCommand(server.url, ['DEL', mark])
    await redisCommand(server.url, ['RPUSH', mark, 'not a number'])
    // Two calls of 500 events: only the first brings a frame over 300 bytes, so only it reads the mark.
    const batch = [{ seq: 2, frame: sizedFrame(2, 400) }, ...events(3, 1001, 'holes')]
    await assert.rejects(store.append('holes', batch), /WRONGTYPE/)
    assert.deepEqual((await store.read('holes', 0, 2000)).map((e) => e.seq), [1], 'the second call was not written past the failed first')
    // Repaired, the batch is written again (as the event log does after a failed append): every event, in order.
    await redisCommand(server.url, ['DEL', mark])
    await store.append('holes', batch)
    assert.deepEqual(await store.read('holes', 0, 2000), [{ seq: 1, frame: sizedFrame(1, 300) }, ...batch])
  })
})
