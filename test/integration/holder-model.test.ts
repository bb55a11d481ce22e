/**
 * The holder model over real WebSockets, with the fake CLI: at most one
 * client holds a session; the newest controller takes it, the previous
 * holder becomes an observer and is told; only the holder reaches the CLI
 * (checked on the fake's stdin log); CLI control requests go to the holder in
 * full and to observers as `request_pending`; a pending prompt waits for
 * whoever holds next; client control requests are forwarded and answered.
 *
 * Absence on stdin is proved with a fence: the holder sends a control request
 * after the refused frames and waits for the CLI's answer to it. The fake logs
 * stdin before handling a line and the pipe keeps order, so anything written
 * before the fence is in the log by then.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { MemoryStore } from '../../src/store/memory.js'
import type { StoredEvent } from '../../src/store/store.js'
import { type Frame, isError, isPrompt, isRefusal, resolved } from '../support/frames.js'
import { type TestClient, type TestGateway, eventually, gateway, suiteScope } from '../support/gateway.js'
import { LIMITS, answersTo, fence, openSession } from '../support/sessions.js'

const holderFrames = (c: TestClient): Frame[] => c.frames.filter((f) => f.type === 'gateway' && f.subtype === 'holder')

/** Waits until the gateway has dropped a terminated client (the snapshot counts attached clients). */
async function clientsAre (gw: TestGateway, id: string, n: number): Promise<void> {
  await eventually(async () => (await gw.request('GET', `/v1/sessions/${id}`)).body.clients === n, 5000, `${n} clients attached`)
}

describe('holder model', () => {
  let gw: TestGateway
  const scope = suiteScope()
  before(async () => { gw = await gateway(scope, { env: LIMITS }) })

  it('hello tells role and holder; an observer never takes the session; the newest controller does and the previous holder is told', async (t) => {
    const s = await openSession(gw, t)
    const { client: a, hello: helloA } = await s.connect()
    assert.equal(helloA.role, 'controller')
    assert.equal(helloA.holder, helloA.client_id)

    const { client: o, hello: helloO } = await s.connect('role=observer')
    assert.equal(helloO.role, 'observer')
    assert.equal(helloO.holder, helloA.client_id, 'an observer attaching leaves the holder in place')

    const { hello: helloB } = await s.connect('role=controller')
    assert.equal(helloB.role, 'controller')
    assert.equal(helloB.holder, helloB.client_id)
    assert.notEqual(helloB.client_id, helloA.client_id)

    const toA = await a.waitFor((f) => f.subtype === 'holder')
    assert.deepEqual({ holder: toA.holder, role: toA.role }, { holder: helloB.client_id, role: 'observer' })
    assert.equal(toA.seq, undefined, 'holder changes are not part of the recorded history')
    const toO = await o.waitFor((f) => f.subtype === 'holder')
    assert.deepEqual({ holder: toO.holder, role: toO.role }, { holder: helloB.client_id, role: 'observer' })
    assert.equal(holderFrames(a).length, 1, 'no holder frame before the takeover')
    assert.equal((await gw.request('GET', `/v1/sessions/${s.id}`)).body.holder, helloB.client_id)
  })

  it('only the holder reaches the CLI: observers, chosen or displaced, get not_holder (control requests as control_response errors) and nothing is written', async (t) => {
    const s = await openSession(gw, t)
    const { client: a } = await s.connect()
    const { client: o } = await s.connect('role=observer')
    const { client: b } = await s.connect()
    await a.waitFor((f) => f.subtype === 'holder')

    for (const [who, c] of [['observer', o], ['displaced', a]] as const) {
      const before = c.frames.length
      c.sendUser(`echo from-${who}`)
      c.send({ type: 'control_request', request_id: `${who}-req`, request: { subtype: 'set_model', model: 'opus' } })
      c.send({ type: 'control_request', request_id: `${who}-int`, request: { subtype: 'interrupt' } })
      c.send({ type: 'control_response', response: { subtype: 'success', request_id: `${who}-ans`, response: { behavior: 'allow' } } })
      const errors = await c.until(() => {
        const e = c.frames.slice(before).filter(isError('not_holder'))
        return e.length === 2 ? e : undefined
      }, 5000, `2 not_holder errors to the ${who}`)
      assert.deepEqual(errors.map((e) => e.request_id), [undefined, `${who}-ans`])
      // Its own control requests are answered as the CLI would, so an SDK waiting on the id gets its answer.
      for (const id of [`${who}-req`, `${who}-int`]) {
        const refusal = await c.waitFor(isRefusal('not_holder', id), 5000, before)
        assert.equal(refusal.seq, undefined, 'a refusal is not recorded')
      }
    }

    const fenceId = await fence(b)
    const stdin = gw.stdinLines(s.id)
    assert.deepEqual(stdin.map((l) => l.request_id ?? l.type), [stdin[0]?.request_id, fenceId])
    assert.equal(stdin[0]?.request?.subtype, 'initialize')
    assert.ok(!JSON.stringify(stdin).includes('from-'), 'no user message from a non-holder reached the CLI')
  })

  it('a can_use_tool request goes to the holder in full, to observers as request_pending with the same seq, and into history', async (t) => {
    const s = await openSession(gw, t)
    const { client: a } = await s.connect()
    const { client: o } = await s.connect('role=observer')
    a.sendUser('ask')
    const prompt = await a.waitFor(isPrompt)
    const notice = await o.waitFor((f) => f.subtype === 'request_pending')
    assert.deepEqual(notice, {
      type: 'gateway',
      subtype: 'request_pending',
      seq: prompt.seq,
      request_id: prompt.request_id,
      request_subtype: 'can_use_tool',
      tool_name: 'Bash',
      display_name: 'Bash',
      description: prompt.request.description
    })
    assert.equal(o.frames.filter((f) => f.type === 'control_request').length, 0, 'the observer never gets the request itself')
    assert.equal(a.frames.filter((f) => f.subtype === 'request_pending').length, 0, 'the holder gets the request, not a notice')
    assert.equal(a.frames.find((f) => f.seq === prompt.seq - 1)?.type, 'system', 'the request takes its place in the seq order')

    // History has the CLI's frame as it was relayed to the holder.
    const history = await gw.request('GET', `/v1/sessions/${s.id}/events?after=${prompt.seq - 1}&limit=1`)
    assert.equal(history.status, 200)
    assert.deepEqual(history.body.events[0], prompt)

    // Replayed to a late observer, the request is again only a notice; to the holder reconnecting, it is the full frame.
    const { client: late } = await s.connect('role=observer&after=0')
    const replayed = await late.waitFor((f) => f.seq === prompt.seq)
    assert.deepEqual(replayed, notice)

    a.send({ type: 'control_response', response: { subtype: 'success', request_id: prompt.request_id, response: { behavior: 'allow' } } })
    for (const c of [a, o, late]) {
      const r = await c.waitFor(resolved(prompt.request_id))
      assert.equal(r.decision, 'allowed')
      assert.equal(typeof r.seq, 'number')
    }
    await a.waitFor((f) => f.type === 'result')
  })

  it('a holder that disconnects and reconnects (resuming with after=) gets the pending request again and answers it', async (t) => {
    const s = await openSession(gw, t)
    const { client: a } = await s.connect()
    a.sendUser('ask')
    const prompt = await a.waitFor(isPrompt)
    const lastSeen = Math.max(...a.seqFrames.map((f) => f.seq))
    a.terminate()
    await clientsAre(gw, s.id, 0)
    const pending = await gw.request('GET', `/v1/sessions/${s.id}/permissions`)
    assert.deepEqual(pending.body.requests.map((r: Frame) => r.request_id), [prompt.request_id], 'the prompt waits')

    const { client: a2, hello } = await s.connect(`after=${lastSeen}`)
    assert.equal(hello.role, 'controller')
    assert.deepEqual(hello.pending_requests, [prompt.request_id])
    const again = await a2.waitFor(isPrompt)
    assert.deepEqual(again, prompt, 'the same frame, same seq')

    a2.send({ type: 'control_response', response: { subtype: 'success', request_id: prompt.request_id, response: { behavior: 'allow' } } })
    assert.equal((await a2.waitFor(resolved(prompt.request_id))).decision, 'allowed')
    await a2.waitFor((f) => f.type === 'result' && f.subtype === 'success')
    assert.equal(answersTo(gw, s.id, prompt.request_id).length, 1)
    assert.equal(a2.frames.filter(isPrompt).length, 1)
  })

  it('a new controller taking over gets the pending request at attach; the displaced holder can no longer answer', async (t) => {
    const s = await openSession(gw, t)
    const { client: a } = await s.connect()
    a.sendUser('ask')
    const prompt = await a.waitFor(isPrompt)

    const { client: b, hello } = await s.connect()
    assert.deepEqual(hello.pending_requests, [prompt.request_id])
    assert.deepEqual(await b.waitFor(isPrompt), prompt)
    assert.equal((await a.waitFor((f) => f.subtype === 'holder')).role, 'observer')

    a.send({ type: 'control_response', response: { subtype: 'success', request_id: prompt.request_id, response: { behavior: 'allow' } } })
    const refused = await a.waitFor(isError('not_holder'))
    assert.equal(refused.request_id, prompt.request_id)

    b.send({ type: 'control_response', response: { subtype: 'success', request_id: prompt.request_id, response: { behavior: 'deny', message: 'no from B' } } })
    for (const c of [a, b]) assert.equal((await c.waitFor(resolved(prompt.request_id))).decision, 'denied')
    await b.waitFor((f) => f.type === 'result')
    const answers = answersTo(gw, s.id, prompt.request_id)
    assert.equal(answers.length, 1)
    assert.equal(answers[0]?.response.response.message, 'no from B')
  })

  it('when the holder leaves, the newest remaining controller is promoted, told, and given the pending request; a client that chose to observe is not', async (t) => {
    const s = await openSession(gw, t)
    const { client: a, hello: helloA } = await s.connect()
    const { client: o } = await s.connect('role=observer')
    const { client: b } = await s.connect()
    await a.waitFor((f) => f.subtype === 'holder')
    b.sendUser('ask')
    const prompt = await b.waitFor(isPrompt)
    await a.waitFor((f) => f.subtype === 'request_pending')
    await o.waitFor((f) => f.subtype === 'request_pending')
    const aBefore = a.frames.length
    const oBefore = o.frames.length

    b.terminate()
    const promoted = await a.waitFor((f) => f.subtype === 'holder', 5000, aBefore)
    assert.deepEqual({ holder: promoted.holder, role: promoted.role }, { holder: helloA.client_id, role: 'controller' })
    const redelivered = await a.waitFor(isPrompt, 5000, aBefore)
    assert.deepEqual(redelivered, prompt)
    assert.ok(a.frames.indexOf(promoted) < a.frames.indexOf(redelivered), 'told it holds before it is given the request')
    const toO = await o.waitFor((f) => f.subtype === 'holder', 5000, oBefore)
    assert.deepEqual({ holder: toO.holder, role: toO.role }, { holder: helloA.client_id, role: 'observer' })

    a.send({ type: 'control_response', response: { subtype: 'success', request_id: prompt.request_id, response: { behavior: 'allow' } } })
    assert.equal((await o.waitFor(resolved(prompt.request_id))).decision, 'allowed')
    await a.waitFor((f) => f.type === 'result')
    assert.equal(o.frames.filter(isPrompt).length, 0)

    // The last controller leaves: nobody holds; the observer is told and still cannot write.
    const oBefore2 = o.frames.length
    a.terminate()
    const none = await o.waitFor((f) => f.subtype === 'holder', 5000, oBefore2)
    assert.deepEqual({ holder: none.holder, role: none.role }, { holder: null, role: 'observer' })
    o.sendUser('echo from observer')
    await o.waitFor(isError('not_holder'), 5000, oBefore2)
  })

  it('forwards the holder\'s control requests and returns the CLI\'s answers (recorded); an unlisted subtype is refused by the gateway', async (t) => {
    const s = await openSession(gw, t)
    const { client: a } = await s.connect()
    const { client: o } = await s.connect('role=observer')
    const sent = [
      { type: 'control_request', request_id: 'c-int', request: { subtype: 'interrupt' } },
      { type: 'control_request', request_id: 'c-model', request: { subtype: 'set_model', model: 'opus' } },
      { type: 'control_request', request_id: 'c-mode', request: { subtype: 'set_permission_mode', mode: 'plan' } },
      { type: 'control_request', request_id: 'c-think', request: { subtype: 'set_max_thinking_tokens', max_thinking_tokens: 2048 } },
      { type: 'control_request', request_id: 'c-status', request: { subtype: 'mcp_status' } }
    ]
    a.send({ type: 'control_request', request_id: 'c-bogus', request: { subtype: 'no_such_subtype', x: 1 } })
    for (const f of sent) a.send(f)
    const responses: Record<string, Frame> = {}
    for (const f of sent) {
      responses[f.request_id] = await a.waitFor((r) => r.type === 'control_response' && r.response?.request_id === f.request_id)
    }
    assert.deepEqual(responses['c-int']?.response, { subtype: 'success', request_id: 'c-int', response: { still_queued: [] } })
    assert.deepEqual(responses['c-model']?.response, { subtype: 'success', request_id: 'c-model', response: { model: 'opus' } })
    assert.deepEqual(responses['c-mode']?.response, { subtype: 'success', request_id: 'c-mode', response: { mode: 'plan' } })
    assert.deepEqual(responses['c-think']?.response, { subtype: 'success', request_id: 'c-think', response: {} })
    assert.deepEqual(responses['c-status']?.response, { subtype: 'success', request_id: 'c-status', response: { mcpServers: [] } })
    // Not in CLIENT_CONTROL_ALLOW: the gateway answers it, to the sender only, and the CLI never sees it.
    const bogus = await a.waitFor(isRefusal('control_not_allowed', 'c-bogus'))
    assert.equal(bogus.seq, undefined)
    assert.match(bogus.response.error, /no_such_subtype/)

    // Each answer is recorded: it has a seq and is in history as relayed.
    const history = (await gw.request('GET', `/v1/sessions/${s.id}/events?after=0&limit=1000`)).body.events as Frame[]
    for (const r of Object.values(responses)) {
      assert.equal(typeof r.seq, 'number')
      assert.deepEqual(history.find((e) => e.seq === r.seq), r)
    }
    // Written to the CLI exactly as sent, once each.
    const stdin = gw.stdinLines(s.id)
    for (const f of sent) assert.deepEqual(stdin.filter((l) => l.request_id === f.request_id), [f])

    // The observer saw the answers but may not send control requests itself.
    await o.waitFor((r) => r.type === 'control_response' && r.response?.request_id === 'c-status')
    assert.ok(!o.frames.some((r) => r.response?.request_id === 'c-bogus'), 'a refusal goes to the sender only')
    o.send({ type: 'control_request', request_id: 'o-model', request: { subtype: 'set_model', model: 'sonnet' } })
    await o.waitFor(isRefusal('not_holder', 'o-model'))
    await fence(a)
    assert.equal(gw.stdinLines(s.id).filter((l) => l.request_id === 'o-model' || l.request_id === 'c-bogus').length, 0)
  })
})

/** A MemoryStore whose appends and reads can be held back, to open the windows between push, commit and replay. */
class GatedStore extends MemoryStore {
  #appendGate: Promise<void> | null = null
  #openAppends = (): void => {}
  #holdingReads = false
  readonly #waitingReads: Array<() => void> = []

  holdAppends (): void { this.#appendGate = new Promise((resolve) => { this.#openAppends = resolve }) }
  releaseAppends (): void { this.#appendGate = null; this.#openAppends() }
  /** From now on every read waits until released. */
  holdReads (): void { this.#holdingReads = true }
  get waitingReads (): number { return this.#waitingReads.length }
  /** Lets the oldest waiting read through; later reads still wait. */
  releaseOneRead (): void { this.#waitingReads.shift()?.() }
  releaseReads (): void {
    this.#holdingReads = false
    for (const go of this.#waitingReads.splice(0)) go()
  }

  override async append (sessionId: string, events: StoredEvent[]): Promise<void> {
    if (this.#appendGate !== null) await this.#appendGate
    return super.append(sessionId, events)
  }

  override async read (sessionId: string, after: number, limit: number): Promise<StoredEvent[]> {
    if (this.#holdingReads) await new Promise<void>((resolve) => { this.#waitingReads.push(resolve) })
    return super.read(sessionId, after, limit)
  }
}

describe('holder changes racing the event log', () => {
  let gw: TestGateway
  const store = new GatedStore({ retention: { maxEventsPerSession: 100_000, ttlSecondsAfterEnd: 0 } })
  // Gates open first: the gateway's close waits for held appends and reads. (After hooks run in order.)
  after(() => {
    store.releaseAppends()
    store.releaseReads()
  })
  const scope = suiteScope()
  before(async () => { gw = await gateway(scope, { env: LIMITS, parts: { store } }) })

  it('a controller promoted while the request is not yet stored gets it once, in seq order, after the frames before it', async (t) => {
    const s = await openSession(gw, t)
    const { client: a } = await s.connect()
    const { client: b } = await s.connect()
    await a.waitFor((f) => f.subtype === 'holder')
    await b.waitFor((f) => f.type === 'control_response') // the CLI's answer to initialize: start-up frames are committed

    store.holdAppends()
    t.after(() => store.releaseAppends())
    b.sendUser('ask')
    // The gateway knows the request (it is pending) but has not stored or relayed it yet.
    const pending = await eventually(async () => {
      const body = (await gw.request('GET', `/v1/sessions/${s.id}/permissions`)).body
      return body.requests[0] as Frame | undefined
    }, 5000, 'the request to be pending')
    assert.equal(b.frames.filter(isPrompt).length, 0)

    b.terminate()
    await eventually(async () => (await gw.request('GET', `/v1/sessions/${s.id}`)).body.clients === 1, 5000, 'B to be detached')
    await a.waitFor((f) => f.subtype === 'holder' && f.role === 'controller')
    store.releaseAppends()

    const prompt = await a.waitFor(isPrompt)
    assert.equal(prompt.request_id, pending.request_id)
    assert.equal(prompt.seq, pending.seq)
    a.send({ type: 'control_response', response: { subtype: 'success', request_id: prompt.request_id, response: { behavior: 'allow' } } })
    await a.waitFor((f) => f.type === 'result')

    assert.equal(a.frames.filter(isPrompt).length, 1, 'the request reaches the new holder once')
    const seqs = a.seqFrames.map((f) => f.seq)
    assert.deepEqual(seqs, [...seqs].sort((x, y) => x - y), 'frames reach the new holder in seq order')
    assert.equal(new Set(seqs).size, seqs.length, 'no seq twice')
  })

  it('a controller promoted while it is still being replayed to is told it holds the session, and gets the request once', async (t) => {
    const s = await openSession(gw, t)
    const { client: a } = await s.connect()
    a.sendUser('ask')
    const prompt = await a.waitFor(isPrompt)
    a.terminate()
    await eventually(async () => (await gw.request('GET', `/v1/sessions/${s.id}`)).body.clients === 0, 5000, 'A to be detached')

    store.holdReads()
    t.after(() => store.releaseReads())
    // C asks for a replay from the start: it becomes the holder, says hello, then waits on the store.
    const { client: c, hello: helloC } = await s.connect('after=0')
    assert.equal(helloC.role, 'controller')
    // D takes over (no replay), then leaves while C is still waiting for its replay: C holds again.
    const { client: d, hello: helloD } = await s.connect()
    assert.equal(helloD.role, 'controller')
    assert.equal((await c.waitFor((f) => f.subtype === 'holder')).role, 'observer')
    await d.waitFor(isPrompt)
    d.terminate()
    await eventually(async () => (await gw.request('GET', `/v1/sessions/${s.id}`)).body.holder === helloC.client_id, 5000, 'C to hold again')
    store.releaseReads()

    await c.waitFor((f) => f.seq === prompt.seq)
    c.send({ type: 'control_response', response: { subtype: 'success', request_id: prompt.request_id, response: { behavior: 'allow' } } })
    assert.equal((await c.waitFor(resolved(prompt.request_id))).decision, 'allowed')
    await c.waitFor((f) => f.type === 'result')

    const told = holderFrames(c)
    assert.deepEqual(told.at(-1), { type: 'gateway', subtype: 'holder', holder: helloC.client_id, role: 'controller' }, 'C is told it holds the session again')
    assert.equal(c.frames.filter(isPrompt).length, 1, 'the request reaches C once')
    assert.equal(c.frames.filter(isError('not_holder')).length, 0)
  })

  it('a controller that saw the request as a notice in its replay, then is promoted before the replay ends, gets it in full once', async (t) => {
    const s = await openSession(gw, t)
    const { client: a } = await s.connect()
    a.sendUser('ask')
    const prompt = await a.waitFor(isPrompt)
    // Over 1000 frames after the request, so a replay from the start takes two pages (REPLAY_PAGE is 1000).
    const n = 1000
    for (let i = 0; i < n; i++) a.send({ type: 'control_request', request_id: `think-${i}`, request: { subtype: 'set_max_thinking_tokens', max_thinking_tokens: i } })
    await a.waitFor((f) => f.type === 'control_response' && f.response?.request_id === `think-${n - 1}`, 20_000)
    a.terminate()
    await eventually(async () => (await gw.request('GET', `/v1/sessions/${s.id}`)).body.clients === 0, 5000, 'A to be detached')

    store.holdReads()
    t.after(() => store.releaseReads())
    const { client: c, hello: helloC } = await s.connect('after=0')
    await eventually(() => store.waitingReads === 1, 5000, 'C\'s first replay page to be requested')
    const { client: d } = await s.connect() // D takes over: C's first page (with the request) is rendered for an observer
    await d.waitFor(isPrompt)
    store.releaseOneRead()
    const notice = await c.waitFor((f) => f.seq === prompt.seq)
    assert.equal(notice.subtype, 'request_pending')
    await eventually(() => store.waitingReads === 1, 5000, 'C\'s second replay page to be requested')
    d.terminate()
    await eventually(async () => (await gw.request('GET', `/v1/sessions/${s.id}`)).body.holder === helloC.client_id, 5000, 'C to hold again')
    store.releaseReads()

    const full = await c.waitFor(isPrompt, 10_000)
    assert.deepEqual(full, prompt)
    c.send({ type: 'control_response', response: { subtype: 'success', request_id: prompt.request_id, response: { behavior: 'allow' } } })
    assert.equal((await c.waitFor(resolved(prompt.request_id))).decision, 'allowed')
    await c.waitFor((f) => f.type === 'result')
    assert.equal(c.frames.filter(isPrompt).length, 1, 'the request reaches C in full once')
    assert.equal(holderFrames(c).at(-1)?.role, 'controller')
  })
})
