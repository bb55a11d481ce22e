/**
 * Operator webhooks on a real gateway (fake CLI, real WebSocket) with a real
 * HTTP receiver: a prompt answered, its turn's result and the session's
 * DELETE arrive as permission.requested → permission.resolved →
 * turn.finished → session.ended, signed as docs/WEBHOOKS.md says, with the
 * seqs the client saw. A receiver that takes the connection and never
 * answers costs the relay nothing: the whole turn reaches the client while
 * the first delivery still hangs and the later ones wait behind it. A
 * receiver that is down at first gets everything, in order, once it is up.
 * At shutdown the stopped sessions' session.ended still go out, and a
 * hanging receiver holds the close for the deadline only. Two nodes on one
 * Redis report each event once, from the node running the CLI.
 */
import assert from 'node:assert/strict'
import { createHmac } from 'node:crypto'
import { describe, it } from 'node:test'
import type { TestContext } from 'node:test'
import { type Frame, isHello, isPrompt, isResult, isStatus, resolved } from '../support/frames.js'
import { TOKEN_A, type TestClient, type TestGateway, eventually, gateway } from '../support/gateway.js'
import { type GatewayNode, startNodes } from '../support/gateway-nodes.js'
import { REDIS_URL } from '../support/redis-server.js'
import { LIMITS, answer, ask, client } from '../support/sessions.js'
import { type Received, Receiver } from '../support/webhook-receiver.js'
import { verifyWebhook } from '../../src/webhooks/signature.js'

const SECRET = 'whsec-integration-0123456789abcdef012345'

function webhookEnv (port: number, extra: Record<string, string> = {}): Record<string, string> {
  return { ...LIMITS, WEBHOOK_URL: `http://127.0.0.1:${port}/hooks/gateway`, WEBHOOK_SECRET: SECRET, WEBHOOK_RETRY_BASE_MS: '20', WEBHOOK_RETRY_MAX_MS: '200', ...extra }
}

/** The documented check, spelled out: HMAC-SHA256 of `<Webhook-Timestamp>.<raw body>`, hex, as `v1=<hex>`. */
function assertSigned (r: Received): void {
  const timestamp = r.headers['webhook-timestamp'] as string
  assert.equal(r.headers['webhook-signature'], `v1=${createHmac('sha256', SECRET).update(`${timestamp}.${r.body}`).digest('hex')}`)
  assert.equal(verifyWebhook({ secret: SECRET, timestamp, signature: r.headers['webhook-signature'] as string, body: r.body }), null)
  assert.equal(r.headers['webhook-id'], r.json.id)
}

/** A session with its holder; the test DELETEs it itself. */
async function session (gw: TestGateway, t: TestContext): Promise<{ id: string, holder: TestClient, holderId: string }> {
  const created = await gw.createSession()
  const holder = await client(gw, t, created.id)
  const hello = holder.frames.find((f) => f.subtype === 'hello')
  return { id: created.id, holder, holderId: hello.client_id }
}

/** Asks for a tool, allows it, and waits for the turn's result: the prompt, its resolution and the result frames. */
async function allowedTurn (holder: TestClient): Promise<{ prompt: Frame, resolution: Frame, result: Frame }> {
  const prompt = await ask(holder, 'ask Bash echo webhook-test')
  answer(holder, prompt.request_id, { behavior: 'allow' })
  const resolution = await holder.waitFor(resolved(prompt.request_id))
  const result = await holder.waitFor(isResult)
  return { prompt, resolution, result }
}

describe('webhooks', () => {
  it('a prompt, its answer, the turn\'s result and a DELETE arrive as four signed events, in order, with the client\'s seqs', async (t) => {
    const receiver = await Receiver.start(t)
    const gw = await gateway(t, { env: webhookEnv(receiver.port) })
    const { id, holder, holderId } = await session(gw, t)
    const { prompt, resolution, result } = await allowedTurn(holder)
    assert.equal((await gw.request('DELETE', `/v1/sessions/${id}`)).status, 200)
    const stopped = await holder.waitFor(isStatus('stopped'))
    await receiver.until(() => receiver.types.includes('session.ended'), 'session.ended')

    assert.deepEqual(receiver.types, ['permission.requested', 'permission.resolved', 'turn.finished', 'session.ended'])
    for (const r of receiver.requests) {
      assertSigned(r)
      assert.equal(r.headers['content-type'], 'application/json')
      assert.equal(r.json.session_id, id)
      assert.equal(r.json.tenant, 'tenant-a')
      assert.ok(Math.abs(Date.parse(r.json.created_at) - Date.now()) < 60_000)
    }
    assert.equal(new Set(receiver.requests.map((r) => r.json.id)).size, 4, 'one id per event')
    const [requested, answered, finished, ended] = receiver.requests.map((r) => r.json.data)
    assert.deepEqual(requested, {
      request_id: prompt.request_id,
      tool_name: 'Bash',
      summary: 'echo webhook-test',
      input_preview: JSON.stringify(prompt.request.input),
      input_truncated: false,
      seq: prompt.seq
    })
    assert.deepEqual(answered, { request_id: prompt.request_id, decision: 'allowed', by: holderId, seq: resolution.seq })
    assert.deepEqual(finished, {
      subtype: 'success',
      is_error: false,
      duration_ms: result.duration_ms,
      total_cost_usd: result.total_cost_usd,
      result: result.result,
      result_truncated: false,
      seq: result.seq
    })
    assert.equal(ended.status, 'stopped')
    assert.equal(ended.seq, stopped.seq)
    assert.deepEqual(Object.keys(ended).sort(), ['code', 'reason', 'seq', 'signal', 'status'])

    // /metrics counts them once the receiver has acknowledged each.
    const scrape = async (): Promise<string> => await (await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN_A}` } })).text()
    const text = await eventually(async () => {
      const now = await scrape()
      return /^cgw_webhook_deliveries_total\{outcome="delivered"\} 4$/m.test(now) ? now : false
    }, 10_000, 'four deliveries counted')
    assert.match(text, /^cgw_webhook_queue\{state="waiting"\} 0$/m)
    assert.match(text, /^cgw_webhook_deliveries_total\{outcome="rejected"\} 0$/m)
  })

  it('a receiver that takes the connection and never answers does not hold up the relay: the turn completes while its deliveries are pending', async (t) => {
    const receiver = await Receiver.start(t)
    receiver.hang = true
    // Attempts that would outlast the test: nothing is delivered until the receiver answers.
    const gw = await gateway(t, { env: webhookEnv(receiver.port, { WEBHOOK_TIMEOUT_MS: '60000' }) })
    const { id, holder } = await session(gw, t)
    const prompt = await ask(holder, 'ask Bash echo hang-test')
    // The prompt's delivery is on the wire, its answer withheld, before the client answers.
    await receiver.until(() => receiver.requests.length === 1, 'permission.requested on the wire')
    answer(holder, prompt.request_id, { behavior: 'allow' })
    await holder.waitFor(resolved(prompt.request_id))
    const result = await holder.waitFor(isResult)
    assert.equal(result.subtype, 'success')
    // The whole turn reached the client; the receiver still holds the first request unanswered,
    // and the later events wait behind it (the session's lane is in order).
    assert.deepEqual(receiver.types, ['permission.requested'])
    assert.equal(receiver.requests[0]?.res.headersSent, false, 'not acknowledged')
    const seqs = holder.seqFrames.map((f) => f.seq as number)
    assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b), 'frames in order')
    assert.ok(holder.frames.indexOf(result) > holder.frames.findIndex(isPrompt))

    // Once it answers, the rest follows in order, each sent once.
    receiver.release()
    await receiver.until(() => receiver.types.includes('turn.finished'), 'turn.finished')
    assert.deepEqual(receiver.types, ['permission.requested', 'permission.resolved', 'turn.finished'])
    assert.equal((await gw.request('DELETE', `/v1/sessions/${id}`)).status, 200)
    await receiver.until(() => receiver.types.includes('session.ended'), 'session.ended')
  })

  it('at shutdown, the session.ended of the sessions it stops still go out; a hanging receiver holds the close for its deadline at most', async (t) => {
    const receiver = await Receiver.start(t)
    const gw = await gateway(t, { env: webhookEnv(receiver.port, { WEBHOOK_TIMEOUT_MS: '1500' }) })
    const { id, holder } = await session(gw, t)
    holder.sendUser('hello')
    await holder.waitFor(isResult)
    await receiver.until(() => receiver.types.includes('turn.finished'), 'turn.finished')
    receiver.hang = true // the next one is taken and never answered
    const started = performance.now()
    await gw.close()
    const took = performance.now() - started
    assert.deepEqual(receiver.types, ['turn.finished', 'session.ended'])
    const ended = receiver.requests[1] as Received
    assertSigned(ended)
    assert.equal(ended.json.session_id, id)
    assert.equal(ended.json.data.status, 'stopped')
    // The close waited for the delivery in flight, up to the deadline (min(WEBHOOK_TIMEOUT_MS, 5 s)), then cut it.
    assert.ok(took >= 1450 && took < 1500 + 3000, `close took ${took.toFixed(0)} ms`)
    await receiver.until(() => ended.cutOff, 'the hanging delivery cut')
    assert.equal(receiver.requests.length, 2, 'not retried')
  })

  it('a receiver that is down at first gets every event, in order, once it is up', async (t) => {
    const probe = await Receiver.start(t)
    const port = probe.port
    await new Promise((resolve) => { probe.server.closeAllConnections(); probe.server.close(resolve) })
    // Refused connections, retried every 20..200 ms; the gateway carries on meanwhile.
    const gw = await gateway(t, { env: webhookEnv(port, { WEBHOOK_MAX_ATTEMPTS: '100' }) })
    const { id, holder } = await session(gw, t)
    const { result } = await allowedTurn(holder)
    assert.equal(result.subtype, 'success')
    assert.equal((await gw.request('DELETE', `/v1/sessions/${id}`)).status, 200)
    await holder.waitFor(isStatus('stopped'))

    const receiver = await Receiver.start(t, port)
    await receiver.until(() => receiver.types.includes('session.ended'), 'session.ended')
    assert.deepEqual(receiver.types, ['permission.requested', 'permission.resolved', 'turn.finished', 'session.ended'])
    assert.ok(Number(receiver.requests[0]?.headers['webhook-attempt']) > 1, 'the first was retried')
    for (const r of receiver.requests) assertSigned(r)
  })

  it('two nodes on one Redis: each event is sent once, by the node running the CLI, whichever node the client uses', { timeout: 60_000 }, async (t) => {
    const receiver = await Receiver.start(t)
    const env = webhookEnv(receiver.port)
    const cluster = await startNodes({ count: 0, redisUrl: REDIS_URL, env: { WEBHOOK_URL: env.WEBHOOK_URL as string, WEBHOOK_SECRET: SECRET } })
    t.after(() => cluster.close())
    // Started side by side (each process start takes seconds); both settled before a failure is thrown, so the close above finds each.
    const started = await Promise.allSettled([cluster.start('node-a'), cluster.start('node-b')])
    for (const s of started) if (s.status === 'rejected') throw s.reason
    const [a, b] = started.map((s) => (s as PromiseFulfilledResult<GatewayNode>).value) as [GatewayNode, GatewayNode]
    const auth = { authorization: `Bearer ${TOKEN_A}` }

    // The CLI runs on A; the holder is on B, so B follows the session's log and relays.
    const created = await a.create()
    const observer = await a.connect(created.id, 'role=observer')
    const holder = await b.connect(created.id)
    await observer.waitFor(isHello)
    await holder.waitFor(isHello)
    const { prompt, result } = await allowedTurn(holder)
    assert.equal((await fetch(`${b.url}/v1/sessions/${created.id}`, { method: 'DELETE', headers: auth })).status, 200)
    await holder.waitFor(isStatus('stopped'))
    await receiver.until(() => receiver.types.includes('session.ended'), 'session.ended')

    // A fence: a session whose CLI runs on B. Had B also reported the first session's events,
    // they were queued on B before these (and before its client got the frames): they would be here.
    const second = await b.create()
    const onB = await b.connect(second.id)
    onB.sendUser('hello')
    await onB.waitFor(isResult)
    await receiver.until(() => receiver.requests.some((r) => r.json.session_id === second.id), 'the second session\'s turn.finished')

    const first = receiver.requests.filter((r) => r.json.session_id === created.id)
    assert.deepEqual(first.map((r) => r.json.type), ['permission.requested', 'permission.resolved', 'turn.finished', 'session.ended'])
    assert.equal(first[0]?.json.data.request_id, prompt.request_id)
    assert.equal(first[2]?.json.data.seq, result.seq)
    for (const r of first) assertSigned(r)
    assert.deepEqual(receiver.requests.filter((r) => r.json.session_id === second.id).map((r) => r.json.type), ['turn.finished'])
  })
})
