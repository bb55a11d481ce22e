/**
 * GET /metrics against a real gateway, real WebSocket and event-stream
 * clients and the fake CLI: after a turn and an answered permission prompt
 * the exposition shows the CLI running, the clients by role, at least the
 * frames and bytes the clients received, the prompt's wait with outcome
 * allow, and a CLI exit once the session is stopped; no label names a
 * session or client. Where it is served (METRICS_PORT) and who may read it
 * (METRICS_TOKEN, else a tenant token) are checked on the status codes.
 * Values are compared with a scrape taken before, never with fixed totals.
 */
import assert from 'node:assert/strict'
import { createServer } from 'node:net'
import { describe, it } from 'node:test'
import { type Frame, isPrompt, isResult, isStatus, resolved } from '../support/frames.js'
import { TOKEN_A, TOKEN_B, type TestGateway } from '../support/gateway.js'
import { SseReader } from '../support/sse-reader.js'
import { LIMITS, answer, client, gateway } from '../support/sessions.js'

const METRICS_TOKEN = 'metrics-token-0123456789abcdef'

/** One sample: `name{label="value",…} number`. */
interface Sample { name: string, labels: Record<string, string>, value: number }

/** Parses the Prometheus text format (comments skipped). */
function parse (text: string): Sample[] {
  const samples: Sample[] = []
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    assert.ok(m !== null, `not an exposition line: ${line}`)
    const labels: Record<string, string> = {}
    for (const l of (m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1] as string] = l[2] as string
    samples.push({ name: m[1] as string, labels, value: Number(m[3]) })
  }
  return samples
}

/** The sum of the samples of `name` whose labels include `labels`; undefined when there is none. */
function value (samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const hits = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
  return hits.length === 0 ? undefined : hits.reduce((n, s) => n + s.value, 0)
}

/** `value` of a metric that must be there. */
function must (samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const v = value(samples, name, labels)
  assert.ok(v !== undefined, `${name}${JSON.stringify(labels)} is exposed`)
  return v
}

async function get (url: string, authorization?: string): Promise<{ status: number, type: string | null, text: string }> {
  const res = await fetch(url, { headers: authorization === undefined ? {} : { authorization } })
  return { status: res.status, type: res.headers.get('content-type'), text: await res.text() }
}

async function scrape (gw: TestGateway, token = TOKEN_A): Promise<{ text: string, samples: Sample[] }> {
  const res = await get(`${gw.url}/metrics`, `Bearer ${token}`)
  assert.equal(res.status, 200, res.text)
  assert.match(res.type ?? '', /^text\/plain; version=0\.0\.4/)
  return { text: res.text, samples: parse(res.text) }
}

/** A port free right now (for METRICS_PORT). */
async function freePort (): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  await new Promise<void>((resolve) => server.close(() => resolve()))
  assert.ok(address !== null && typeof address === 'object')
  return address.port
}

describe('/metrics on the main port', () => {
  it('counts a turn, an answered prompt, the clients by role, the frames they got and the CLI\'s exit', async (t) => {
    const gw = await gateway(t, { env: LIMITS })
    const before = (await scrape(gw)).samples
    assert.ok(value(before, 'process_cpu_user_seconds_total') !== undefined, 'prom-client default metrics are exposed')

    const created = await gw.createSession()
    const holder = await client(gw, t, created.id)
    const observer = await client(gw, t, created.id, 'role=observer')
    const sse = await SseReader.open(`${gw.url}/v1/sessions/${created.id}/events/stream`)
    t.after(() => sse.close())
    await sse.until(() => sse.gatewayFrames.find((f) => f.subtype === 'hello'))

    // A turn, then a prompt answered allow and the turn it lets finish.
    let sent = 0
    holder.sendUser('hello')
    sent++
    await holder.waitFor(isResult)
    const from = holder.frames.length
    holder.sendUser('ask')
    sent++
    const prompt = await holder.waitFor(isPrompt, 10_000, from)
    answer(holder, prompt.request_id, { behavior: 'allow' })
    sent++
    assert.equal((await holder.waitFor(resolved(prompt.request_id))).decision, 'allowed')
    await holder.waitFor(isResult, 10_000, holder.frames.indexOf(prompt))
    // Everything recorded so far has reached the other two clients as well.
    const last = Math.max(...holder.seqFrames.map((f: Frame) => f.seq as number))
    await observer.until(() => observer.seqFrames.some((f: Frame) => f.seq === last))
    await sse.until(() => sse.frames.some((f) => f.seq === last))

    const during = await scrape(gw)
    const now = during.samples
    const delta = (name: string, labels: Record<string, string> = {}): number => must(now, name, labels) - (value(before, name, labels) ?? 0)

    assert.equal(must(now, 'cgw_clis_running'), 1)
    assert.equal(must(now, 'cgw_sessions', { status: 'running' }), 1)
    assert.equal(must(now, 'cgw_clients', { role: 'controller' }), 1)
    assert.equal(must(now, 'cgw_clients', { role: 'observer' }), 2, 'the WebSocket observer and the event stream')

    const wsFrames = [...holder.raw, ...observer.raw]
    const sseFrames = sse.events.map((e) => e.data)
    const received = wsFrames.length + sseFrames.length
    const receivedBytes = [...wsFrames, ...sseFrames].reduce((n, f) => n + Buffer.byteLength(f), 0)
    assert.ok(delta('cgw_client_frames_out_total') >= received, `frames out ${delta('cgw_client_frames_out_total')} >= ${received} received`)
    assert.ok(delta('cgw_client_bytes_out_total') >= receivedBytes, `bytes out ${delta('cgw_client_bytes_out_total')} >= ${receivedBytes} received`)
    assert.equal(delta('cgw_client_frames_in_total'), sent)
    const cliFrames = holder.seqFrames.filter((f: Frame) => f.type !== 'gateway').length
    assert.ok(delta('cgw_cli_lines_total') >= cliFrames, `CLI lines ${delta('cgw_cli_lines_total')} >= ${cliFrames} relayed`)
    assert.ok(delta('cgw_store_append_seconds_count', { result: 'ok' }) > 0, 'appends were timed')
    assert.equal(delta('cgw_cli_spawn_seconds_count'), 1, 'the one CLI start was timed')
    assert.ok(delta('cgw_cli_spawn_seconds_sum') > 0)

    assert.equal(delta('cgw_permission_prompts_total', { outcome: 'allow' }), 1)
    assert.equal(delta('cgw_permission_wait_seconds_count', { outcome: 'allow' }), 1)
    assert.ok(delta('cgw_permission_wait_seconds_sum', { outcome: 'allow' }) > 0)
    assert.equal(delta('cgw_permission_prompts_total'), 1, 'no other outcome')
    assert.equal(must(now, 'cgw_store_degraded'), 0)

    // No label value is a session or client id.
    const hello = holder.frames[0] as Frame
    for (const id of [created.id, hello.client_id, (observer.frames[0] as Frame).client_id]) {
      assert.ok(!during.text.includes(id), `${String(id)} appears in /metrics`)
    }

    assert.equal((await gw.request('DELETE', `/v1/sessions/${created.id}`)).status, 200)
    await holder.waitFor(isStatus('stopped'))
    const after = (await scrape(gw)).samples
    assert.equal(must(after, 'cgw_cli_exits_total') - (value(before, 'cgw_cli_exits_total') ?? 0), 1)
    const exit = after.find((s) => s.name === 'cgw_cli_exits_total' && s.value > 0)
    assert.ok(exit !== undefined && /^(\d+|none)$/.test(exit.labels.code ?? '') && /^(SIG[A-Z0-9]+|none)$/.test(exit.labels.signal ?? ''), JSON.stringify(exit))
    assert.equal(must(after, 'cgw_clis_running'), 0)
    assert.equal(must(after, 'cgw_sessions', { status: 'stopped' }), 1)
    assert.equal(must(after, 'cgw_sessions', { status: 'running' }), 0)
  })

  it('without METRICS_TOKEN needs a tenant token (any tenant); refusals are counted by reason', async (t) => {
    const gw = await gateway(t, { env: LIMITS })
    const before = (await scrape(gw)).samples
    const missing = await get(`${gw.url}/metrics`)
    assert.equal(missing.status, 401)
    assert.equal(JSON.parse(missing.text).code, 'unauthorized')
    assert.equal((await get(`${gw.url}/metrics`, 'Bearer wrong-token-0123456789')).status, 401)
    assert.equal((await get(`${gw.url}/metrics`, `Bearer ${METRICS_TOKEN}`)).status, 401, 'no METRICS_TOKEN is configured')
    const after = (await scrape(gw, TOKEN_B)).samples
    assert.equal(must(after, 'cgw_auth_failures_total', { reason: 'missing' }) - (value(before, 'cgw_auth_failures_total', { reason: 'missing' }) ?? 0), 1)
    assert.equal(must(after, 'cgw_auth_failures_total', { reason: 'invalid' }) - (value(before, 'cgw_auth_failures_total', { reason: 'invalid' }) ?? 0), 2)
  })

  it('with METRICS_TOKEN accepts that token only: no token, a wrong one or a tenant\'s are refused 401', async (t) => {
    const gw = await gateway(t, { env: { ...LIMITS, METRICS_TOKEN } })
    assert.equal((await get(`${gw.url}/metrics`)).status, 401)
    assert.equal((await get(`${gw.url}/metrics`, `Bearer ${METRICS_TOKEN}x`)).status, 401)
    assert.equal((await get(`${gw.url}/metrics`, `Bearer ${TOKEN_A}`)).status, 401)
    const ok = await get(`${gw.url}/metrics`, `Bearer ${METRICS_TOKEN}`)
    assert.equal(ok.status, 200)
    assert.ok(value(parse(ok.text), 'cgw_clis_running') !== undefined)
    // The tenant routes still take tenant tokens only.
    assert.equal((await gw.request('GET', '/v1/sessions', undefined, METRICS_TOKEN)).status, 401)
  })
})

describe('/metrics on METRICS_PORT', () => {
  it('is served there (no credential without METRICS_TOKEN), not on the main port, and closes with the app', async (t) => {
    const port = await freePort()
    const gw = await gateway(t, { env: { ...LIMITS, METRICS_PORT: String(port) } })
    assert.equal((await get(`${gw.url}/metrics`, `Bearer ${TOKEN_A}`)).status, 404)
    const res = await get(`http://127.0.0.1:${port}/metrics`)
    assert.equal(res.status, 200)
    assert.match(res.type ?? '', /^text\/plain; version=0\.0\.4/)
    assert.equal(value(parse(res.text), 'cgw_clis_running'), 0)
    assert.equal((await get(`http://127.0.0.1:${port}/other`)).status, 404)
    await gw.close()
    await assert.rejects(fetch(`http://127.0.0.1:${port}/metrics`), 'the listener is closed with the app')
  })

  it('with METRICS_TOKEN refuses a missing or wrong token there', async (t) => {
    const port = await freePort()
    await gateway(t, { env: { ...LIMITS, METRICS_PORT: String(port), METRICS_TOKEN } })
    assert.equal((await get(`http://127.0.0.1:${port}/metrics`)).status, 401)
    assert.equal((await get(`http://127.0.0.1:${port}/metrics`, `Bearer ${TOKEN_A}`)).status, 401)
    const ok = await get(`http://127.0.0.1:${port}/metrics`, `Bearer ${METRICS_TOKEN}`)
    assert.equal(ok.status, 200)
    assert.ok(value(parse(ok.text), 'cgw_auth_failures_total', { reason: 'missing' }) === 1)
  })
})
