/**
 * Shared steps of the history/resume tests: reading a session's whole history
 * through `GET /v1/sessions/:id/events`, and a client that drops off mid-burst
 * and comes back with `?after=<its last seq>`, the way a real one would.
 */
import assert from 'node:assert/strict'
import { it } from 'node:test'
import { isHello } from '../support/frames.js'
import { type TestClient, type TestGateway, TOKEN_A, eventually } from '../support/gateway.js'

/** Every recorded frame of a session, paging with `limit`, checking the paging fields on the way. */
export async function readHistory (gw: TestGateway, sessionId: string, limit = 1000, token = TOKEN_A): Promise<any[]> {
  const all: any[] = []
  let after = 0
  for (;;) {
    const res = await gw.request('GET', `/v1/sessions/${sessionId}/events?after=${after}&limit=${limit}`, undefined, token)
    assert.equal(res.status, 200, JSON.stringify(res.body))
    const { events, has_more: hasMore, next_after: nextAfter } = res.body as { events: any[], has_more: boolean, next_after: number | null }
    assert.ok(events.length <= limit)
    if (events.length === 0) {
      assert.equal(hasMore, false)
      assert.equal(nextAfter, null)
      return all
    }
    assert.equal(nextAfter, events[events.length - 1].seq)
    all.push(...events)
    if (!hasMore) return all
    after = nextAfter as number
  }
}

/** The session's current last_seq (REST). */
export async function lastSeq (gw: TestGateway, sessionId: string): Promise<number> {
  const res = await gw.request('GET', `/v1/sessions/${sessionId}`)
  assert.equal(res.status, 200)
  return res.body.last_seq as number
}

/**
 * Waits until the turn whose frames start at index `from` of `client.frames`
 * is over: its result relayed, the CLI idle again, and every seq assigned so
 * far received by `client`. Returns that last seq.
 */
export async function settled (gw: TestGateway, sessionId: string, client: TestClient, timeoutMs = 20_000, from = 0): Promise<number> {
  await client.waitFor((f) => f.type === 'result', timeoutMs, from)
  await client.waitFor((f) => f.type === 'system' && f.subtype === 'session_state_changed' && f.state === 'idle', timeoutMs, from)
  const last = await lastSeq(gw, sessionId)
  await client.until(() => client.seqFrames.some((f) => f.seq === last), timeoutMs, `seq ${last}`)
  return last
}

/** Sends a prompt as `client` (the holder, once its hello is in) and waits for the turn to settle. Returns the last seq. */
export async function turn (gw: TestGateway, sessionId: string, client: TestClient, prompt: string, timeoutMs = 20_000): Promise<number> {
  await hello(client)
  const from = client.frames.length
  client.sendUser(prompt)
  return await settled(gw, sessionId, client, timeoutMs, from)
}

/** Far past any loopback buffers (tens of MB): a bound that never ends a stalled client fails here instead of hanging. */
const MAX_TURNS = 400

/**
 * The holder prompts `prompt` turn after turn until `done()`, each turn
 * settled (its frames read by the holder and by every client in `readers`)
 * before the next; returns the last seq. For tests of slow consumers: their
 * clients read in this process, between the gateway's own work, and sent as
 * one burst of megabytes the CLI outran them on a loaded machine, so the
 * gateway, rightly, ended the reading holder too as a slow consumer (past the
 * loopback buffers and the budget) while the test waited on its `result`.
 * With a turn's frames below the budget, a client that reads never holds more
 * than that; a stalled client gets them all and nobody waits on it.
 */
export async function turnsUntil (gw: TestGateway, id: string, holder: TestClient, readers: TestClient[], prompt: string,
  done: (turns: number) => boolean | Promise<boolean>, what: string): Promise<number> {
  let last = 0
  for (let turns = 0; !(await done(turns)); turns++) {
    if (turns === MAX_TURNS) assert.fail(`${what}: still not after ${turns} turns of '${prompt}'`)
    const from = holder.frames.length
    holder.sendUser(prompt)
    // A closed holder, or a refused prompt (e.g. rate_limited), never sees its result: fail at once, saying so.
    const refusal = (): any => holder.frames.slice(from).find((f) => f.type === 'gateway' && f.subtype === 'error')
    await holder.until(() => holder.closeCode !== null || refusal() !== undefined || holder.frames.slice(from).some((f) => f.type === 'result'), 30_000, 'the turn to end')
    assert.equal(holder.closeCode, null, 'the holder, reading every turn, is not a slow consumer')
    assert.equal(refusal(), undefined, `turn ${turns + 1} of '${prompt}' was refused`)
    last = await settled(gw, id, holder, 30_000, from)
    for (const reader of readers) {
      await reader.until(() => reader.closeCode !== null || reader.seqFrames.some((f) => f.seq === last), 30_000, `seq ${last}`)
      assert.equal(reader.closeCode, null, 'a client reading every turn is not a slow consumer')
    }
  }
  return last
}

export interface Resumed {
  /** Frames of the first connection, in arrival order. */
  before: any[]
  /** The seq the client resumed after. */
  resumedAfter: number
  /** The second connection. */
  client: TestClient
  hello: any
}

/** The connection's hello (the first frame; clients wait for it before sending). */
export async function hello (client: TestClient): Promise<any> {
  return await client.waitFor(isHello)
}

export interface DropOptions {
  role?: 'controller' | 'observer'
  /** Called once the first connection is open (e.g. to send the prompt that starts the burst). */
  onOpen?: (client: TestClient) => void
  timeoutMs?: number
}

/**
 * Connects with `?after=0`, waits for seq `dropAt`, drops the connection
 * (terminate: no close handshake, like a network cut), and reconnects with
 * `?after=<last seq received>`. Returns both halves for checking.
 */
export async function dropAndResume (gw: TestGateway, sessionId: string, dropAt: number, options: DropOptions = {}): Promise<Resumed> {
  const role = options.role ?? 'observer'
  const timeoutMs = options.timeoutMs ?? 20_000
  const first = await gw.connect(sessionId, `after=0&role=${role}`)
  await hello(first)
  options.onOpen?.(first)
  await first.waitFor((f) => typeof f.seq === 'number' && f.seq >= dropAt, timeoutMs)
  first.terminate()
  await first.waitClose()
  const before = first.seqFrames // complete: no message is delivered after close
  const resumedAfter = before[before.length - 1].seq as number
  const client = await gw.connect(sessionId, `after=${resumedAfter}&role=${role}`)
  return { before, resumedAfter, client, hello: await hello(client) }
}

/**
 * The frames one client received over its connections, against the history:
 * the same frames, in the same order, each exactly once, and no gap.
 */
export function assertSameAsHistory (received: any[], history: any[]): void {
  const seqs = received.map((f) => f.seq)
  const dupes = seqs.filter((s, i) => seqs.indexOf(s) !== i)
  assert.deepEqual(dupes, [], 'no seq received twice')
  for (let i = 1; i < seqs.length; i++) assert.ok(seqs[i] > seqs[i - 1], `seq ${seqs[i]} after ${seqs[i - 1]}: out of order`)
  assert.deepEqual(seqs, history.map((f) => f.seq), 'received exactly the seqs in history')
  assert.deepEqual(received, history, 'received exactly the frames in history')
}

/** Waits for the session's status (REST), e.g. after its CLI exits. */
export async function statusBecomes (gw: TestGateway, sessionId: string, status: string): Promise<any> {
  return await eventually(async () => {
    const res = await gw.request('GET', `/v1/sessions/${sessionId}`)
    return res.body?.status === status ? res.body : undefined
  }, 10_000, `status ${status}`)
}

// ---- scenarios shared by the memory-store and Redis-store test files ----

/** The holder drops mid-burst and comes back with its last seq while the CLI is still producing. */
export async function holderDropsMidBurst (gw: TestGateway): Promise<void> {
  const { id } = await gw.createSession()
  const r = await dropAndResume(gw, id, 500, { role: 'controller', onOpen: (c) => c.sendUser('burst 5000') })
  assert.equal(r.hello.resume, 'ok')
  assert.equal(r.hello.role, 'controller')
  assert.equal(r.hello.oldest_seq, 1)
  const end = await settled(gw, id, r.client, 30_000)
  assert.ok(r.hello.last_seq < end, `reconnected while the CLI was producing (hello last_seq ${r.hello.last_seq}, end ${end})`)
  assert.equal(r.client.seqFrames[0].seq, r.resumedAfter + 1, 'replay starts right after the given seq')
  const history = await readHistory(gw, id)
  assert.equal(history.length, end)
  assertSameAsHistory([...r.before, ...r.client.seqFrames], history)

  // Still the holder: the next turn works and its frames follow on.
  const next = await turn(gw, id, r.client, 'echo still here')
  assert.ok(next > end)
  assertSameAsHistory([...r.before, ...r.client.seqFrames], await readHistory(gw, id))
}

/** Five observers drop at different points of one burst and all resume at once. */
export async function fiveClientsResume (gw: TestGateway): Promise<void> {
  const { id } = await gw.createSession()
  const controller = await gw.connect(id, 'after=0')
  await hello(controller)
  const from = controller.frames.length
  const drops = [150, 900, 1700, 2500, 3300]
  const resumed = drops.map((at) => dropAndResume(gw, id, at, { timeoutMs: 30_000 }))
  controller.sendUser('burst 5000')
  const results = await Promise.all(resumed)
  const end = await settled(gw, id, controller, 30_000, from)
  const history = await readHistory(gw, id)
  assertSameAsHistory(controller.seqFrames, history)
  for (const r of results) {
    assert.equal(r.hello.resume, 'ok')
    await r.client.until(() => r.client.seqFrames.some((f) => f.seq === end), 20_000, `seq ${end}`)
    assertSameAsHistory([...r.before, ...r.client.seqFrames], history)
  }
  assert.ok(results.some((r) => r.hello.last_seq < end), 'at least one client resumed while the CLI was producing')
}

/** A client comes back after the CLI has exited: it gets the rest of the history, the exit included. */
export async function resumeAfterExit (gw: TestGateway): Promise<void> {
  const { id } = await gw.createSession()
  const controller = await gw.connect(id)
  await hello(controller)
  const observer = await gw.connect(id, 'after=0&role=observer')
  await hello(observer)
  // Two queued turns: a burst, then one that makes the CLI exit with status 0.
  controller.sendUser('burst 2000')
  controller.sendUser('exit 0')
  await observer.waitFor((f) => typeof f.seq === 'number' && f.seq >= 300, 20_000)
  observer.terminate()
  await observer.waitClose()
  const before = observer.seqFrames
  const resumedAfter = before[before.length - 1].seq

  const exited = await statusBecomes(gw, id, 'exited')
  assert.equal(exited.exit.reason, 'exited')
  assert.equal(exited.exit.code, 0)
  const end = exited.last_seq as number
  assert.ok(end > resumedAfter)

  const back = await gw.connect(id, `after=${resumedAfter}&role=observer`)
  const backHello = await hello(back)
  assert.equal(backHello.resume, 'ok')
  assert.equal(backHello.status, 'exited')
  // last_seq is what has been committed (stored and relayed) so far; the rest follows live.
  assert.ok(backHello.last_seq >= resumedAfter && backHello.last_seq <= end)
  await back.until(() => back.seqFrames.some((f) => f.seq === end), 20_000, `seq ${end}`)
  const history = await readHistory(gw, id)
  assertSameAsHistory([...before, ...back.seqFrames], history)
  const last = history[history.length - 1]
  assert.equal(last.type, 'gateway')
  assert.equal(last.subtype, 'status')
  assert.equal(last.status, 'exited')
}

/** The three scenarios above as tests of the enclosing describe, on the gateway `gw()` returns once its before hook has run. */
export function resumeScenarios (gw: () => TestGateway): void {
  it('the holder drops mid-burst and resumes while the CLI is still producing: every frame once, in order', async () => {
    await holderDropsMidBurst(gw())
  })

  it('five clients drop at different points of a burst and resume at once', async () => {
    await fiveClientsResume(gw())
  })

  it('a client resumes after the CLI has exited', async () => {
    await resumeAfterExit(gw())
  })
}
