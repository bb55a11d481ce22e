/**
 * The typed client (src/client) against a real gateway with the fake CLI:
 * prompts that were open before a connection attached without replaying
 * them (`after: 'live'`, or an `after` past their seq) must show in
 * `pending`, and an answer to a prompt someone else answered first must
 * settle its promise as `already_resolved` rather than raise an error. An
 * observer's answer goes over HTTP even before its first hello (a prompt
 * known from GET /v1/permissions, answered right after connect()).
 */
import assert from 'node:assert/strict'
import { describe, it, type TestContext } from 'node:test'
import WebSocket from 'ws'
import {
  GatewayClient, type ConnectOptions, type ConnectionEvents, type PermissionRequest,
  type RecordedFrame, type SessionConnection, type WebSocketCtor
} from '../../src/client/index.js'
import { TOKEN_A, type TestGateway, eventually, gateway } from '../support/gateway.js'
import { LIMITS } from '../support/sessions.js'
import { Waiters } from '../support/waiters.js'

type Frame = Record<string, any>

/** Everything a connection emits, with waiting on it. */
class Recorder {
  readonly frames: RecordedFrame[] = []
  readonly errors: Array<ConnectionEvents['error']> = []
  readonly permissions: PermissionRequest[] = []
  readonly resolved: Array<ConnectionEvents['permissionResolved']> = []
  readonly #waiters = new Waiters()

  constructor (readonly conn: SessionConnection) {
    conn.on('frame', (f) => { this.frames.push(f); this.#waiters.wake() })
    conn.on('error', (e) => { this.errors.push(e); this.#waiters.wake() })
    conn.on('state', () => this.#waiters.wake())
    conn.on('permission', (p) => { this.permissions.push(p); this.#waiters.wake() })
    conn.on('permissionResolved', (r) => { this.resolved.push(r); this.#waiters.wake() })
  }

  until<T> (check: () => T | undefined | false, timeoutMs = 15_000, what = 'condition'): Promise<T> {
    return this.#waiters.until(check, timeoutMs, what, () => `state ${this.conn.state}, pending ${JSON.stringify([...this.conn.pending.keys()])}, errors ${JSON.stringify(this.errors.map(String))}`)
  }
}

function connect (t: TestContext, client: GatewayClient, id: string, options: ConnectOptions = {}): { conn: SessionConnection, rec: Recorder } {
  const conn = client.connect(id, options)
  t.after(() => conn.close())
  return { conn, rec: new Recorder(conn) }
}

async function setup (t: TestContext): Promise<{ gw: TestGateway, client: GatewayClient, id: string }> {
  const gw = await gateway(t, { env: LIMITS })
  const client = new GatewayClient({ url: gw.url, token: TOKEN_A, WebSocket: WebSocket as unknown as WebSocketCtor })
  const session = await client.createSession()
  t.after(() => client.stopSession(session.id).catch(() => {}))
  return { gw, client, id: session.id }
}

const isPrompt = (f: Frame): boolean => f.type === 'control_request' && f.request?.subtype === 'can_use_tool'
const answerOnStdin = (gw: TestGateway, id: string, requestId: string): Frame | undefined =>
  gw.stdinLines(id).find((l) => l.type === 'control_response' && l.response?.request_id === requestId)

/** A session with one open prompt, held by a connection that leaves it pending. */
async function openPrompt (t: TestContext): Promise<{ gw: TestGateway, client: GatewayClient, id: string, holder: { conn: SessionConnection, rec: Recorder }, prompt: Frame }> {
  const { gw, client, id } = await setup(t)
  const holder = connect(t, client, id, { onPermission: () => undefined })
  holder.conn.send('ask Bash touch pending-live.txt')
  const prompt = await holder.rec.until(() => (holder.rec.frames as Frame[]).find(isPrompt), 15_000, 'the prompt') as Frame
  return { gw, client, id, holder, prompt }
}

describe('client: prompts open before a live attach', () => {
  it('an observer attaching with after: \'live\' lists the open prompt in pending, emits \'permission\', and can deny it', async (t) => {
    const { gw, id, client, prompt } = await openPrompt(t)
    const b = connect(t, client, id, { role: 'observer', after: 'live' })
    const seen = await b.rec.until(() => b.conn.pending.get(prompt.request_id), 5_000, 'the open prompt in the observer\'s pending')
    assert.equal(seen.toolName, 'Bash')
    assert.equal(seen.canAnswer, false)
    assert.equal(seen.seq, prompt.seq)
    assert.deepEqual(b.rec.permissions.map((p) => p.requestId), [prompt.request_id])
    assert.equal(b.rec.frames.length, 0, 'no replay')
    await b.conn.deny(prompt.request_id, 'from a live observer')
    assert.equal((await eventually(() => answerOnStdin(gw, id, prompt.request_id))).response.response.message, 'from a live observer')
    await b.rec.until(() => b.conn.pending.size === 0, 15_000, 'resolved')
    assert.deepEqual(b.rec.errors, [])
  })

  it('a controller attaching with after: \'live\' takes the open prompt in full and onPermission answers it', async (t) => {
    const { gw, id, client, prompt } = await openPrompt(t)
    const asked: PermissionRequest[] = []
    const b = connect(t, client, id, { after: 'live', onPermission: (r) => { asked.push(r); return { behavior: 'allow' } } })
    await b.rec.until(() => asked.length > 0, 5_000, 'onPermission for the open prompt')
    assert.equal(asked[0]?.requestId, prompt.request_id)
    assert.equal(asked[0]?.canAnswer, true)
    assert.deepEqual(asked[0]?.input, prompt.request.input)
    assert.equal((await eventually(() => answerOnStdin(gw, id, prompt.request_id))).response.response.behavior, 'allow')
    assert.equal(asked.length, 1)
    assert.deepEqual(b.rec.errors, [])
  })
})

describe('client: answering a prompt another client answered first', () => {
  it('the holder\'s allow() resolves already_resolved, with no error event', async (t) => {
    const { client, id, holder, prompt } = await openPrompt(t)
    await client.answerPermission(id, prompt.request_id, { behavior: 'deny', message: 'someone else' })
    await holder.rec.until(() => holder.rec.resolved.find((r) => r.requestId === prompt.request_id), 15_000, 'permission_resolved')
    const outcome = await holder.conn.allow(prompt.request_id)
    assert.deepEqual(outcome, { requestId: prompt.request_id, outcome: 'already_resolved' })
    // A round trip on the same socket: an error frame about the answer would have come before its reply.
    await holder.conn.setModel('opus')
    assert.deepEqual(holder.rec.errors, [])
  })

  it('the holder\'s own answer resolves answered', async (t) => {
    const { id, holder, prompt, gw } = await openPrompt(t)
    const outcome = await holder.conn.deny(prompt.request_id, 'mine')
    assert.deepEqual(outcome, { requestId: prompt.request_id, outcome: 'answered' })
    assert.equal((await eventually(() => answerOnStdin(gw, id, prompt.request_id))).response.response.message, 'mine')
  })

  it('an observer\'s deny() (over HTTP) resolves already_resolved, with no error event', async (t) => {
    const { client, id, holder, prompt } = await openPrompt(t)
    const b = connect(t, client, id, { role: 'observer' })
    await b.rec.until(() => b.conn.pending.get(prompt.request_id), 15_000, 'the prompt')
    await holder.conn.allow(prompt.request_id)
    await b.rec.until(() => b.rec.resolved.length > 0, 15_000, 'permission_resolved')
    const outcome = await b.conn.deny(prompt.request_id, 'too late')
    assert.deepEqual(outcome, { requestId: prompt.request_id, outcome: 'already_resolved' })
    assert.deepEqual(b.rec.errors, [])
  })
})

describe('client: an observer answering before its first hello', () => {
  it('deny() right after connect({ role: \'observer\' }) is answered over HTTP, not refused as not_holder', async (t) => {
    const { gw, client, id, prompt } = await openPrompt(t)
    const b = connect(t, client, id, { role: 'observer', after: 'live' })
    assert.equal(b.conn.role, null, 'no hello yet')
    const outcome = await b.conn.deny(prompt.request_id, 'before hello')
    assert.deepEqual(outcome, { requestId: prompt.request_id, outcome: 'answered' })
    assert.equal((await eventually(() => answerOnStdin(gw, id, prompt.request_id))).response.response.message, 'before hello')
    assert.deepEqual(b.rec.errors, [])
  })
})
