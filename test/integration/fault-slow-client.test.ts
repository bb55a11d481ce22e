/**
 * Slow and stalled clients (issue 13, findings 3 and 6). One byte budget
 * (WS_MAX_BUFFERED_BYTES) covers what a client's connection has not sent and
 * the live frames the session holds for it during its replay; past it the
 * client is ended, and the reason reaches it once it reads again: close code
 * 4008 on a WebSocket, a last `event: end` on an event stream. The heartbeat
 * is set far out so that nothing but the budget can end a client here.
 */
import assert from 'node:assert/strict'
import type { Socket } from 'node:net'
import { describe, it } from 'node:test'
import type { WebSocket as ServerSocket } from 'ws'
import { isResult } from '../support/frames.js'
import { type TestClient, type TestGateway, eventually } from '../support/gateway.js'
import { client, gateway, holderOf, LIMITS } from '../support/sessions.js'
import { SseReader } from '../support/sse-reader.js'
import { turnsUntil } from './resume-helpers.js'

const BUDGET = 256 * 1024
const ENV = { ...LIMITS, WS_MAX_BUFFERED_BYTES: String(BUDGET), KEEPALIVE_INTERVAL_MS: '600000' }

/**
 * What may wait ahead of a close frame in the gateway's socket: the socket
 * takes frames directly only below 64 KiB (ws-client.ts FLUSH_BYTES), and one
 * frame may take it past that. The old gateway left its whole backlog there
 * (megabytes here), so the close frame reached a client that read again only
 * if it did so before the socket was cut.
 */
const AHEAD_OF_CLOSE_MAX = 64 * 1024 + 30_100

function rawSocket (c: TestClient): Socket {
  return (c.ws as unknown as { _socket: Socket })._socket
}

/** The gateway's side of the WebSockets it is closing. */
function closing (gw: TestGateway): ServerSocket[] {
  return [...gw.app.websocketServer.clients].filter((ws) => ws.readyState === ws.CLOSING)
}

const seqsOf = (c: TestClient): number[] => c.seqFrames.map((f) => f.seq as number)
const range = (from: number, to: number): number[] => Array.from({ length: to - from + 1 }, (_, i) => from + i)

async function clientCount (gw: TestGateway, id: string): Promise<number> {
  return (await gw.request('GET', `/v1/sessions/${id}`)).body.clients as number
}

/**
 * Turns whose frames together stay under the budget even if the kernel took
 * none of them: 6 × 30 KB (about 185 KB framed), 40 × 4 KB (about 165 KB).
 */
const TURN_30K = 'burst 6 30000'
const TURN_4K = 'burst 40 4000'
describe('slow and stalled clients', () => {
  it('a live client that stalls is ended with 4008: its unsent frames are dropped, so the code is next when it reads again', async (t) => {
    const gw = await gateway(t, { env: ENV })
    const { id, holder } = await holderOf(gw, t, { query: 'after=0' })
    const slow = await client(gw, t, id, 'role=observer&after=0')
    rawSocket(slow).pause()

    // Until the loopback socket buffers (a few MB, more on some hosts) and the budget are full.
    await turnsUntil(gw, id, holder, [], TURN_30K, () => closing(gw).length === 1, 'the gateway to end the stalled client')
    const ahead = (closing(gw)[0] as unknown as { _socket: Socket })._socket.writableLength
    assert.ok(ahead <= AHEAD_OF_CLOSE_MAX, `${ahead} bytes wait ahead of the close frame`)
    rawSocket(slow).resume()

    assert.equal(await slow.waitClose(10_000), 4008)
    const got = seqsOf(slow)
    assert.deepEqual(got, range(1, got.length), 'a gap-free prefix, to resume after')
    assert.ok(got.length < holder.seqFrames.length)
    await eventually(async () => await clientCount(gw, id) === 1, 5000, 'the slow client to be detached')
  })

  it('a holder that stalls is ended with 4008 like any client: the turn goes on without it, and it resumes after its last seq', async (t) => {
    const gw = await gateway(t, { env: ENV })
    const { id, holder } = await holderOf(gw, t, { query: 'after=0' })
    // What a loaded machine did to the first test's holder before its bursts were split into turns.
    rawSocket(holder).pause()
    holder.sendUser('burst 1000 30000') // 30 MB: past any loopback buffers and the budget
    await eventually(() => closing(gw).length === 1, 30_000, 'the gateway to end the stalled holder')
    rawSocket(holder).resume()
    assert.equal(await holder.waitClose(10_000), 4008)
    const got = seqsOf(holder)
    assert.deepEqual(got, range(1, got.length), 'a gap-free prefix, to resume after')
    assert.ok(!holder.frames.some(isResult), 'ended before the end of the turn')

    // The session did not wait on its holder. (A replay that met the rest of the burst live would
    // hold it for the client, 30 KB frames, past the budget: see the next test.)
    await eventually(async () => (await gw.request('GET', `/v1/sessions/${id}`)).body.turn_running === false, 30_000, 'the turn to end')
    const again = await client(gw, t, id, `after=${got.length}`)
    await again.waitFor(isResult, 30_000)
    assert.equal(again.seqFrames[0]?.seq, got.length + 1)
  })

  it('a client that stalls during its replay is ended once live frames pass the budget; one that reads is not', async (t) => {
    const gw = await gateway(t, { env: ENV })
    const { id, holder } = await holderOf(gw, t)
    const historyEnd = await turnsUntil(gw, id, holder, [], TURN_4K, (turns) => turns === 38, 'history') // ~6 MB

    const stalled = await gw.connect(id, 'role=observer&after=0')
    t.after(() => stalled.terminate())
    rawSocket(stalled).pause()
    // Another client reads the same replay (6 MB, over twenty times the budget) to the end, meanwhile
    // the stalled one's replay is stuck with the socket buffers full.
    const reader = await client(gw, t, id, 'role=observer&after=0')
    await reader.until(() => reader.closeCode !== null || reader.seqFrames.some((f) => f.seq === historyEnd), 30_000, `seq ${historyEnd}`)
    assert.equal(reader.closeCode, null, 'a client reading its replay is not a slow consumer')
    assert.ok(seqsOf(stalled).length < historyEnd, 'the stalled replay is stuck')

    // Live frames, held for the stalled client while its replay waits: about 64 of them pass its
    // budget. Without a bound they would all be held until the heartbeat (10 min here).
    const end = await turnsUntil(gw, id, holder, [reader], TURN_4K, () => closing(gw).length === 1, 'the gateway to end the client stalled in its replay')

    rawSocket(stalled).resume()
    assert.equal(await stalled.waitClose(10_000), 4008)
    const got = seqsOf(stalled)
    assert.deepEqual(got, range(1, got.length))
    assert.ok(got.length <= historyEnd, 'ended during its replay')

    // The client that read its replay got the live frames too.
    await reader.until(() => reader.closeCode !== null || reader.seqFrames.some((f) => f.seq === end), 30_000, `seq ${end}`)
    assert.equal(reader.closeCode, null, 'a client reading its replay is not a slow consumer')
    assert.deepEqual(seqsOf(reader), range(1, end))
    await eventually(async () => await clientCount(gw, id) === 2, 5000, 'the stalled client to be detached')
  })

  it('an event stream that stalls is ended with a last `end` event (reason slow_consumer) that it reads when it resumes', async (t) => {
    const gw = await gateway(t, { env: ENV })
    const { id, holder } = await holderOf(gw, t)
    const sse = await SseReader.open(`${gw.url}/v1/sessions/${id}/events/stream`)
    t.after(() => sse.close())
    await sse.until(() => sse.events.find((e) => e.event === 'gateway' && JSON.parse(e.data).subtype === 'hello'))
    sse.pause()

    await turnsUntil(gw, id, holder, [], TURN_30K, async () => await clientCount(gw, id) === 1, 'the stalled stream to be ended')

    sse.resume()
    await sse.until(() => sse.ended, 10_000, 'the stream to end')
    const last = sse.events.at(-1)
    assert.equal(last?.event, 'end')
    assert.deepEqual(JSON.parse(last?.data ?? 'null'), {
      type: 'gateway',
      subtype: 'end',
      reason: 'slow_consumer',
      message: 'slow consumer: reconnect with Last-Event-ID'
    })
    const ids = sse.events.filter((e) => e.id !== null).map((e) => Number(e.id))
    assert.deepEqual(ids, range(1, ids.length), 'a gap-free prefix, to resume after')
  })
})
