/**
 * SessionConnection's bookkeeping over a scripted socket (no gateway): seq
 * dedupe across an overlapping replay, gap reports, the outbox (queued
 * until hello, control requests settled by request_id, a resent copy's
 * duplicate_request_id ignored), prompts redelivered to a holder, and the
 * close-code policy with the clock mocked (1013's retry_after_ms, 4029,
 * an upgrade refused before open).
 */
import assert from 'node:assert/strict'
import { describe, it, type TestContext } from 'node:test'
import {
  ConnectionError, ControlRequestError, GatewayClient, GatewayRequestError, type ConnectOptions,
  type ConnectionEvents, type SessionConnection, type WebSocketCtor
} from '../../src/client/index.js'

type Frame = Record<string, any>

/** A socket the test drives: open it, feed it frames, close it with a code. */
class ScriptedSocket {
  static built: ScriptedSocket[] = []
  /** Called with each new socket (after the client has added its listeners). */
  static onBuilt: ((socket: ScriptedSocket) => void) | null = null
  readyState = 0
  readonly sent: Frame[] = []
  readonly #listeners = new Map<string, Array<(event: any) => void>>()
  closedWith: number | undefined | null = null

  constructor (readonly url: string, readonly protocols?: string | string[], readonly options?: unknown) {
    ScriptedSocket.built.push(this)
    queueMicrotask(() => ScriptedSocket.onBuilt?.(this))
  }

  addEventListener (type: string, listener: (event: any) => void): void {
    this.#listeners.set(type, [...(this.#listeners.get(type) ?? []), listener])
  }

  send (data: string): void { this.sent.push(JSON.parse(data)) }
  close (code?: number): void { this.closedWith = code; this.readyState = 3 }
  terminate (): void { this.closedWith = undefined; this.readyState = 3 }

  get after (): string | null { return new URL(this.url).searchParams.get('after') }

  open (): void { this.readyState = 1; this.#fire('open', {}) }
  frame (frame: Frame): void { this.#fire('message', { data: JSON.stringify(frame) }) }
  hello (fields: Frame = {}): void {
    this.frame({ type: 'gateway', subtype: 'hello', session_id: 's1', client_id: `c${ScriptedSocket.built.indexOf(this)}`, role: 'controller', holder: `c${ScriptedSocket.built.indexOf(this)}`, status: 'running', last_seq: 0, resume: 'ok', oldest_seq: 1, store: 'ok', pending_requests: [], ...fields })
  }

  drop (code: number, reason = ''): void { this.readyState = 3; this.#fire('close', { code, reason }) }
  #fire (type: string, event: unknown): void { for (const l of this.#listeners.get(type) ?? []) l(event) }
}

/** A fetch answering GET /v1/sessions/:id with `status` (the refused-upgrade probe). */
function fakeFetch (status: number, body: Frame): typeof fetch {
  return (async () => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } })) as typeof fetch
}

function connection (t: TestContext, options: ConnectOptions = {}, fetchImpl = fakeFetch(200, { id: 's1' })): { conn: SessionConnection, events: Array<[string, unknown]>, socket: () => ScriptedSocket } {
  ScriptedSocket.built = []
  const client = new GatewayClient({ url: 'http://gw.test', token: 'tok', fetch: fetchImpl, WebSocket: ScriptedSocket as unknown as WebSocketCtor })
  const conn = client.connect('s1', { reconnect: { initialMs: 10, maxMs: 10, jitter: 0 }, ...options })
  t.after(() => conn.close())
  const events: Array<[string, unknown]> = []
  for (const name of ['frame', 'gap', 'error', 'state', 'permission', 'role'] as Array<keyof ConnectionEvents>) conn.on(name, (p) => events.push([name, p]))
  return { conn, events, socket: () => ScriptedSocket.built.at(-1) as ScriptedSocket }
}

const seqsOf = (events: Array<[string, unknown]>): number[] => events.filter(([n]) => n === 'frame').map(([, f]) => (f as Frame).seq)
const text = (seq: number): Frame => ({ seq, type: 'assistant', message: { content: [{ type: 'text', text: `#${seq}` }] } })

describe('SessionConnection (scripted socket)', () => {
  it('resumes with after=<last seq> and drops replayed frames it already delivered', (t) => {
    t.mock.timers.enable({ apis: ['setTimeout', 'Date'] })
    const { conn, events, socket } = connection(t)
    assert.equal(socket().after, '0')
    socket().open()
    socket().hello({ last_seq: 0 })
    for (const s of [1, 2, 3]) socket().frame(text(s))
    socket().drop(1006)
    assert.equal(conn.state, 'reconnecting')
    t.mock.timers.tick(10)
    assert.equal(ScriptedSocket.built.length, 2)
    assert.equal(socket().after, '3')
    socket().open()
    socket().hello({ last_seq: 4 })
    for (const s of [2, 3, 3, 4, 4, 5]) socket().frame(text(s))
    assert.deepEqual(seqsOf(events), [1, 2, 3, 4, 5])
    assert.equal(conn.lastSeq, 5)
    assert.equal(events.filter(([n]) => n === 'gap').length, 0)
  })

  it('reports the hello\'s gap once, and a jump nobody announced', (t) => {
    const { events, socket } = connection(t, { after: 1 })
    socket().open()
    socket().hello({ resume: 'gap', last_seq: 9, missing_from: 2, missing_to: 4, missing: [[2, 4]] })
    socket().frame(text(5))
    socket().frame(text(8))
    assert.deepEqual(events.filter(([n]) => n === 'gap').map(([, p]) => p), [{ missing: [[2, 4]] }, { missing: [[6, 7]] }])
    assert.deepEqual(seqsOf(events), [5, 8])
  })

  it('queues sends until hello, settles control requests by request_id, ignores a resent copy\'s duplicate_request_id', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout', 'Date'] })
    const { conn, socket } = connection(t)
    const uuid = conn.send('hello there')
    const model = conn.setModel('opus')
    socket().open()
    assert.equal(socket().sent.length, 0, 'nothing before hello')
    socket().hello({ last_seq: 0 })
    assert.deepEqual(socket().sent.map((f) => f.type), ['user', 'control_request'])
    assert.equal(socket().sent[0]?.uuid, uuid)
    const requestId = socket().sent[1]?.request_id as string

    // The connection drops before the answer: after the next replay both go out again (the gateway dedupes the uuid).
    socket().drop(1012)
    t.mock.timers.tick(10)
    socket().open()
    socket().hello({ last_seq: 2 })
    assert.equal(socket().sent.length, 0, 'resends wait for the replay to catch up')
    socket().frame({ seq: 1, type: 'gateway', subtype: 'user_message', client_id: 'c0', uuid, message: { role: 'user', content: 'hello there' }, parent_tool_use_id: null })
    socket().frame(text(2))
    assert.deepEqual(socket().sent.map((f) => f.type), ['control_request'], 'the confirmed user message is not resent')
    assert.equal(socket().sent[0]?.request_id, requestId)
    socket().frame({ type: 'control_response', response: { subtype: 'error', request_id: requestId, error: 'in flight', code: 'duplicate_request_id' } })
    socket().frame({ seq: 3, type: 'control_response', response: { subtype: 'success', request_id: requestId, response: { model: 'opus' } } })
    await model

    const mode = conn.setPermissionMode('nonsense')
    const id2 = socket().sent.at(-1)?.request_id
    socket().frame({ type: 'control_response', response: { subtype: 'error', request_id: id2, error: 'bad mode', code: 'invalid_frame' } })
    await assert.rejects(mode, (err) => err instanceof ControlRequestError && err.code === 'invalid_frame' && err.requestId === id2)
    const pending = conn.interrupt()
    conn.close()
    await assert.rejects(pending, (err) => err instanceof ControlRequestError && err.code === 'connection_closed')
  })

  it('a prompt handed out again (same seq) reaches onPermission once, and an answer already given is sent again', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout', 'Date'] })
    const asked: string[] = []
    const { conn, events, socket } = connection(t, { onPermission: (r) => { asked.push(r.requestId); return undefined } })
    const prompt = { seq: 1, type: 'control_request', request_id: 'p1', request: { subtype: 'can_use_tool', tool_name: 'Bash', input: { command: 'ls' }, permission_suggestions: [{ type: 'setMode', mode: 'acceptEdits', destination: 'session' }], tool_use_id: 't1' } }
    socket().open()
    socket().hello()
    socket().frame(prompt)
    socket().frame(prompt)
    assert.deepEqual(asked, ['p1'])
    assert.equal(events.filter(([n]) => n === 'permission').length, 1)
    conn.alwaysAllow('p1')
    assert.deepEqual(socket().sent.at(-1), { type: 'control_response', response: { subtype: 'success', request_id: 'p1', response: { behavior: 'allow', updatedPermissions: prompt.request.permission_suggestions, updatedInput: { command: 'ls' } } } })
    socket().drop(1006)
    t.mock.timers.tick(10)
    socket().open()
    socket().hello({ last_seq: 1, pending_requests: ['p1'] })
    socket().frame(prompt)
    assert.equal(socket().sent.at(-1)?.response?.request_id, 'p1', 'the kept answer goes again')
    assert.deepEqual(asked, ['p1'])
    socket().frame({ type: 'gateway', subtype: 'error', code: 'already_resolved', message: 'x', request_id: 'p1' })
    assert.equal(events.filter(([n]) => n === 'error').length, 0, 'the expected refusal of a resent answer is not an error')
    socket().frame({ seq: 2, type: 'gateway', subtype: 'permission_resolved', request_id: 'p1', request_subtype: 'can_use_tool', decision: 'allowed', by: 'c0' })
    assert.equal(conn.pending.size, 0)
  })

  it('1013 after a hello `unavailable` waits retry_after_ms before trying again with the same after', (t) => {
    t.mock.timers.enable({ apis: ['setTimeout', 'Date'] })
    const { conn, socket } = connection(t, { after: 7 })
    socket().open()
    socket().hello({ resume: 'unavailable', retry_after_ms: 500 })
    assert.equal(conn.state, 'connecting')
    socket().drop(1013)
    t.mock.timers.tick(499)
    assert.equal(ScriptedSocket.built.length, 1)
    t.mock.timers.tick(1)
    assert.equal(ScriptedSocket.built.length, 2)
    assert.equal(socket().after, '7')
  })

  it('4029 (flood) stops with a ConnectionError and no new socket', (t) => {
    t.mock.timers.enable({ apis: ['setTimeout', 'Date'] })
    const { conn, events, socket } = connection(t)
    socket().open()
    socket().hello()
    socket().drop(4029, 'frame flood')
    t.mock.timers.tick(1000)
    assert.equal(conn.state, 'closed')
    assert.equal(ScriptedSocket.built.length, 1)
    const err = events.find(([n]) => n === 'error')?.[1]
    assert.ok(err instanceof ConnectionError && err.code === 'policy_close' && err.closeCode === 4029)
  })

  it('an upgrade refused before open is explained by the HTTP probe: 401 stops, 429 retries', async (t) => {
    const refused = connection(t, {}, fakeFetch(401, { statusCode: 401, code: 'unauthorized', message: 'Missing or invalid credentials' }))
    refused.socket().drop(1006)
    const err = await new Promise<unknown>((resolve) => refused.conn.on('error', resolve))
    assert.ok(err instanceof GatewayRequestError && err.statusCode === 401 && err.code === 'unauthorized')
    assert.equal(refused.conn.state, 'closed')
    assert.equal(ScriptedSocket.built.length, 1)

    const busy = connection(t, {}, fakeFetch(429, { statusCode: 429, code: 'too_many_clients', message: 'full' }))
    const second = new Promise<void>((resolve) => { ScriptedSocket.onBuilt = () => { if (ScriptedSocket.built.length === 2) resolve() } })
    t.after(() => { ScriptedSocket.onBuilt = null })
    busy.socket().drop(1006)
    await second
    assert.equal(ScriptedSocket.built.length, 2, 'tried again')
    assert.equal(busy.conn.state, 'connecting')
  })

  it('the watchdog replaces a socket silent for keepAliveTimeoutMs; frames keep it', (t) => {
    t.mock.timers.enable({ apis: ['setTimeout', 'Date'] })
    const { socket } = connection(t, { keepAliveTimeoutMs: 1000 })
    socket().open()
    socket().hello()
    t.mock.timers.tick(900)
    socket().frame({ type: 'keep_alive' })
    t.mock.timers.tick(900)
    assert.equal(ScriptedSocket.built.length, 1, 'a keep_alive 900 ms in reset the clock')
    t.mock.timers.tick(100)
    assert.equal(ScriptedSocket.built[0]?.closedWith, undefined, 'terminated')
    t.mock.timers.tick(10)
    assert.equal(ScriptedSocket.built.length, 2)
  })
})
