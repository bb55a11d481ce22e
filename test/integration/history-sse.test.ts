/**
 * `GET /v1/sessions/:id/events/stream` (Server-Sent Events): history, then
 * live frames, each with `id: <seq>`; `Last-Event-ID` (or `?after=`) resumes
 * without repeating anything; `: keep-alive` comments as heartbeats; the
 * stream is detached when the client goes, and ended when it stops reading.
 */
import assert from 'node:assert/strict'
import { afterEach, before, describe, it } from 'node:test'
import { type TestGateway, TOKEN_A, eventually, gateway, suiteScope } from '../support/gateway.js'
import { LIMITS } from '../support/sessions.js'
import { SseReader } from '../support/sse-reader.js'
import { hello, readHistory, settled, turn, turnsUntil } from './resume-helpers.js'

describe('GET /v1/sessions/:id/events/stream', () => {
  const scope = suiteScope()
  let gw: TestGateway
  const readers: SseReader[] = []
  const open = async (sessionId: string, query = '', headers: Record<string, string> = {}): Promise<SseReader> => {
    const reader = await SseReader.open(`${gw.url}/v1/sessions/${sessionId}/events/stream${query === '' ? '' : `?${query}`}`, headers)
    readers.push(reader)
    return reader
  }

  before(async () => {
    gw = await gateway(scope)
  })
  afterEach(() => {
    for (const r of readers.splice(0)) r.close()
  })

  it('sends history, then live frames, in order, with id = seq', async () => {
    const { id } = await gw.createSession()
    const controller = await gw.connect(id)
    const historyEnd = await turn(gw, id, controller, 'burst 30')

    const sse = await open(id)
    assert.equal(sse.status, 200)
    assert.match(String(sse.headers['content-type']), /^text\/event-stream/)
    assert.equal(sse.headers['cache-control']?.includes('no-cache'), true)

    const helloFrame = await sse.until(() => sse.gatewayFrames.find((f) => f.subtype === 'hello'))
    assert.equal(helloFrame.role, 'observer')
    assert.equal(helloFrame.resume, 'ok')
    assert.equal(sse.events[0]?.event, 'gateway', 'hello comes first')
    assert.equal(sse.events[0]?.id, null, 'unrecorded frames carry no id')
    await sse.until(() => sse.frames.some((f) => f.seq === historyEnd), 10_000, 'history')

    // Now live: frames produced after the stream was opened.
    const end = await turn(gw, id, controller, 'slow 3 30')
    await sse.until(() => sse.frames.some((f) => f.seq === end), 10_000, `seq ${end}`)

    for (const e of sse.events.filter((x) => x.id !== null)) assert.equal(Number(e.id), JSON.parse(e.data).seq)
    const history = await readHistory(gw, id)
    assert.deepEqual(sse.frames, history, 'every recorded frame once, in order, as stored')
    assert.ok(sse.frames.filter((f) => f.seq > historyEnd).some((f) => f.type === 'assistant' && JSON.stringify(f).includes('slow #2')))
  })

  it('resumes after Last-Event-ID mid-burst: the two streams together are the history, each frame once', async () => {
    const { id } = await gw.createSession()
    const controller = await gw.connect(id)
    await hello(controller)
    const first = await open(id)
    await first.until(() => first.gatewayFrames.find((f) => f.subtype === 'hello'))
    controller.sendUser('burst 3000')
    await first.until(() => first.frames.some((f) => f.seq >= 300), 20_000)
    first.close()
    const before = [...first.frames] // nothing more is read once closed
    const lastId = String(before[before.length - 1].seq)

    const second = await open(id, '', { 'last-event-id': lastId })
    const helloFrame = await second.until(() => second.gatewayFrames.find((f) => f.subtype === 'hello'))
    assert.equal(helloFrame.resume, 'ok')
    const end = await settled(gw, id, controller, 30_000)
    await second.until(() => second.frames.some((f) => f.seq === end), 20_000)
    assert.ok(helloFrame.last_seq < end, 'resumed while the CLI was still producing')
    assert.equal(second.frames[0].seq, Number(lastId) + 1, 'starts right after Last-Event-ID')
    const history = await readHistory(gw, id)
    assert.deepEqual([...before, ...second.frames].map((f) => f.seq), history.map((f) => f.seq))
    assert.deepEqual([...before, ...second.frames], history, 'the two halves are the history, each frame once')

    // Live frames keep coming on the resumed stream.
    const next = await turn(gw, id, controller, 'echo after resume')
    await second.until(() => second.frames.some((f) => f.seq === next))
    assert.deepEqual([...before, ...second.frames], await readHistory(gw, id))
  })

  it('starts after ?after= or Last-Event-ID; the header wins over the query', async () => {
    const { id } = await gw.createSession()
    const controller = await gw.connect(id)
    const end = await turn(gw, id, controller, 'burst 40')
    const history = await readHistory(gw, id)

    const byQuery = await open(id, 'after=35')
    await byQuery.until(() => byQuery.frames.some((f) => f.seq === end))
    assert.deepEqual(byQuery.frames, history.filter((f) => f.seq > 35))

    // A reconnecting EventSource repeats its URL and adds Last-Event-ID.
    const both = await open(id, 'after=5', { 'last-event-id': String(end - 2) })
    await both.until(() => both.frames.some((f) => f.seq === end))
    assert.deepEqual(both.frames.map((f) => f.seq), [end - 1, end])

    // Up to date already: only hello, then live frames.
    const current = await open(id, '', { 'last-event-id': String(end) })
    await current.until(() => current.gatewayFrames.find((f) => f.subtype === 'hello'))
    const next = await turn(gw, id, controller, 'echo live only')
    await current.until(() => current.frames.some((f) => f.seq === next))
    assert.deepEqual(current.frames, (await readHistory(gw, id)).filter((f) => f.seq > end))
  })

  it('is an observer: a CLI control request comes as request_pending with its seq, live and in replay', async () => {
    const { id } = await gw.createSession()
    const controller = await gw.connect(id)
    await hello(controller)
    const live = await open(id)
    await live.until(() => live.gatewayFrames.find((f) => f.subtype === 'hello'))
    controller.sendUser('ask')
    const prompt = await controller.waitFor((f) => f.type === 'control_request' && f.request?.subtype === 'can_use_tool')
    const notice = await live.until(() => live.frames.find((f) => f.seq === prompt.seq))
    assert.equal(notice.subtype, 'request_pending')
    assert.equal(notice.request_id, prompt.request_id)
    assert.equal(live.frames.filter((f) => f.type === 'control_request').length, 0)

    const replayed = await open(id, `after=${prompt.seq - 1}`)
    assert.deepEqual(await replayed.until(() => replayed.frames.find((f) => f.seq === prompt.seq)), notice)
    // History keeps the request itself.
    const page = await gw.request('GET', `/v1/sessions/${id}/events?after=${prompt.seq - 1}&limit=1`)
    assert.deepEqual(page.body.events, [prompt])

    controller.send({ type: 'control_response', response: { subtype: 'success', request_id: prompt.request_id, response: { behavior: 'deny', message: 'not now' } } })
    await live.until(() => live.frames.find((f) => f.type === 'result'))
  })

  it('rejects a Last-Event-ID or query that is not a seq with 400', async () => {
    const { id } = await gw.createSession()
    for (const [query, headers] of [['', { 'last-event-id': 'abc' }], ['', { 'last-event-id': '-3' }], ['after=x', {}], ['limit=10', {}]] as const) {
      const res = await fetch(`${gw.url}/v1/sessions/${id}/events/stream${query === '' ? '' : `?${query}`}`, { headers: { authorization: `Bearer ${TOKEN_A}`, ...headers } })
      assert.equal(res.status, 400, `${query} ${JSON.stringify(headers)}`)
      assert.equal((await res.json() as any).code, 'bad_request')
    }
  })

  it('sends keep-alive comments every KEEPALIVE_INTERVAL_MS', async (t) => {
    // Its own gateway: a 100 ms WebSocket heartbeat would also drop busy WebSocket clients in the other tests.
    const quick = await gateway(t, { env: { KEEPALIVE_INTERVAL_MS: '100' } })
    const { id } = await quick.createSession()
    const sse = await SseReader.open(`${quick.url}/v1/sessions/${id}/events/stream`)
    readers.push(sse)
    await sse.until(() => sse.comments.filter((c) => c === 'keep-alive').length >= 3, 5000, 'three keep-alive comments')
    // Heartbeats are comments only: no event was made of them.
    assert.deepEqual(sse.events.map((e) => e.event === 'gateway' ? JSON.parse(e.data).subtype : e.id), ['hello', ...sse.frames.map((f) => String(f.seq))])

    // Shutdown ends open streams (a hijacked response would otherwise hold the server open).
    await quick.close()
    await sse.until(() => sse.ended, 5000, 'stream ended')
    const last = sse.events.at(-1)
    assert.equal(last?.event, 'end')
    assert.deepEqual(JSON.parse(last?.data ?? 'null'), { type: 'gateway', subtype: 'end', reason: 'shutting_down', message: 'gateway shutting down' })
  })

  it('detaches from the session when the client goes away', async () => {
    const { id } = await gw.createSession()
    const sse = await open(id)
    await sse.until(() => sse.gatewayFrames.find((f) => f.subtype === 'hello'))
    assert.equal((await gw.request('GET', `/v1/sessions/${id}`)).body.clients, 1)
    sse.close()
    await eventually(async () => (await gw.request('GET', `/v1/sessions/${id}`)).body.clients === 0, 5000, 'stream detached')
  })

  it('replays a history much larger than the backlog bound to a client that reads', async (t) => {
    const small = await gateway(t, { env: { ...LIMITS, WS_MAX_BUFFERED_BYTES: '65536' } })
    const { id } = await small.createSession()
    const controller = await small.connect(id)
    // ~4 MB of history, in turns below the 64 KiB budget so the controller reading it live is never a slow consumer.
    const end = await turnsUntil(small, id, controller, [], 'burst 25 2000', (n) => n === 80, 'history')
    const sse = await SseReader.open(`${small.url}/v1/sessions/${id}/events/stream`)
    readers.push(sse)
    await sse.until(() => sse.ended || sse.frames.at(-1)?.seq === end, 30_000, `seq ${end}`)
    assert.equal(sse.ended, false, 'not cut off as a slow consumer')
    assert.deepEqual(sse.frames.map((f) => f.seq), Array.from({ length: end }, (_, i) => i + 1))
  })

  it('ends a stream whose client stops reading during the replay (within two keep-alive intervals)', async (t) => {
    const quick = await gateway(t, { env: { ...LIMITS, KEEPALIVE_INTERVAL_MS: '200' } })
    const { id } = await quick.createSession()
    const controller = await quick.connect(id)
    // ~12 MB of history, more than the socket buffers hold, in turns of 400 KB the controller reads as they come.
    await turnsUntil(quick, id, controller, [], 'burst 100 4000', (n) => n === 30, 'history')
    controller.terminate()
    await eventually(async () => (await quick.request('GET', `/v1/sessions/${id}`)).body.clients === 0, 5000, 'controller gone')
    const sse = await SseReader.open(`${quick.url}/v1/sessions/${id}/events/stream`)
    readers.push(sse)
    sse.pause()
    await eventually(async () => (await quick.request('GET', `/v1/sessions/${id}`)).body.clients === 0, 10_000, 'stalled stream dropped')
  })

  it('ends a stream whose client stops reading once its backlog passes the bound', async (t) => {
    const small = await gateway(t, { env: { ...LIMITS, WS_MAX_BUFFERED_BYTES: '65536' } })
    const { id } = await small.createSession()
    const controller = await small.connect(id)
    await hello(controller)
    const sse = await SseReader.open(`${small.url}/v1/sessions/${id}/events/stream`)
    readers.push(sse)
    await sse.until(() => sse.gatewayFrames.find((f) => f.subtype === 'hello'))
    sse.pause()
    // Until the socket buffers are full and the gateway's own backlog passes 64 KiB, in turns below
    // the budget, each read whole by the controller: the session and its other client carry on.
    await turnsUntil(small, id, controller, [], 'burst 12 4000', async () => (await small.request('GET', `/v1/sessions/${id}`)).body.clients === 1, 'slow stream dropped')
    assert.equal(controller.closeCode, null)
  })
})
