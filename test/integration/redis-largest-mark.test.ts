/**
 * The Redis store's largest-frame mark (`P{id}:largest`, kept by the append
 * script): it is never below any frame its stream holds, it expires and
 * persists with the stream, it is never made up for a stream that exists
 * without one, and with it a budgeted page of small frames is one XRANGE
 * inside Redis, where without it the read script measures its way in small
 * batches. Pages are the same either way. A private redis-server, so its
 * command counts are only this test's.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { RedisStore } from '../../src/store/redis.js'
import type { StoredEvent } from '../../src/store/store.js'
import { type RedisServer, redisCommand, startRedisServer } from '../support/redis-server.js'
import { DEFAULT_RETENTION, events, session } from '../support/store-contract.js'

const PREFIX = 'mark:'

/** A frame of exactly `bytes` UTF-8 bytes, padded with `pad` (1 or 2 bytes a character). */
function sized (seq: number, bytes: number, pad = 'x'): StoredEvent {
  const head = `{"seq":${seq},"type":"assistant","text":"`
  const room = bytes - Buffer.byteLength(head) - 2
  const unit = Buffer.byteLength(pad)
  const text = pad.repeat(Math.floor(room / unit)) + 'x'.repeat(room % unit)
  const frame = `${head}${text}"}`
  assert.equal(Buffer.byteLength(frame), bytes)
  return { seq, frame }
}

/** XRANGE calls Redis has run so far (the read script's own, inside EVALSHA, included). */
async function xrangeCalls (url: string): Promise<number> {
  const info = String(await redisCommand(url, ['INFO', 'commandstats']))
  const match = /cmdstat_xrange:calls=(\d+)/.exec(info)
  return match === null ? 0 : Number(match[1])
}

describe('RedisStore: the largest-frame mark', () => {
  let server: RedisServer
  let store: RedisStore
  const mark = async (id: string): Promise<unknown> => await redisCommand(server.url, ['GET', `${PREFIX}{${id}}:largest`])

  before(async () => {
    server = await startRedisServer()
    store = new RedisStore({ url: server.url, prefix: PREFIX, retention: { ...DEFAULT_RETENTION, ttlSecondsAfterEnd: 3600 } })
    await store.ping()
  })

  after(async () => {
    await store?.close()
    await server?.kill()
  })

  it('is the byte length of the longest frame ever appended, counting UTF-8 bytes', async () => {
    await store.append('m1', [sized(1, 300), sized(2, 700, 'é'), sized(3, 100)])
    assert.equal(await mark('m1'), '700')
    // Shorter frames leave it; a longer one raises it; a merged wave of several sessions keeps each its own.
    await Promise.all([
      store.append('m1', [sized(4, 200)]),
      store.append('m2', [sized(1, 50)]),
      store.append('m1', [sized(5, 900, '€')])
    ])
    assert.equal(await mark('m1'), '900')
    assert.equal(await mark('m2'), '50')
    // Another node (a store with nothing remembered) writing shorter frames never lowers it.
    const other = new RedisStore({ url: server.url, prefix: PREFIX, retention: DEFAULT_RETENTION })
    try {
      await other.append('m1', [sized(6, 120)])
      assert.equal(await mark('m1'), '900')
      await other.append('m1', [sized(7, 1000)])
      assert.equal(await mark('m1'), '1000')
    } finally {
      await other.close()
    }
    assert.deepEqual((await store.read('m1', 0, 10)).map((e) => e.seq), [1, 2, 3, 4, 5, 6, 7])
  })

  it('expires with the stream when the session ends and persists again when it runs', async () => {
    await store.putSession(session({ id: 'm3', status: 'running' }))
    await store.append('m3', events(1, 3, 'm3'))
    await store.putSession(session({ id: 'm3', status: 'stopped' }))
    for (const key of ['events', 'largest']) {
      const ttl = await redisCommand(server.url, ['TTL', `${PREFIX}{m3}:${key}`]) as number
      assert.ok(ttl > 3500 && ttl <= 3600, `${key} ttl ${ttl}`)
    }
    await store.putSession(session({ id: 'm3', status: 'running' }))
    for (const key of ['events', 'largest']) assert.equal(await redisCommand(server.url, ['TTL', `${PREFIX}{m3}:${key}`]), -1, key)
  })

  it('is not made up for a stream that exists without one, and budgets still hold there', async () => {
    // A stream written before the mark existed, holding a frame longer than anything appended after.
    const big = sized(1, 5000)
    await redisCommand(server.url, ['XADD', `${PREFIX}{old}:events`, '1-0', 'f', big.frame])
    const later = [sized(2, 100), sized(3, 100), sized(4, 100)]
    await store.append('old', later)
    assert.equal(await mark('old'), null)
    // A budget below the old frame: it comes alone (at least one event), then the rest.
    assert.deepEqual((await store.read('old', 0, 10, 4000)).map((e) => e.seq), [1])
    assert.deepEqual(await store.read('old', 1, 10, 4000), later)
    assert.deepEqual((await store.readRaw('old', 0, 10, 5150)).map((e) => e.seq), [1, 2], 'the old frame counts against the budget')
  })

  it('turns a budgeted page of small frames into one XRANGE; without it the page is measured in batches', async () => {
    const all = Array.from({ length: 1000 }, (_v, i) => sized(i + 1, 512))
    await store.append('page', all)
    await store.append('nomark', all)
    await redisCommand(server.url, ['DEL', `${PREFIX}{nomark}:largest`])
    for (const id of ['page', 'nomark']) {
      const before = await xrangeCalls(server.url)
      const page = await store.readRaw(id, 0, 1000, 4 * 1024 * 1024)
      const calls = await xrangeCalls(server.url) - before
      assert.deepEqual(page.map((e) => e.frame.toString()), all.map((e) => e.frame), id)
      if (id === 'page') assert.equal(calls, 1, 'one XRANGE with the mark')
      else assert.ok(calls > 5, `${calls} XRANGE calls without the mark`)
    }
    // A budget that holds fewer than the limit at the mark's size: batches sized by it, the page cut exactly.
    const before = await xrangeCalls(server.url)
    const cut = await store.read('page', 0, 1000, 512 * 300 + 511)
    assert.deepEqual(cut, all.slice(0, 300))
    assert.ok(await xrangeCalls(server.url) - before <= 2, 'the first batch fills the budget')
  })
})
