/**
 * Many sessions appending at once through one RedisStore (one connection):
 * every event lands in its own session's stream, in order, and the appends
 * reach Redis in far fewer reads than there are appends, because the ones
 * that wait for the append in flight leave together (src/store/append-gate.ts).
 * A private redis-server, so its `total_reads_processed` counts only this test.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { RedisStore } from '../../src/store/redis.js'
import { type RedisServer, redisCommand, startRedisServer } from '../support/redis-server.js'
import { DEFAULT_RETENTION, events, frameFor } from '../support/store-contract.js'

async function readsProcessed (url: string): Promise<number> {
  const info = String(await redisCommand(url, ['INFO', 'stats']))
  const match = /total_reads_processed:(\d+)/.exec(info)
  assert.ok(match !== null, 'INFO stats has total_reads_processed')
  return Number(match[1])
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
    // Each session keeps one append in flight, as its EventLog does; all sessions run at once.
    await Promise.all(Array.from({ length: sessions }, async (_v, k) => {
      for (let b = 0; b < batches; b++) {
        const from = b * perBatch + 1
        await store.append(`s${k}`, events(from, from + perBatch - 1, `s${k}`))
      }
    }))
    const reads = await readsProcessed(server.url) - before
    for (let k = 0; k < sessions; k++) {
      const stored = await store.read(`s${k}`, 0, 1000)
      assert.deepEqual(stored.map((e) => e.seq), Array.from({ length: batches * perBatch }, (_v, i) => i + 1), `session s${k} in order`)
      assert.ok(stored.every((e) => e.frame === frameFor(e.seq, `s${k}`)), `session s${k} holds its own frames`)
    }
    const appends = sessions * batches
    assert.ok(reads <= appends / 4, `${appends} appends reached Redis in ${reads} reads`)
  })
})
