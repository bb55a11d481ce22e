/**
 * The typed client (src/client) against a real gateway with the fake CLI,
 * over real `ws` sockets: resume across a reconnect storm (every recorded
 * frame exactly once, in order, equal to history), permission answers as
 * the CLI reads them on stdin, the three auth modes and a refused one,
 * observer/holder and take-over, control requests, and the keep_alive
 * watchdog. The client's sockets are reached through the WebSocket
 * constructor it is given (a subclass that records what it builds).
 */
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it, type TestContext } from 'node:test'
import { SignJWT } from 'jose'
import WebSocket from 'ws'
import {
  ControlRequestError, GatewayClient, GatewayRequestError, type ConnectOptions, type ConnectionEvents,
  type PermissionRequest, type RecordedFrame, type SessionConnection, type WebSocketCtor
} from '../../src/client/index.js'
import { TOKEN_A, TOKEN_B, type TestGateway, eventually, gateway } from '../support/gateway.js'
import { LIMITS } from '../support/sessions.js'
import { Waiters } from '../support/waiters.js'

type Frame = Record<string, any>

interface Built { ws: WebSocket, url: string, protocols: string | string[] | undefined, options: { headers?: Record<string, string> } | undefined }

/** A `ws` WebSocket constructor that records every socket the client builds (and may cut some as they open). */
function trackedWebSocket (killOnCreate: (index: number) => boolean = () => false): { ctor: WebSocketCtor, built: Built[] } {
  const built: Built[] = []
  class Tracked extends WebSocket {
    constructor (url: string, protocols?: string | string[], options?: { headers?: Record<string, string> }) {
      super(url, protocols, options)
      built.push({ ws: this, url, protocols, options })
      // After the client has added its listeners (it does so synchronously after construction).
      if (killOnCreate(built.length - 1)) queueMicrotask(() => this.terminate())
    }
  }
  return { ctor: Tracked as unknown as WebSocketCtor, built }
}

/** Everything a connection emits, with waiting on it. */
class Recorder {
  readonly frames: RecordedFrame[] = []
  readonly messages: Frame[] = []
  readonly errors: Array<ConnectionEvents['error']> = []
  readonly states: Array<ConnectionEvents['state']> = []
  readonly permissions: PermissionRequest[] = []
  readonly resolved: Array<ConnectionEvents['permissionResolved']> = []
  readonly roles: Array<ConnectionEvents['role']> = []
  readonly gaps: Array<ConnectionEvents['gap']> = []
  readonly #waiters = new Waiters()

  constructor (readonly conn: SessionConnection) {
    const keep = <K extends keyof ConnectionEvents>(event: K, list: Array<ConnectionEvents[K]>): void => {
      conn.on(event, (payload) => { list.push(payload); this.#waiters.wake() })
    }
    keep('frame', this.frames)
    keep('message', this.messages as Array<ConnectionEvents['message']>)
    keep('error', this.errors)
    keep('state', this.states)
    keep('permission', this.permissions)
    keep('permissionResolved', this.resolved)
    keep('role', this.roles)
    keep('gap', this.gaps)
  }

  get hellos (): number { return this.messages.filter((m) => m.type === 'gateway' && m.subtype === 'hello').length }

  until<T> (check: () => T | undefined | false, timeoutMs = 15_000, what = 'condition'): Promise<T> {
    return this.#waiters.until(check, timeoutMs, what, () => `state ${this.conn.state}, lastSeq ${this.conn.lastSeq}, ${this.frames.length} frames, errors ${JSON.stringify(this.errors.map(String))}, last: ${JSON.stringify(this.frames.slice(-3)).slice(0, 1500)}`)
  }

  frame (predicate: (f: Frame) => boolean, what = predicate.toString()): Promise<Frame> {
    return this.until(() => (this.frames as Frame[]).find(predicate), 15_000, what)
  }
}

function connect (t: TestContext, client: GatewayClient, id: string, options: ConnectOptions = {}): { conn: SessionConnection, rec: Recorder } {
  const conn = client.connect(id, options)
  t.after(() => conn.close())
  return { conn, rec: new Recorder(conn) }
}

async function history (client: GatewayClient, id: string): Promise<RecordedFrame[]> {
  const all: RecordedFrame[] = []
  for await (const f of client.historyAll(id)) all.push(f)
  return all
}

const isResult = (f: Frame): boolean => f.type === 'result'
const isPrompt = (f: Frame): boolean => f.type === 'control_request' && f.request?.subtype === 'can_use_tool'
const answerOnStdin = (gw: TestGateway, id: string, requestId: string): Frame | undefined =>
  gw.stdinLines(id).find((l) => l.type === 'control_response' && l.response?.request_id === requestId)

async function setup (t: TestContext, env: Record<string, string> = {}): Promise<{ gw: TestGateway, client: GatewayClient, built: Built[], id: string }> {
  const gw = await gateway(t, { env: { ...LIMITS, ...env } })
  const { ctor, built } = trackedWebSocket()
  const client = new GatewayClient({ url: gw.url, token: TOKEN_A, WebSocket: ctor })
  const session = await client.createSession()
  t.after(() => client.stopSession(session.id).catch(() => {}))
  return { gw, client, built, id: session.id }
}

describe('client: resume across a reconnect storm', () => {
  it('delivers seqs 1..N exactly once and in order while its socket is cut dozens of times, equal to history; messages sent meanwhile reach the CLI once', async (t) => {
    const gw = await gateway(t, { env: LIMITS })
    // Every 4th socket is cut as it is built (before it opens): the refused-upgrade path runs too.
    const { ctor, built } = trackedWebSocket((i) => i > 0 && i % 4 === 0)
    const client = new GatewayClient({ url: gw.url, token: TOKEN_A, WebSocket: ctor })
    const { id } = await client.createSession()
    t.after(() => client.stopSession(id).catch(() => {}))
    const { conn, rec } = connect(t, client, id, { reconnect: { initialMs: 2, maxMs: 20 } })
    await rec.until(() => conn.state === 'open', 15_000, 'open')

    const KILLS = 30
    let kills = 0
    const sent: string[] = []
    // Cut each socket after it has delivered a few frames (replayed or live) since its hello.
    let sinceHello = 0
    conn.on('message', (m) => { if (m.type === 'gateway' && m.subtype === 'hello') sinceHello = 0 })
    conn.on('frame', () => {
      if (++sinceHello < 7 || kills >= KILLS) return
      const last = built.at(-1)?.ws
      if (last?.readyState !== WebSocket.OPEN) return
      kills++
      last.terminate()
      // Sent while the connection is down: queued, flushed after the next hello. More output keeps the storm going.
      sent.push(conn.send(`burst 40 120 storm-${kills}`))
    })
    sent.push(conn.send('burst 200 150'))

    await rec.until(() => kills >= KILLS && rec.frames.filter(isResult).length === sent.length, 60_000, 'every turn to end after the storm')
    await rec.until(() => conn.turnState === 'idle', 15_000, 'idle')
    const recorded = await history(client, id)
    await rec.until(() => conn.lastSeq >= (recorded.at(-1)?.seq ?? Infinity), 15_000, 'the last recorded seq')

    const seqs = rec.frames.map((f) => f.seq)
    assert.deepEqual(seqs, Array.from({ length: seqs.length }, (_, i) => i + 1), 'contiguous from 1, no duplicate')
    assert.deepEqual(rec.frames, recorded, 'the frames are history, exactly')
    assert.equal(rec.gaps.length, 0)
    assert.ok(built.length > KILLS, `reconnected after every cut (${built.length} sockets)`)
    assert.ok(rec.hellos > KILLS / 2, `${rec.hellos} hellos`)
    assert.ok(rec.states.includes('reconnecting'))

    const userUuids = gw.stdinLines(id).filter((l) => l.type === 'user').map((l) => l.uuid)
    assert.deepEqual([...userUuids].sort(), [...sent].sort(), 'each message reached the CLI exactly once')
    assert.equal(rec.frames.filter((f) => f.type === 'assistant' && JSON.stringify(f).includes('"#199 ')).length, 1, 'the first burst ended once')
  })
})

describe('client: permission prompts', () => {
  it('onPermission allow with updatedInput: the CLI reads that input and runs the tool with it', async (t) => {
    const { gw, client, id } = await setup(t)
    const asked: PermissionRequest[] = []
    const { conn, rec } = connect(t, client, id, {
      onPermission: (request) => {
        asked.push(request)
        return { behavior: 'allow', updatedInput: { command: 'touch client-edited.txt', description: 'edited by the client' } }
      }
    })
    conn.send('ask Bash touch client-original.txt')
    const prompt = await rec.frame(isPrompt)
    await rec.frame(isResult)

    assert.equal(asked.length, 1)
    assert.equal(asked[0]?.requestId, prompt.request_id)
    assert.equal(asked[0]?.toolName, 'Bash')
    assert.deepEqual(asked[0]?.input, { command: 'touch client-original.txt', description: 'Run touch client-original.txt' })
    assert.equal(asked[0]?.canAnswer, true)
    const line = answerOnStdin(gw, id, prompt.request_id)
    assert.equal(line?.response.subtype, 'success')
    assert.equal(line?.response.response.behavior, 'allow')
    assert.deepEqual(line?.response.response.updatedInput, { command: 'touch client-edited.txt', description: 'edited by the client' })
    const cwd = join(gw.dataDir, 'workspaces', 'tenant-a', id)
    assert.ok(existsSync(join(cwd, 'client-edited.txt')), 'the edited command ran')
    assert.ok(!existsSync(join(cwd, 'client-original.txt')), 'the original did not')
    await rec.until(() => rec.resolved.length === 1)
    assert.deepEqual(rec.resolved[0], { requestId: prompt.request_id, decision: 'allowed', by: conn.clientId })
    assert.equal(conn.pending.size, 0)
  })

  it('onPermission deny: the CLI reads the deny and its message, the tool does not run', async (t) => {
    const { gw, client, id } = await setup(t)
    const { conn, rec } = connect(t, client, id, { onPermission: () => ({ behavior: 'deny', message: 'not from the client' }) })
    conn.send('ask Bash touch client-denied.txt')
    const prompt = await rec.frame(isPrompt)
    const result = await rec.frame(isResult)
    const line = answerOnStdin(gw, id, prompt.request_id)
    assert.equal(line?.response.response.behavior, 'deny')
    assert.equal(line?.response.response.message, 'not from the client')
    assert.ok(!existsSync(join(gw.dataDir, 'workspaces', 'tenant-a', id, 'client-denied.txt')))
    assert.equal(result.permission_denials.length, 1)
    await rec.until(() => rec.resolved.find((r) => r.requestId === prompt.request_id && r.decision === 'denied'))
  })

  it('alwaysAllow grants the request\'s permission_suggestions; a prompt left pending by onPermission is answered later', async (t) => {
    const { gw, client, id } = await setup(t)
    const { conn, rec } = connect(t, client, id, { onPermission: () => undefined })
    conn.send('ask Bash touch client-always.txt')
    const prompt = await rec.frame(isPrompt)
    const request = await rec.until(() => conn.pending.get(prompt.request_id))
    assert.ok(request.suggestions.length > 0)
    conn.alwaysAllow(prompt.request_id)
    await rec.frame(isResult)
    const line = answerOnStdin(gw, id, prompt.request_id)
    assert.equal(line?.response.response.behavior, 'allow')
    assert.deepEqual(line?.response.response.updatedPermissions, prompt.request.permission_suggestions)
    assert.deepEqual(line?.response.response.updatedInput, prompt.request.input)
  })
})

describe('client: auth', () => {
  it('ticket auth: a fresh ticket in the URL of every (re)connect, no Authorization header', async (t) => {
    const { client, built, id } = await setup(t)
    const { conn, rec } = connect(t, client, id, { auth: 'ticket' })
    await rec.until(() => conn.state === 'open')
    built[0]?.ws.terminate()
    await rec.until(() => rec.hellos === 2 && conn.state === 'open')
    const tickets = built.map((b) => new URL(b.url).searchParams.get('ticket'))
    assert.equal(tickets.length, 2)
    assert.ok(tickets.every((x) => typeof x === 'string' && x.length > 10), 'a ticket each time')
    assert.notEqual(tickets[0], tickets[1])
    assert.ok(built.every((b) => b.options === undefined), 'no headers')
    assert.deepEqual(built[0]?.protocols, ['claude-gateway.v1'])
  })

  it('subprotocol auth: the token rides in the bearer.<token> subprotocol', async (t) => {
    const { client, built, id } = await setup(t)
    const { conn, rec } = connect(t, client, id, { auth: 'subprotocol' })
    await rec.until(() => conn.state === 'open')
    assert.deepEqual(built[0]?.protocols, ['claude-gateway.v1', `bearer.${TOKEN_A}`])
    assert.equal(built[0]?.options, undefined)
    assert.equal(built[0]?.ws.protocol, 'claude-gateway.v1')
  })

  it('a bad token ends the connection with a typed 401 error after one attempt (header) or none (ticket)', async (t) => {
    const { gw, id } = await setup(t)
    for (const auth of ['header', 'subprotocol', 'ticket'] as const) {
      const { ctor, built } = trackedWebSocket()
      const bad = new GatewayClient({ url: gw.url, token: 'not-a-token-0123456789', WebSocket: ctor })
      const { conn, rec } = connect(t, bad, id, { auth, reconnect: { initialMs: 1, maxMs: 1 } })
      const err = await rec.until(() => rec.errors[0], 15_000, `an error (${auth})`)
      await rec.until(() => conn.state === 'closed')
      assert.ok(err instanceof GatewayRequestError, `${auth}: ${String(err)}`)
      assert.equal(err.statusCode, 401)
      assert.equal(err.code, 'unauthorized')
      assert.equal(built.length, auth === 'ticket' ? 0 : 1, `${auth}: no retry`)
      assert.equal(rec.errors.length, 1)
    }
  })

  it('with JWT_EXPIRY_ENDS_CONNECTIONS: refreshToken is asked before the deadline, the newer JWT presented on the socket and used for REST; the connection outlives the first JWT', async (t) => {
    const secret = 'jwt-secret-for-tests-0123456789-abcdefghijklmnop'
    /** A JWT of tenant-a expiring at `exp` (Unix seconds). */
    const sign = async (exp: number): Promise<string> =>
      await new SignJWT({ tenant: 'tenant-a' }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime(exp).sign(new TextEncoder().encode(secret))
    const inSeconds = (n: number): number => Math.floor(Date.now() / 1000) + n
    const gw = await gateway(t, { env: { ...LIMITS, JWT_SECRET: secret, JWT_EXPIRY_ENDS_CONNECTIONS: 'true', KEEPALIVE_INTERVAL_MS: '200' } })
    const firstExp = inSeconds(3)
    const first = await sign(firstExp)
    let asked = 0
    const { ctor, built } = trackedWebSocket()
    const client = new GatewayClient({ url: gw.url, token: first, WebSocket: ctor, refreshToken: async () => { asked++; return await sign(inSeconds(600)) } })
    const { id } = await client.createSession()
    t.after(() => client.stopSession(id).catch(() => {}))
    const { conn, rec } = connect(t, client, id)
    const deadlines = (): string[] => rec.messages.filter((m) => m.type === 'gateway' && m.subtype === 'credential').map((m) => m.expires_at)
    await rec.until(() => deadlines().length >= 2, 15_000, 'the first deadline, then the newer one')
    assert.ok(Date.parse(deadlines()[1] as string) > Date.now() + 500_000, 'the newer JWT\'s deadline')
    assert.equal(asked, 1)
    // A keep_alive after the first JWT's expiry: the same socket was open past it.
    await rec.until(() => Date.now() > firstExp * 1000 + 200 && rec.messages.some((m) => m.type === 'keep_alive'), 15_000, 'a tick past the first expiry')
    assert.equal(conn.state, 'open')
    assert.equal(built.length, 1, 'no reconnect: the first socket lives on')
    assert.equal((await client.getSession(id)).id, id, 'REST with the refreshed token (the first one has expired)')
    conn.send('after the refresh')
    await rec.frame((f) => isResult(f) && f.result === 'Echo: after the refresh')
    assert.deepEqual(rec.errors, [])
  })

  it('another tenant\'s session is session_not_found, not retried', async (t) => {
    const { gw, id } = await setup(t)
    const { ctor, built } = trackedWebSocket()
    const other = new GatewayClient({ url: gw.url, token: TOKEN_B, WebSocket: ctor })
    const { conn, rec } = connect(t, other, id)
    const err = await rec.until(() => rec.errors[0])
    await rec.until(() => conn.state === 'closed')
    assert.ok(err instanceof GatewayRequestError)
    assert.equal(err.code, 'session_not_found')
    assert.equal(built.length, 1)
  })
})

describe('client: holder and observer', () => {
  it('an observer sees the holder and prompts it cannot answer; takeOver makes it the holder with the full prompt; the old holder answers over HTTP', async (t) => {
    const { gw, client, id } = await setup(t)
    const a = connect(t, client, id)
    await a.rec.until(() => a.conn.state === 'open')
    const b = connect(t, client, id, { role: 'observer' })
    await b.rec.until(() => b.conn.state === 'open')
    assert.equal(a.conn.role, 'controller')
    assert.equal(a.conn.holder, a.conn.clientId)
    assert.equal(b.conn.role, 'observer')
    assert.equal(b.conn.holder, a.conn.clientId)

    a.conn.send('ask2')
    const prompt = await a.rec.frame(isPrompt)
    const seen = await b.rec.until(() => b.conn.pending.get(prompt.request_id))
    assert.equal(seen.canAnswer, false)
    assert.deepEqual(seen.input, {})
    assert.equal(a.conn.pending.get(prompt.request_id)?.canAnswer, true)

    b.conn.takeOver()
    await b.rec.until(() => b.conn.role === 'controller' && b.conn.holder === b.conn.clientId, 15_000, 'B holds')
    await a.rec.until(() => a.conn.role === 'observer' && a.conn.holder === b.conn.clientId, 15_000, 'A observes')
    assert.deepEqual(a.rec.roles.at(-1), { role: 'observer', holder: b.conn.clientId })
    const full = await b.rec.until(() => { const r = b.conn.pending.get(prompt.request_id); return r?.canAnswer === true && r })
    assert.deepEqual(full.input, prompt.request.input)
    assert.equal(a.conn.pending.get(prompt.request_id)?.canAnswer, false)

    b.conn.allow(prompt.request_id)
    await a.rec.until(() => a.rec.resolved.find((r) => r.requestId === prompt.request_id))
    assert.deepEqual(a.rec.resolved.at(-1), { requestId: prompt.request_id, decision: 'allowed', by: b.conn.clientId })
    // permission_resolved may come before the fake CLI has logged its stdin.
    assert.equal((await eventually(() => answerOnStdin(gw, id, prompt.request_id))).response.response.behavior, 'allow')
    assert.ok(b.rec.frames.every((f, i) => f.seq === i + 1), 'B\'s frames stay contiguous across the take-over')

    // The second prompt of ask2: A no longer holds the session, so its answer goes over HTTP.
    const second = await a.rec.until(() => [...a.conn.pending.values()].find((r) => r.requestId !== prompt.request_id))
    a.conn.deny(second.requestId, 'from the observer')
    await b.rec.until(() => b.rec.resolved.find((r) => r.requestId === second.requestId))
    assert.deepEqual(b.rec.resolved.at(-1), { requestId: second.requestId, decision: 'denied', by: 'http:tenant-a' })
    assert.equal((await eventually(() => answerOnStdin(gw, id, second.requestId))).response.response.message, 'from the observer')
    assert.equal(a.rec.errors.length, 0)
  })
})

describe('client: control requests', () => {
  it('interrupt, setModel and setPermissionMode resolve on the CLI\'s answer; a refused one rejects with its code', async (t) => {
    const { gw, client, id } = await setup(t)
    const { conn, rec } = connect(t, client, id)
    conn.send('slow 100 100')
    await rec.frame((f) => f.type === 'assistant' && JSON.stringify(f).includes('slow #0'))
    assert.equal(conn.turnState, 'running')
    await conn.interrupt()
    const result = await rec.frame(isResult)
    assert.equal(result.subtype, 'error_during_execution')
    assert.ok(!rec.frames.some((f) => JSON.stringify(f).includes('slow #99')))

    await conn.setModel('opus')
    await conn.setPermissionMode('plan')
    const requests = gw.stdinLines(id).filter((l) => l.type === 'control_request').map((l) => l.request)
    assert.ok(requests.some((r) => r.subtype === 'set_model' && r.model === 'opus'))
    assert.ok(requests.some((r) => r.subtype === 'set_permission_mode' && r.mode === 'plan'))

    await assert.rejects(conn.setPermissionMode('nonsense'), (err) => err instanceof ControlRequestError && err.code === 'invalid_frame')
    const observer = connect(t, client, id, { role: 'observer' })
    await observer.rec.until(() => observer.conn.state === 'open')
    await assert.rejects(observer.conn.interrupt(), (err) => err instanceof ControlRequestError && err.code === 'not_holder')
  })
})

describe('client: close codes', () => {
  it('a gateway shutting down closes with 1012: the client keeps trying (no error), and resumes where it was', async (t) => {
    const { gw, client, built, id } = await setup(t)
    const { conn, rec } = connect(t, client, id, { reconnect: { initialMs: 5, maxMs: 20 } })
    conn.send('echo before the restart')
    await rec.frame(isResult)
    const closed = new Promise<number>((resolve) => built[0]?.ws.once('close', (code: number) => resolve(code)))
    await gw.close()
    assert.equal(await closed, 1012)
    // Nothing listens any more: each attempt fails before open and is retried.
    await eventually(() => built.length >= 4, 15_000, 'further attempts')
    assert.equal(conn.state, 'reconnecting')
    assert.deepEqual(rec.errors, [])
    for (const b of built.slice(1)) assert.equal(new URL(b.url).searchParams.get('after'), String(conn.lastSeq))
  })
})

describe('client: trimmed history', () => {
  it('a resume from seqs history no longer holds reports them as one \'gap\' event, then delivers what is held, in order', async (t) => {
    const { client, id } = await setup(t, { EVENTS_MAX_PER_SESSION: '50' })
    const writer = connect(t, client, id)
    writer.conn.send('burst 150 50')
    await writer.rec.until(() => writer.conn.turnState === 'idle' && writer.rec.frames.some(isResult), 15_000, 'the burst')
    const held = await history(client, id)
    const oldest = held[0]?.seq ?? 0
    assert.ok(oldest > 2, `trimmed (oldest ${oldest})`)

    const reader = connect(t, client, id, { role: 'observer', after: 1 })
    await reader.rec.until(() => reader.conn.lastSeq >= (held.at(-1)?.seq ?? Infinity), 15_000, 'the replay')
    assert.equal(reader.rec.gaps.length, 1)
    const missing = reader.rec.gaps[0]?.missing ?? []
    assert.equal(missing[0]?.[0], 2)
    assert.equal(missing.at(-1)?.[1], oldest - 1)
    assert.deepEqual(reader.rec.frames, held, 'everything still held, once, in order')
  })
})

describe('client: keep_alive watchdog', () => {
  it('a connection with no frame for keepAliveTimeoutMs is replaced', async (t) => {
    // The gateway's keep_alive comes every minute here: the client's 300 ms watchdog fires first.
    const { client, built, id } = await setup(t, { KEEPALIVE_INTERVAL_MS: '60000' })
    const { conn, rec } = connect(t, client, id, { keepAliveTimeoutMs: 300, reconnect: { initialMs: 1, maxMs: 5 } })
    await rec.until(() => rec.hellos >= 3, 15_000, 'two replacements')
    assert.ok(built.length >= 3)
    assert.ok(rec.states.includes('reconnecting'))
    await rec.until(() => conn.state === 'open')
  })

  it('keep_alive frames keep a connection with nothing else to say', async (t) => {
    const { client, id } = await setup(t, { KEEPALIVE_INTERVAL_MS: '100' })
    const { rec } = connect(t, client, id, { keepAliveTimeoutMs: 600 })
    // 12 ticks of 100 ms: twice the watchdog's limit.
    await rec.until(() => rec.messages.filter((m) => m.type === 'keep_alive').length >= 12, 15_000, 'keep_alive frames')
    assert.equal(rec.hellos, 1)
  })
})

describe('client: REST', () => {
  it('lists, reads, pages history, lists pending prompts across sessions, answers one over HTTP, stops; errors are typed', async (t) => {
    const { client, id } = await setup(t)
    assert.ok((await client.listSessions({ limit: 10 })).sessions.some((s) => s.id === id))
    assert.equal((await client.getSession(id)).id, id)

    const { conn, rec } = connect(t, client, id)
    conn.send('ask Bash touch over-http.txt')
    const prompt = await rec.frame(isPrompt)
    const listed = (await client.pendingPermissions()).find((p) => p.request_id === prompt.request_id)
    assert.equal(listed?.session_id, id)
    assert.equal(listed?.tool_name, 'Bash')
    assert.equal(listed?.seq, prompt.seq)
    assert.match(listed?.summary ?? '', /touch over-http\.txt/)
    assert.deepEqual((await client.pendingRequests(id)).map((r) => r.request_id), [prompt.request_id])

    assert.deepEqual(await client.answerPermission(id, prompt.request_id, { behavior: 'deny', message: 'over http' }), { request_id: prompt.request_id, decision: 'denied' })
    await rec.frame(isResult)
    await assert.rejects(client.answerPermission(id, prompt.request_id, { behavior: 'allow' }),
      (err) => err instanceof GatewayRequestError && err.statusCode === 409 && err.code === 'already_resolved')
    assert.deepEqual(await client.pendingPermissions(), [])

    const page = await client.history(id, { after: 0, limit: 3 })
    assert.deepEqual(page.events.map((e) => e.seq), [1, 2, 3])
    assert.equal(page.has_more, true)
    assert.equal(page.next_after, 3)
    await rec.until(() => conn.turnState === 'idle')
    const all = await history(client, id)
    await rec.until(() => conn.lastSeq >= (all.at(-1)?.seq ?? Infinity))
    assert.deepEqual(rec.frames.slice(0, all.length), all)

    const stopped = await client.stopSession(id)
    assert.equal(stopped.id, id)
    await assert.rejects(client.getSession('00000000-0000-4000-8000-000000000000'),
      (err) => err instanceof GatewayRequestError && err.statusCode === 404 && err.code === 'session_not_found')
  })
})
