/**
 * Steps shared by the integration tests on top of the harness
 * (test/support/gateway.ts): a gateway or a session that is cleaned up when
 * the test ends, clients that wait for their hello, a holder prompting the
 * fake CLI for a permission and answering it, and reading what reached the
 * CLI's stdin.
 *
 * Absence on stdin is proved with a fence: the holder sends a control request
 * after the frames in question and waits for the CLI's answer to it. The fake
 * logs stdin before handling a line and the pipe keeps order, so anything
 * written before the fence is in the log by then.
 */
import { randomUUID } from 'node:crypto'
import type { TestContext } from 'node:test'
import { type Frame, isHello, isHook, isPrompt } from './frames.js'
import type { TestClient, TestGateway } from './gateway.js'

// The harness's one way to get a gateway, re-exported for the tests that take their steps from here.
export { gateway } from './gateway.js'

/** Room for bursts, polling and many sessions (names unknown to the config are ignored). */
export const LIMITS = { RATE_LIMIT_PER_MINUTE: '100000', WS_MAX_FRAMES_PER_SEC: '100000', MAX_SESSIONS_PER_TENANT: '1000' }

/** Connects to a session and waits for `hello`; the client is terminated when the test ends. */
export async function client (gw: TestGateway, t: TestContext, id: string, query = ''): Promise<TestClient> {
  const c = await gw.connect(id, query)
  t.after(() => c.terminate())
  await c.waitFor(isHello)
  return c
}

export interface HolderOptions {
  /** Body of POST /v1/sessions. */
  body?: Record<string, unknown>
  /** Query of the holder's connection, e.g. `after=0`. */
  query?: string
}

/** A new session and its holder (hello received); the holder is terminated when the test ends. */
export async function holderOf (gw: TestGateway, t: TestContext, options: HolderOptions = {}): Promise<{ id: string, pid: number, holder: TestClient }> {
  const created = await gw.createSession(options.body ?? {})
  const holder = await client(gw, t, created.id, options.query ?? '')
  return { id: created.id as string, pid: created.pid, holder }
}

export interface Opened {
  id: string
  /** Connects and waits for `hello`; the client is terminated when the test ends. */
  connect: (query?: string) => Promise<{ client: TestClient, hello: Frame }>
}

/** A fresh session for one test; its clients are closed and its CLI stopped (DELETE) when the test ends. */
export async function openSession (gw: TestGateway, t: TestContext): Promise<Opened> {
  const session = await gw.createSession()
  const clients: TestClient[] = []
  t.after(async () => {
    for (const c of clients) c.terminate()
    await gw.request('DELETE', `/v1/sessions/${session.id}`)
  })
  return {
    id: session.id,
    async connect (query = '') {
      const client = await gw.connect(session.id, query)
      clients.push(client)
      const hello = await client.waitFor(isHello)
      return { client, hello }
    }
  }
}

export interface Setup {
  id: string
  /** The controller that holds the session. */
  holder: TestClient
  /** The holder's client_id (from its hello). */
  holderId: string
  observer: TestClient
  /** Path of the session's pending requests: `/v1/sessions/<id>/permissions`. */
  permissions: string
  /** Connects another client (waiting for its hello), closed when the test ends. */
  connect: (query?: string) => Promise<TestClient>
}

/** A session with a holder and an observer (both past their hello); cleaned up when the test ends. */
export async function setup (gw: TestGateway, t: TestContext): Promise<Setup> {
  const s = await openSession(gw, t)
  const { client: holder, hello } = await s.connect()
  const { client: observer } = await s.connect('role=observer')
  return {
    id: s.id,
    holder,
    holderId: hello.client_id,
    observer,
    permissions: `/v1/sessions/${s.id}/permissions`,
    connect: async (query = '') => (await s.connect(query)).client
  }
}

/**
 * Sends `text` as the holder and waits for the control request it makes the
 * fake CLI send (among the frames received after sending): by default a hook
 * callback for the prompt `hook`, a can_use_tool prompt for anything else.
 */
export async function ask (holder: TestClient, text = 'ask', isRequest: (f: Frame) => boolean = text === 'hook' ? isHook : isPrompt): Promise<Frame> {
  const before = holder.frames.length
  holder.sendUser(text)
  return await holder.waitFor(isRequest, 10_000, before)
}

/** A success control_response from `c` for a request. */
export function answer (c: TestClient, requestId: string, response: Record<string, unknown>): void {
  c.send({ type: 'control_response', response: { subtype: 'success', request_id: requestId, response } })
}

export interface FenceOptions {
  /** How long to wait for the CLI's answer (default 10 s). */
  timeoutMs?: number
  /** Append a random UUID to the request id (when the test itself sends ids like `fence-1`). */
  unique?: boolean
}

let fences = 0
/** Returns once the CLI has read (and logged) everything written to its stdin before now; resolves with the fence's request id. */
export async function fence (holder: TestClient, options: FenceOptions = {}): Promise<string> {
  const id = `fence-${++fences}${options.unique === true ? `-${randomUUID()}` : ''}`
  holder.send({ type: 'control_request', request_id: id, request: { subtype: 'mcp_status' } })
  await holder.waitFor((f) => f.type === 'control_response' && f.response?.request_id === id, options.timeoutMs ?? 10_000)
  return id
}

/** The control_responses for a request on the fake CLI's stdin (so far). */
export const answersTo = (gw: TestGateway, sessionId: string, requestId: string): Frame[] =>
  gw.stdinLines(sessionId).filter((l) => l.type === 'control_response' && l.response?.request_id === requestId)
