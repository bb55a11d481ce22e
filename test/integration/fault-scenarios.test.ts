/**
 * Small versions of the fault suite (bench/faults.ts, `npm run bench -- --faults`):
 *
 * - a reconnect storm: a client drops and resumes with ?after=<last seq seen>
 *   200 times while the CLI streams, and still has every seq once, in order;
 * - Redis stopped and started again mid-burst (a private, persistent
 *   redis-server, so it comes back with what it had): afterwards history has
 *   every seq, and clients that resumed while it was down are complete.
 *
 * Lost = a seq in history (or before the end) that a reader never got,
 * duplicated = a seq it got twice, out of order = a seq not above the one
 * before it, across all of a reader's connections.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { isHello } from '../support/frames.js'
import { type TestClient, type TestGateway, eventually, gateway, suiteScope } from '../support/gateway.js'
import { REDIS_URL, deleteKeys, type RedisServer, startRedisServer } from '../support/redis-server.js'
import { assertSameAsHistory, readHistory, settled } from './resume-helpers.js'


/** One reader across connections: its seqs in arrival order. */
class Reader {
  readonly frames: any[] = []
  client: TestClient | null = null
  hellos: any[] = []

  constructor (readonly gw: TestGateway, readonly id: string) {}

  get last (): number { return this.frames.at(-1)?.seq ?? 0 }

  /** Connects with ?after=<last seq>; while the hello says `unavailable` (closed 1013), again once the store answers. */
  async resume (): Promise<any> {
    for (;;) {
      const client = await this.gw.connect(this.id, `after=${this.last}&role=observer`)
      const hello = await client.waitFor(isHello)
      this.hellos.push(hello)
      if (hello.resume !== 'unavailable') {
        this.client = client
        return hello
      }
      assert.equal(await client.waitClose(), 1013)
      await eventually(async () => (await this.gw.request('GET', '/readyz')).status === 200, 20_000, 'the store answering again')
    }
  }

  /** Ends the current connection (close or terminate) and keeps what it received. */
  async drop (how: 'close' | 'terminate'): Promise<void> {
    const client = this.client
    if (client === null) return
    if (how === 'close') client.ws.close()
    else client.terminate()
    await client.waitClose()
    this.frames.push(...client.seqFrames) // complete: nothing is delivered after close
    this.client = null
  }

  /** Waits for seq `end` on the current connection, then keeps its frames. */
  async finish (end: number): Promise<void> {
    const client = this.client as TestClient
    await client.until(() => client.seqFrames.some((f) => f.seq === end), 20_000, `seq ${end}`)
    this.frames.push(...client.seqFrames)
    this.client = null
  }

  /** Lost (below `end`), duplicated and out-of-order seqs. */
  counts (end: number): { lost: number, duplicated: number, outOfOrder: number } {
    const seqs = this.frames.map((f) => f.seq as number)
    const seen = new Set(seqs)
    let outOfOrder = 0
    for (let i = 1; i < seqs.length; i++) if ((seqs[i] as number) <= (seqs[i - 1] as number)) outOfOrder++
    let lost = 0
    for (let s = 1; s <= end; s++) if (!seen.has(s)) lost++
    return { lost, duplicated: seqs.length - seen.size, outOfOrder }
  }
}

describe('reconnect storm', () => {
  const scope = suiteScope()
  const prefix = `cgw-test:${randomUUID()}:`
  let gw: TestGateway

  before(async () => {
    gw = await gateway(scope, { env: { REDIS_URL, REDIS_PREFIX: prefix, MAX_CONNECTIONS_PER_TENANT: '1000' } })
  })
  after(async () => {
    await deleteKeys(REDIS_URL, prefix)
  })

  it('200 reconnects mid-stream: every seq once, in order', { timeout: 30_000 }, async () => {
    const { id } = await gw.createSession()
    const holder = await gw.connect(id, 'after=0')
    await holder.waitFor(isHello)
    const reader = new Reader(gw, id)
    await reader.resume()
    holder.sendUser('slow 4000 2') // ~4000 lines over 8 s or more
    const ended = (): boolean => holder.frames.some((f) => f.type === 'result')
    let midStream = 0
    for (let k = 0; k < 200; k++) {
      // At least one new frame between drops, so that each resume starts somewhere else.
      const client = reader.client as TestClient
      const at = client.seqFrames.at(-1)?.seq ?? reader.last
      await client.until(() => client.seqFrames.some((f) => f.seq > at) || ended(), 10_000, 'a new frame')
      if (!ended()) midStream++
      await reader.drop(k % 2 === 0 ? 'close' : 'terminate')
      const hello = await reader.resume()
      assert.equal(hello.resume, 'ok', `resume ${k + 1} after seq ${reader.last}`)
    }
    assert.equal(midStream, 200, 'every reconnect happened while the CLI was producing')
    const end = await settled(gw, id, holder, 30_000)
    await reader.finish(end)

    const history = await readHistory(gw, id)
    assert.equal(history.length, end)
    assert.deepEqual(reader.counts(end), { lost: 0, duplicated: 0, outOfOrder: 0 })
    assertSameAsHistory(reader.frames, history)
    assertSameAsHistory(holder.seqFrames, history)
  })
})

describe('Redis stopped and started again mid-burst', () => {
  const scope = suiteScope()
  let server: RedisServer
  let gw: TestGateway
  const dir = mkdtempSync(join(tmpdir(), 'cgw-fault-redis-'))

  before(async () => {
    // Append-only file: a stopped Redis comes back with its data, as a production one does.
    server = await startRedisServer({ args: ['--appendonly', 'yes', '--dir', dir] })
    gw = await gateway(scope, { env: { REDIS_URL: server.url, REDIS_PREFIX: 'faults:' } })
  })
  after(async () => {
    await server?.kill()
    rmSync(dir, { recursive: true, force: true })
  })

  it('history has every seq afterwards, and clients that resumed during the outage are complete', { timeout: 30_000 }, async () => {
    const { id } = await gw.createSession()
    const holder = await gw.connect(id, 'after=0')
    await holder.waitFor(isHello)
    const early = new Reader(gw, id) // drops before the outage, resumes during it: its replay needs the store
    const late = new Reader(gw, id) // drops during the outage, resumes during it
    await early.resume()
    await late.resume()
    holder.sendUser('slow 600 5')
    await (early.client as TestClient).until(() => early.client?.seqFrames.some((f) => f.seq >= 50), 10_000, 'seq 50')
    await early.drop('terminate')

    await holder.until(() => holder.seqFrames.some((f) => f.seq >= 150), 10_000, 'seq 150')
    await server.stop()
    const notice = await holder.waitFor((f) => f.type === 'gateway' && f.subtype === 'store' && f.state === 'degraded', 10_000)
    const noticeAt = holder.frames.indexOf(notice)
    await holder.until(() => holder.frames.slice(noticeAt).filter((f) => f.type === 'assistant').length >= 20, 10_000, 'frames during the outage')
    await late.drop('terminate')
    const resumed = Promise.all([early.resume(), late.resume()])
    assert.ok(holder.frames.every((f) => f.type !== 'result'), 'Redis went away mid-burst')
    await server.start()
    await resumed

    const end = await settled(gw, id, holder, 20_000)
    await early.finish(end)
    await late.finish(end)
    await eventually(async () => (await gw.request('GET', '/readyz')).status === 200, 20_000, 'readyz ok again')

    const history = await readHistory(gw, id)
    assert.deepEqual(history.map((f) => f.seq), Array.from({ length: end }, (_, i) => i + 1), 'every seq in history, once, in order')
    assertSameAsHistory(holder.seqFrames, history)
    for (const reader of [early, late]) {
      assert.deepEqual(reader.counts(end), { lost: 0, duplicated: 0, outOfOrder: 0 })
      assertSameAsHistory(reader.frames, history)
    }
  })
})
