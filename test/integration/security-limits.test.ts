/**
 * Limits that keep one caller from hurting others: body size, the REST rate
 * limit (per tenant), sessions per tenant, clients per session (refused
 * before the upgrade), WebSocket message size (1009) and frame rate
 * (`rate_limited` error frames, then 4029 for a sustained flood). Whoever
 * hits a limit is the only one affected: other clients keep their frames and
 * the session's history stays whole.
 */
import assert from 'node:assert/strict'
import { request as httpRequest } from 'node:http'
import { describe, it } from 'node:test'
import { errorCode } from '../support/frames.js'
import { TOKEN_A, TOKEN_B, type TestGateway, eventually } from '../support/gateway.js'
import { upgradeStatus } from '../support/http.js'
import { client, gateway } from '../support/sessions.js'

/** Every recorded event of a session, through the history API. */
async function history (gw: TestGateway, id: string): Promise<any[]> {
  const all: any[] = []
  let after = 0
  for (;;) {
    const page = await gw.request('GET', `/v1/sessions/${id}/events?after=${after}&limit=1000`)
    assert.equal(page.status, 200)
    all.push(...page.body.events)
    if (!page.body.has_more) return all
    after = page.body.next_after
  }
}

describe('REST limits', () => {
  it('answers a body over BODY_LIMIT_BYTES with 413 payload_too_large, declared or chunked', async (t) => {
    const gw = await gateway(t, { env: { BODY_LIMIT_BYTES: '1024' } })
    const big = { metadata: { note: 'x'.repeat(2000) } }
    const res = await gw.request('POST', '/v1/sessions', big)
    assert.equal(res.status, 413)
    assert.deepEqual(Object.keys(res.body).sort(), ['code', 'message', 'statusCode'])
    assert.equal(res.body.statusCode, 413)
    assert.equal(res.body.code, 'payload_too_large')

    // Chunked, so the size is only known while reading.
    const { port } = new URL(gw.url)
    const chunked = await new Promise<{ status: number, body: any }>((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port, method: 'POST', path: '/v1/sessions', headers: { authorization: `Bearer ${TOKEN_A}`, 'content-type': 'application/json', 'transfer-encoding': 'chunked' } }, (r) => {
        let text = ''
        r.setEncoding('utf8')
        r.on('data', (c: string) => { text += c })
        r.on('end', () => resolve({ status: r.statusCode ?? 0, body: JSON.parse(text) }))
      })
      req.on('error', reject)
      req.write('{"metadata":"')
      for (let i = 0; i < 20; i++) req.write('y'.repeat(200))
      req.end('"}')
    })
    assert.equal(chunked.status, 413)
    assert.equal(chunked.body.code, 'payload_too_large')
    assert.deepEqual((await gw.request('GET', '/v1/sessions')).body.sessions, [], 'nothing was created')
    // A body under the limit is fine.
    assert.equal((await gw.request('POST', '/v1/sessions', { metadata: { note: 'small' } })).status, 201)
  })

  it('answers 429 rate_limited past RATE_LIMIT_PER_MINUTE, per tenant, leaving health checks alone', async (t) => {
    const gw = await gateway(t, { env: { RATE_LIMIT_PER_MINUTE: '3' } })
    for (let i = 0; i < 3; i++) assert.equal((await gw.request('GET', '/v1/sessions')).status, 200)
    const limited = await gw.request('GET', '/v1/sessions')
    assert.equal(limited.status, 429)
    assert.deepEqual(Object.keys(limited.body).sort(), ['code', 'message', 'statusCode'])
    assert.equal(limited.body.statusCode, 429)
    assert.equal(limited.body.code, 'rate_limited')
    assert.equal((await gw.request('POST', '/v1/sessions', {})).status, 429, 'every route counts')
    assert.equal((await gw.request('GET', '/v1/sessions', undefined, TOKEN_B)).status, 200, 'another tenant has its own budget')
    for (let i = 0; i < 5; i++) assert.equal((await fetch(`${gw.url}/healthz`)).status, 200)
  })

  it('answers 429 after AUTH_FAILURES_PER_MINUTE failed authentications from one address, even with a good token then', async (t) => {
    const gw = await gateway(t, { env: { AUTH_FAILURES_PER_MINUTE: '3' } })
    for (let i = 0; i < 3; i++) assert.equal((await gw.request('GET', '/v1/sessions', undefined, `wrong-token-${i}-0123456789`)).status, 401)
    const blocked = await gw.request('GET', '/v1/sessions', undefined, `wrong-token-x-0123456789`)
    assert.equal(blocked.status, 429)
    assert.equal(blocked.body.code, 'rate_limited')
    assert.equal((await gw.request('GET', '/v1/sessions')).status, 429, 'guessing stops for the whole minute, a right guess included')
    assert.equal((await fetch(`${gw.url}/healthz`)).status, 200)
  })

  it('answers 429 tenant_session_limit past MAX_SESSIONS_PER_TENANT while another tenant can still create', async (t) => {
    const gw = await gateway(t, { env: { MAX_SESSIONS_PER_TENANT: '2' } })
    const first = await gw.createSession()
    await gw.createSession()
    const refused = await gw.request('POST', '/v1/sessions', {})
    assert.equal(refused.status, 429)
    assert.equal(refused.body.statusCode, 429)
    assert.equal(refused.body.code, 'tenant_session_limit')
    assert.equal((await gw.request('POST', '/v1/sessions', {}, TOKEN_B)).status, 201)
    assert.equal((await gw.request('GET', '/v1/sessions')).body.sessions.length, 2, 'the refused session was not stored')
    // A stopped session frees its place.
    await gw.request('DELETE', `/v1/sessions/${first.id}`)
    assert.equal((await gw.request('POST', '/v1/sessions', {})).status, 201)
  })
})

describe('WebSocket limits', () => {
  it('refuses a client past MAX_CLIENTS_PER_SESSION with 429 before the upgrade, and takes one again once a place is free', async (t) => {
    const gw = await gateway(t, { env: { MAX_CLIENTS_PER_SESSION: '2' } })
    const id = (await gw.createSession()).id
    const one = await client(gw, t, id)
    await client(gw, t, id, 'role=observer')
    const refused = await upgradeStatus(`${gw.wsUrl}/v1/sessions/${id}/ws`, TOKEN_A)
    assert.equal(refused.status, 429)
    assert.deepEqual(Object.keys(refused.body).sort(), ['code', 'message', 'statusCode'])
    assert.equal(refused.body.code, 'too_many_clients')
    assert.equal((await gw.request('GET', `/v1/sessions/${id}`)).body.clients, 2)
    // Another session is not affected.
    const other = (await gw.createSession()).id
    assert.equal((await upgradeStatus(`${gw.wsUrl}/v1/sessions/${other}/ws`, TOKEN_A)).status, 101)

    one.terminate()
    await eventually(async () => (await gw.request('GET', `/v1/sessions/${id}`)).body.clients === 1, 5000, 'the first client to be detached')
    assert.equal((await upgradeStatus(`${gw.wsUrl}/v1/sessions/${id}/ws`, TOKEN_A)).status, 101)
  })

  it('counts event streams (SSE) against MAX_CLIENTS_PER_SESSION too, so they can neither pile up nor lock WebSockets out unbounded', async (t) => {
    const gw = await gateway(t, { env: { MAX_CLIENTS_PER_SESSION: '2' } })
    const id = (await gw.createSession()).id
    const streams: AbortController[] = []
    t.after(() => { for (const s of streams) s.abort() })
    const open = async (): Promise<{ status: number, body: any }> => {
      const ac = new AbortController()
      streams.push(ac)
      const res = await fetch(`${gw.url}/v1/sessions/${id}/events/stream`, { headers: { authorization: `Bearer ${TOKEN_A}` }, signal: ac.signal })
      if (res.status === 200) return { status: 200, body: null }
      return { status: res.status, body: await res.json() }
    }
    assert.equal((await open()).status, 200)
    assert.equal((await open()).status, 200)
    const third = await open()
    assert.equal(third.status, 429)
    assert.equal(third.body.code, 'too_many_clients')
    assert.equal((await upgradeStatus(`${gw.wsUrl}/v1/sessions/${id}/ws`, TOKEN_A)).status, 429)
    assert.equal((await gw.request('GET', `/v1/sessions/${id}`)).body.clients, 2)
  })

  it('closes a client that sends a message over WS_MAX_PAYLOAD_BYTES with 1009; the other clients are unaffected', async (t) => {
    const gw = await gateway(t, { env: { WS_MAX_PAYLOAD_BYTES: '1024' } })
    const id = (await gw.createSession()).id
    const holder = await client(gw, t, id, 'after=0')
    const offender = await client(gw, t, id, 'role=observer')
    offender.send(JSON.stringify({ type: 'user', message: { role: 'user', content: 'z'.repeat(2000) } }))
    assert.equal(await offender.waitClose(), 1009)

    holder.sendUser('still fine?')
    const result = await holder.waitFor((f) => f.type === 'result')
    assert.equal(result.is_error, false)
    assert.equal(holder.closeCode, null)
    assert.ok(!holder.frames.some((f) => errorCode(f) !== undefined), 'the holder saw no error')
    assert.ok(!gw.stdinText(id).includes('zzzz'), 'nothing of the oversized message reached the CLI')
    // Just under the limit is accepted.
    const from = holder.frames.length
    holder.send(JSON.stringify({ type: 'user', message: { role: 'user', content: `echo ${'w'.repeat(900)}` } }))
    await holder.waitFor((f) => f.type === 'result', 10_000, from)
  })

  it('answers frames over WS_MAX_FRAMES_PER_SEC with rate_limited error frames and keeps a short burst open', async (t) => {
    const gw = await gateway(t, { env: { WS_MAX_FRAMES_PER_SEC: '5' } })
    const id = (await gw.createSession()).id
    const c = await client(gw, t, id, 'role=observer')
    const from = c.frames.length
    // Each accepted frame is answered invalid_frame, each dropped one rate_limited. 30 frames need 4 s to
    // pass without a drop (10 of burst, 5 per second), and 20 drops are far from a flood (more than 50).
    for (let i = 0; i < 30; i++) c.send('{}')
    await c.until(() => c.frames.slice(from).filter((f) => errorCode(f) !== undefined).length >= 30 || undefined)
    const codes = c.frames.slice(from).map(errorCode).filter((x) => x !== undefined)
    assert.ok(codes.filter((x) => x === 'rate_limited').length >= 1, JSON.stringify(codes))
    assert.ok(codes.filter((x) => x === 'invalid_frame').length >= 10, 'the burst allowance (twice the rate) passed')
    assert.deepEqual([...new Set(codes)].sort(), ['invalid_frame', 'rate_limited'])
    assert.equal(c.closeCode, null)
    // Once the bucket refills, frames are handled again.
    await eventually(async () => {
      const at = c.frames.length
      c.send('{}')
      const answer = await c.waitFor((f) => errorCode(f) !== undefined, 5000, at)
      return errorCode(answer) === 'invalid_frame'
    }, 5000, 'a frame to be accepted again')
  })

  it('closes a sustained flood with 4029; the holder of the same session loses nothing and history stays whole', async (t) => {
    const gw = await gateway(t, { env: { WS_MAX_FRAMES_PER_SEC: '5' } })
    const id = (await gw.createSession()).id
    const holder = await client(gw, t, id, 'after=0')
    const flooder = await client(gw, t, id, 'role=observer')

    holder.sendUser('burst 40 300')
    for (let i = 0; i < 400; i++) flooder.send({ type: 'keep_alive' })
    assert.equal(await flooder.waitClose(), 4029)
    assert.ok(flooder.frames.some((f) => errorCode(f) === 'rate_limited'), 'the flooder was told before being closed')

    const result = await holder.waitFor((f) => f.type === 'result')
    assert.equal(result.is_error, false)
    assert.equal(holder.closeCode, null)
    assert.ok(!holder.frames.some((f) => errorCode(f) !== undefined))
    const texts = holder.frames.filter((f) => f.type === 'assistant').map((f) => f.message.content[0].text as string)
    assert.equal(texts.filter((x) => x.startsWith('#')).length, 40, 'every block of the burst arrived')

    // What the holder got so far (it may get more, e.g. the idle state, while history is read).
    const got = holder.seqFrames
    const seqs = got.map((f) => f.seq as number)
    assert.deepEqual(seqs, Array.from({ length: seqs.length }, (_, i) => i + 1), 'contiguous seqs from 1')
    // The CLI may have printed more since (history can be ahead): compare what the holder got.
    const recorded = await history(gw, id)
    assert.ok(recorded.length >= seqs.length)
    assert.deepEqual(recorded.slice(0, seqs.length), got, 'history holds exactly what the holder received')
  })
})
