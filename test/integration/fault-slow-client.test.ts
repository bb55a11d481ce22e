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
import { settled, turn } from './resume-helpers.js'

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

describe('slow and stalled clients', () => {
  it('a live client that stalls is ended with 4008: its unsent frames are dropped, so the code is next when it reads again', async (t) => {
    const gw = await gateway(t, { env: ENV })
    const { id, holder } = await holderOf(gw, t, { query: 'after=0' })
    const slow = await client(gw, t, id, 'role=observer&after=0')
    rawSocket(slow).pause()

    // 12 MB: far more than the loopback socket buffers (a few MB) and the budget together.
    holder.sendUser('burst 400 30000')
    await holder.waitFor(isResult, 30_000)
    await eventually(() => closing(gw).length === 1, 10_000, 'the gateway to end the stalled client')
    const ahead = (closing(gw)[0] as unknown as { _socket: Socket })._socket.writableLength
    assert.ok(ahead <= AHEAD_OF_CLOSE_MAX, `${ahead} bytes wait ahead of the close frame`)
    rawSocket(slow).resume()

    assert.equal(await slow.waitClose(10_000), 4008)
    const got = seqsOf(slow)
    assert.deepEqual(got, range(1, got.length), 'a gap-free prefix, to resume after')
    assert.ok(got.length < holder.seqFrames.length)
    await eventually(async () => await clientCount(gw, id) === 1, 5000, 'the slow client to be detached')
  })

  it('a client that stalls during its replay is ended once live frames pass the budget; one that reads is not', async (t) => {
    const gw = await gateway(t, { env: ENV })
    const { id, holder } = await holderOf(gw, t)
    const historyEnd = await turn(gw, id, holder, 'burst 1500 4000', 30_000) // ~6 MB of history

    const stalled = await gw.connect(id, 'role=observer&after=0')
    t.after(() => stalled.terminate())
    rawSocket(stalled).pause()
    // Another client reads the same replay (6 MB, over twenty times the budget) to the end, meanwhile
    // the stalled one's replay is stuck with the socket buffers full.
    const reader = await client(gw, t, id, 'role=observer&after=0')
    await reader.until(() => reader.closeCode !== null || reader.seqFrames.some((f) => f.seq === historyEnd), 30_000, `seq ${historyEnd}`)
    assert.equal(reader.closeCode, null, 'a client reading its replay is not a slow consumer')
    assert.ok(seqsOf(stalled).length < historyEnd, 'the stalled replay is stuck')

    // About 3 MB of live frames, held for the stalled client while its replay waits: about 64 of
    // them pass its budget. Without a bound they would all be held until the heartbeat (10 min here).
    const from = holder.frames.length
    holder.sendUser('burst 750 4000')
    const end = await settled(gw, id, holder, 30_000, from)
    await eventually(() => closing(gw).length === 1, 10_000, 'the gateway to end the client stalled in its replay')

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

    const from = holder.frames.length
    holder.sendUser('burst 400 30000')
    await settled(gw, id, holder, 30_000, from)
    await eventually(async () => await clientCount(gw, id) === 1, 10_000, 'the stalled stream to be ended')

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
