/**
 * The typed client (src/client) against a real gateway with the fake CLI:
 * edges of its reconnect and credential handling that a user notices — a
 * frame over WS_MAX_PAYLOAD_BYTES (close 1009) must not make the connection
 * resend it after every reconnect for ever, a replay of answered prompts
 * must not call onPermission, and a credential deadline beyond setTimeout's
 * range must not make the client ask for tokens in a loop, and a ticket
 * request lost in a silent network must not stall the reconnects.
 */
import assert from 'node:assert/strict'
import { connect as tcpConnect, createServer, type Socket } from 'node:net'
import { describe, it, type TestContext } from 'node:test'
import { SignJWT } from 'jose'
import WebSocket from 'ws'
import {
  ControlRequestError, GatewayClient, type ConnectOptions, type ConnectionEvents,
  type PermissionRequest, type RecordedFrame, type SessionConnection, type WebSocketCtor
} from '../../src/client/index.js'
import { TOKEN_A, type TestGateway, eventually, gateway } from '../support/gateway.js'
import { LIMITS } from '../support/sessions.js'
import { trackedWebSocket } from '../support/tracked-websocket.js'
import { Waiters, within } from '../support/waiters.js'

type Frame = Record<string, any>

/** Everything a connection emits, with waiting on it. */
class Recorder {
  readonly frames: RecordedFrame[] = []
  readonly messages: Frame[] = []
  readonly errors: Array<ConnectionEvents['error']> = []
  readonly resolved: Array<ConnectionEvents['permissionResolved']> = []
  readonly #waiters = new Waiters()

  constructor (readonly conn: SessionConnection) {
    conn.on('frame', (f) => { this.frames.push(f); this.#waiters.wake() })
    conn.on('message', (m) => { this.messages.push(m as Frame); this.#waiters.wake() })
    conn.on('error', (e) => { this.errors.push(e); this.#waiters.wake() })
    conn.on('state', () => this.#waiters.wake())
    conn.on('permissionResolved', (r) => { this.resolved.push(r); this.#waiters.wake() })
  }

  get hellos (): number { return this.messages.filter((m) => m.type === 'gateway' && m.subtype === 'hello').length }

  until<T> (check: () => T | undefined | false, timeoutMs = 15_000, what = 'condition'): Promise<T> {
    return this.#waiters.until(check, timeoutMs, what, () => `state ${this.conn.state}, lastSeq ${this.conn.lastSeq}, hellos ${this.hellos}, errors ${JSON.stringify(this.errors.map(String))}`)
  }
}

function connect (t: TestContext, client: GatewayClient, id: string, options: ConnectOptions = {}): { conn: SessionConnection, rec: Recorder } {
  const conn = client.connect(id, options)
  t.after(() => conn.close())
  return { conn, rec: new Recorder(conn) }
}

async function setup (t: TestContext, env: Record<string, string> = {}): Promise<{ gw: TestGateway, client: GatewayClient, id: string }> {
  const gw = await gateway(t, { env: { ...LIMITS, ...env } })
  const client = new GatewayClient({ url: gw.url, token: TOKEN_A, WebSocket: WebSocket as unknown as WebSocketCtor })
  const session = await client.createSession()
  t.after(() => client.stopSession(session.id).catch(() => {}))
  return { gw, client, id: session.id }
}

const isResult = (f: Frame): boolean => f.type === 'result'
const isPrompt = (f: Frame): boolean => f.type === 'control_request' && f.request?.subtype === 'can_use_tool'

describe('client: a frame over WS_MAX_PAYLOAD_BYTES', () => {
  it('a control request too large for the gateway rejects with frame_too_large instead of being resent after every reconnect; the connection then works', async (t) => {
    const { gw, client, id } = await setup(t, { WS_MAX_PAYLOAD_BYTES: '4096' })
    const { conn, rec } = connect(t, client, id, { reconnect: { initialMs: 5, maxMs: 20 } })
    await rec.until(() => conn.state === 'open', 15_000, 'open')
    const call = conn.setModel('m'.repeat(8000))
    const err = await within(call.then(() => null, (e: unknown) => e), 10_000, 'the oversized set_model to settle')
    assert.ok(err instanceof ControlRequestError, String(err))
    assert.equal(err.code, 'frame_too_large')
    await rec.until(() => conn.state === 'open', 15_000, 'open again')
    const hellos = rec.hellos
    conn.send('still here')
    await rec.until(() => rec.frames.some((f) => isResult(f) && (f as Frame).result === 'Echo: still here'), 15_000, 'the echo')
    assert.equal(rec.hellos, hellos, 'no further reconnect')
    assert.ok(!gw.stdinLines(id).some((l) => l.type === 'control_request' && l.request?.subtype === 'set_model'), 'nothing of it reached the CLI')
  })

  it('a permission answer too large is not resent with every redelivery of the prompt: the prompt stays open and a smaller answer settles it', async (t) => {
    const { gw, client, id } = await setup(t, { WS_MAX_PAYLOAD_BYTES: '4096' })
    const { conn, rec } = connect(t, client, id, { reconnect: { initialMs: 5, maxMs: 20 } })
    conn.send('ask Bash touch big-answer.txt')
    const prompt = await rec.until(() => (rec.frames as Frame[]).find(isPrompt), 15_000, 'the prompt')
    const hellos = rec.hellos
    conn.allow(prompt.request_id, { updatedInput: { command: 'touch big-answer.txt', description: 'x'.repeat(8000) } })
    // The oversized answer costs one socket; the prompt comes again on the next one.
    await rec.until(() => rec.hellos === hellos + 1 && conn.state === 'open', 15_000, 'one reconnect')
    await rec.until(() => rec.messages.some((m) => isPrompt(m) && m.request_id === prompt.request_id), 15_000, 'the prompt handed out again')
    assert.equal(conn.pending.get(prompt.request_id)?.canAnswer, true, 'still open')
    conn.allow(prompt.request_id)
    await rec.until(() => rec.resolved.some((r) => r.requestId === prompt.request_id), 15_000, 'resolved')
    await rec.until(() => rec.frames.some(isResult), 15_000, 'the result')
    assert.equal(rec.hellos, hellos + 1, 'one reconnect in all, not one per redelivery')
    const answers = gw.stdinLines(id).filter((l) => l.type === 'control_response' && l.response?.request_id === prompt.request_id)
    assert.equal(answers.length, 1)
    assert.equal(answers[0]?.response.response.updatedInput.description, 'Run touch big-answer.txt')
  })
})

describe('client: replayed prompts', () => {
  it('onPermission is not called for a prompt in the replay that was answered before this connection attached', async (t) => {
    const { client, id } = await setup(t)
    const first = connect(t, client, id, { onPermission: () => ({ behavior: 'allow' }) })
    first.conn.send('ask Bash touch replayed.txt')
    await first.rec.until(() => first.rec.frames.some(isResult) && first.conn.turnState === 'idle', 15_000, 'the first turn')
    first.conn.close()

    const asked: PermissionRequest[] = []
    const second = connect(t, client, id, { onPermission: (request) => { asked.push(request); return { behavior: 'deny', message: 'stale' } } })
    const last = first.conn.lastSeq
    await second.rec.until(() => second.conn.state === 'open' && second.conn.lastSeq >= last, 15_000, 'the replay')
    assert.ok(second.rec.frames.some(isPrompt), 'the prompt is in the replay')
    assert.deepEqual(asked.map((r) => r.requestId), [], 'onPermission not asked about an answered prompt')
    assert.equal(second.conn.pending.size, 0)
    // An answer it would have sent comes back as already_resolved: a round trip proves none was sent.
    second.conn.send('done')
    await second.rec.until(() => second.rec.frames.some((f) => isResult(f) && (f as Frame).result === 'Echo: done'), 15_000, 'the echo')
    assert.deepEqual(second.rec.errors, [])
  })
})

describe('client: credential deadlines', () => {
  it('a JWT that ends the connection in 30 days is not refreshed at once (setTimeout\'s 24.8-day limit), nor in a loop', async (t) => {
    const secret = 'jwt-secret-for-tests-0123456789-abcdefghijklmnop'
    const sign = async (exp: number): Promise<string> =>
      await new SignJWT({ tenant: 'tenant-a' }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime(exp).sign(new TextEncoder().encode(secret))
    const inDays = (n: number): number => Math.floor(Date.now() / 1000) + n * 86_400
    const gw = await gateway(t, { env: { ...LIMITS, JWT_SECRET: secret, JWT_EXPIRY_ENDS_CONNECTIONS: 'true', JWT_MAX_TTL_SECONDS: String(40 * 86_400), KEEPALIVE_INTERVAL_MS: '100' } })
    let asked = 0
    const client = new GatewayClient({
      url: gw.url,
      token: await sign(inDays(30)),
      WebSocket: WebSocket as unknown as WebSocketCtor,
      refreshToken: async () => { asked++; return await sign(inDays(30)) }
    })
    const { id } = await client.createSession()
    t.after(() => client.stopSession(id).catch(() => {}))
    const { conn, rec } = connect(t, client, id)
    await rec.until(() => rec.messages.some((m) => m.type === 'gateway' && m.subtype === 'credential' && typeof m.expires_at === 'string'), 15_000, 'the deadline')
    const credentialsAt = rec.messages.length
    // Five keep_alive ticks after the deadline frame: a refresh fired at once would have come and gone by then.
    await rec.until(() => rec.messages.slice(credentialsAt).filter((m) => m.type === 'keep_alive').length >= 5, 15_000, 'five ticks')
    assert.equal(asked, 0, 'refreshToken not called 30 days early')
    assert.equal(rec.messages.filter((m) => m.type === 'gateway' && m.subtype === 'credential').length, 1)
    assert.equal(conn.state, 'open')
  })
})

/**
 * A TCP forwarder whose network can fail silently: `hole()` keeps every
 * connection open with nothing passing and accepts new ones without ever
 * answering (a dead Wi-Fi, a NAT that forgot the flows); `restore()` lets
 * new connections through again (the old ones stay dead).
 */
async function holedForwarder (gatewayUrl: string): Promise<{ url: string, hole: () => void, restore: () => void, heldBytes: () => number, close: () => Promise<void> }> {
  const target = Number(new URL(gatewayUrl).port)
  let holed = false
  let held = 0
  const all = new Set<Socket>()
  const dead = new WeakSet<Socket>()
  const track = (s: Socket): void => { all.add(s); s.on('close', () => all.delete(s)); s.on('error', () => {}) }
  const server = createServer((client) => {
    track(client)
    if (holed) {
      dead.add(client)
      client.on('data', (chunk: Buffer) => { held += chunk.length })
      return
    }
    const upstream = tcpConnect(target, '127.0.0.1')
    track(upstream)
    client.on('data', (chunk: Buffer) => { if (dead.has(client)) held += chunk.length; else upstream.write(chunk) })
    upstream.on('data', (chunk: Buffer) => { if (!dead.has(client)) client.write(chunk) })
    client.on('end', () => { if (!dead.has(client)) upstream.end() })
    upstream.on('end', () => { if (!dead.has(client)) client.end() })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('no address')
  return {
    url: `http://127.0.0.1:${address.port}`,
    hole: () => { holed = true; for (const s of all) dead.add(s) },
    restore: () => { holed = false },
    heldBytes: () => held,
    close: async () => {
      for (const s of all) s.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
}

describe('client: a network that fails silently', () => {
  it('a ticket request that never gets an answer is given up after keepAliveTimeoutMs: the connection comes back once the network does', async (t) => {
    const gw = await gateway(t, { env: { ...LIMITS, KEEPALIVE_INTERVAL_MS: '100' } })
    const fwd = await holedForwarder(gw.url)
    t.after(() => fwd.close())
    const client = new GatewayClient({ url: fwd.url, token: TOKEN_A, WebSocket: WebSocket as unknown as WebSocketCtor })
    const { id } = await client.createSession()
    t.after(() => new GatewayClient({ url: gw.url, token: TOKEN_A }).stopSession(id).catch(() => {}))
    const { conn, rec } = connect(t, client, id, { auth: 'ticket', keepAliveTimeoutMs: 500, reconnect: { initialMs: 5, maxMs: 20 } })
    await rec.until(() => conn.state === 'open', 15_000, 'open')
    fwd.hole()
    // The watchdog drops the silent socket; the next attempt's ticket request goes into the hole.
    await rec.until(() => conn.state === 'reconnecting', 15_000, 'reconnecting')
    await eventually(() => fwd.heldBytes() > 0, 15_000, 'the ticket request sent into the hole')
    fwd.restore()
    await rec.until(() => rec.hellos >= 2 && conn.state === 'open', 15_000, 'a hello through the restored network')
    conn.send('back')
    await rec.until(() => rec.frames.some((f) => isResult(f) && (f as Frame).result === 'Echo: back'), 15_000, 'the echo')
  })
})

describe('client: an expired credential with refreshToken', () => {
  const secret = 'jwt-secret-for-tests-0123456789-abcdefghijklmnop'
  const sign = async (exp: number): Promise<string> =>
    await new SignJWT({ tenant: 'tenant-a' }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime(exp).sign(new TextEncoder().encode(secret))
  const inSeconds = (n: number): number => Math.floor(Date.now() / 1000) + n

  it('a reconnect after the JWT expired (refused 401) asks refreshToken once and attaches with the newer JWT', async (t) => {
    const gw = await gateway(t, { env: { ...LIMITS, JWT_SECRET: secret, KEEPALIVE_INTERVAL_MS: '100' } })
    const exp = inSeconds(4)
    let asked = 0
    const { ctor, built } = trackedWebSocket()
    const client = new GatewayClient({ url: gw.url, token: await sign(exp), WebSocket: ctor, refreshToken: async () => { asked++; return await sign(inSeconds(600)) } })
    const { id } = await client.createSession()
    t.after(() => client.stopSession(id).catch(() => {}))
    const { conn, rec } = connect(t, client, id, { reconnect: { initialMs: 5, maxMs: 20 } })
    await rec.until(() => conn.state === 'open', 15_000, 'open')
    // A keep_alive past the expiry: the socket outlived its JWT (the gateway does not end it here).
    await rec.until(() => Date.now() > exp * 1000 + 200 && rec.messages.some((m) => m.type === 'keep_alive'), 15_000, 'a tick past the expiry')
    built[0]?.terminate()
    await rec.until(() => rec.hellos === 2 && conn.state === 'open', 15_000, 'a second hello')
    assert.equal(asked, 1)
    assert.deepEqual(rec.errors, [])
    conn.send('renewed')
    await rec.until(() => rec.frames.some((f) => isResult(f) && (f as Frame).result === 'Echo: renewed'), 15_000, 'the echo')
  })

  it('closed 4401 at the expiry because the renewal failed in time: refreshToken is asked again and the connection resumes', async (t) => {
    const gw = await gateway(t, { env: { ...LIMITS, JWT_SECRET: secret, JWT_EXPIRY_ENDS_CONNECTIONS: 'true', KEEPALIVE_INTERVAL_MS: '100' } })
    let asked = 0
    const { ctor } = trackedWebSocket()
    const client = new GatewayClient({
      url: gw.url,
      token: await sign(inSeconds(4)),
      WebSocket: ctor,
      refreshToken: async () => {
        if (++asked === 1) throw new Error('token service down')
        return await sign(inSeconds(600))
      }
    })
    const { id } = await client.createSession()
    t.after(() => client.stopSession(id).catch(() => {}))
    const { conn, rec } = connect(t, client, id, { reconnect: { initialMs: 5, maxMs: 20 } })
    await rec.until(() => rec.hellos === 2 && conn.state === 'open', 15_000, 'a hello after the 4401')
    assert.equal(asked, 2)
    assert.deepEqual(rec.errors.map(String), ['Error: token service down'])
    conn.send('renewed late')
    await rec.until(() => rec.frames.some((f) => isResult(f) && (f as Frame).result === 'Echo: renewed late'), 15_000, 'the echo')
  })
})
