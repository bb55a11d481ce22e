/**
 * The holder answering CLI permission prompts over its WebSocket: what is
 * written to the CLI (the exact control_response on the fake's stdin), what
 * every client is told (`permission_resolved`, recorded with a seq), the
 * first-answer-wins rule, and the frame order a holder sees compared with the
 * recorded transcripts of the real CLI 2.1.332 (allow, deny).
 */
import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, it, type TestContext } from 'node:test'
import { fileURLToPath } from 'node:url'
import { type TestClient, type TestGateway, startGateway } from '../support/gateway.js'

type Frame = Record<string, any>

/** Room for the polling below (names unknown to the config are ignored). */
const LIMITS = { RATE_LIMIT_PER_MINUTE: '100000', WS_MAX_FRAMES_PER_SEC: '100000', MAX_SESSIONS_PER_TENANT: '1000' }
const RECORDED = fileURLToPath(new URL('../fixtures/recorded/claude-code-2.1.332/', import.meta.url))
const DEFAULT_DENY = 'The user denied this tool use.'

const isHello = (f: Frame): boolean => f.type === 'gateway' && f.subtype === 'hello'
const isPrompt = (f: Frame): boolean => f.type === 'control_request' && f.request?.subtype === 'can_use_tool'
const isResult = (f: Frame): boolean => f.type === 'result'
const isError = (code: string) => (f: Frame): boolean => f.type === 'gateway' && f.subtype === 'error' && f.code === code
const resolved = (requestId: string) => (f: Frame): boolean =>
  f.type === 'gateway' && f.subtype === 'permission_resolved' && f.request_id === requestId

/** The labels of INDEX.md (type, /subtype of the message or its request/response, :state), plus gateway frames. */
function label (m: Frame): string {
  if (m.type === 'gateway') return `gateway/${String(m.subtype)}${typeof m.decision === 'string' ? `:${m.decision}` : ''}`
  const sub = m.subtype ?? m.response?.subtype ?? m.request?.subtype
  let s = String(m.type)
  if (typeof sub === 'string' && m.type !== 'assistant' && m.type !== 'user') s += `/${sub}`
  if (m.subtype === 'session_state_changed') s += `:${String(m.state)}`
  return s
}

/** Labels from the first can_use_tool request to the first result after it. */
function promptToResult (frames: Frame[]): string[] {
  const start = frames.findIndex(isPrompt)
  const end = frames.findIndex((f, i) => i > start && isResult(f))
  assert.ok(start >= 0 && end > start, 'a prompt and a result after it')
  return frames.slice(start, end + 1).map(label)
}

/** The same window in a recorded stdout of the real CLI; the inline copy keeps the test usable without the fixtures. */
function referenceWindow (name: string, fallback: string[]): string[] {
  const file = join(RECORDED, `${name}.stdout.ndjson`)
  if (!existsSync(file)) return fallback
  const lines = readFileSync(file, 'utf8').split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as Frame)
  return promptToResult(lines)
}

function sessionCwd (gw: TestGateway, sessionId: string): string {
  return join(gw.dataDir, 'workspaces', 'tenant-a', sessionId)
}

const answersTo = (gw: TestGateway, sessionId: string, requestId: string): Frame[] =>
  gw.stdinLines(sessionId).filter((l) => l.type === 'control_response' && l.response?.request_id === requestId)

interface Setup {
  id: string
  holder: TestClient
  holderId: string
  observer: TestClient
}

/** A session with a holder and an observer; cleaned up when the test ends. */
async function setup (gw: TestGateway, t: TestContext): Promise<Setup> {
  const session = await gw.createSession()
  const holder = await gw.connect(session.id)
  const observer = await gw.connect(session.id, 'role=observer')
  t.after(async () => {
    holder.terminate()
    observer.terminate()
    await gw.request('DELETE', `/v1/sessions/${session.id}`)
  })
  const hello = await holder.waitFor(isHello)
  await observer.waitFor(isHello)
  return { id: session.id, holder, holderId: hello.client_id, observer }
}

async function ask (holder: TestClient, text = 'ask'): Promise<Frame> {
  const before = holder.frames.length
  holder.sendUser(text)
  return holder.waitFor(isPrompt, 10_000, before)
}

function answer (c: TestClient, requestId: string, response: Record<string, unknown>): void {
  c.send({ type: 'control_response', response: { subtype: 'success', request_id: requestId, response } })
}

let fences = 0
/** Returns once the CLI has read (and logged) everything written to its stdin before now. */
async function fence (holder: TestClient): Promise<void> {
  const id = `fence-${++fences}`
  holder.send({ type: 'control_request', request_id: id, request: { subtype: 'mcp_status' } })
  await holder.waitFor((f) => f.type === 'control_response' && f.response?.request_id === id)
}

describe('answering permission prompts over the WebSocket', () => {
  let gw: TestGateway
  before(async () => { gw = await startGateway({ env: LIMITS }) })
  after(async () => { await gw.close() })

  it('allow without updatedInput: the request\'s own input and its tool_use_id go to the CLI, once; the tool runs; every client is told', async (t) => {
    const { id, holder, holderId, observer } = await setup(gw, t)
    const prompt = await ask(holder)
    answer(holder, prompt.request_id, { behavior: 'allow' })
    const result = await holder.waitFor(isResult)
    assert.equal(result.subtype, 'success')

    assert.deepEqual(answersTo(gw, id, prompt.request_id), [{
      type: 'control_response',
      response: {
        subtype: 'success',
        request_id: prompt.request_id,
        response: { behavior: 'allow', updatedInput: prompt.request.input, toolUseID: prompt.request.tool_use_id }
      }
    }])
    assert.ok(existsSync(join(sessionCwd(gw, id), 'fake-created.txt')), 'the allowed Bash touch ran in the session folder')

    const toHolder = await holder.waitFor(resolved(prompt.request_id))
    const toObserver = await observer.waitFor(resolved(prompt.request_id))
    assert.deepEqual(toHolder, toObserver)
    assert.deepEqual(toHolder, {
      type: 'gateway',
      subtype: 'permission_resolved',
      seq: prompt.seq + 1,
      request_id: prompt.request_id,
      request_subtype: 'can_use_tool',
      decision: 'allowed',
      by: holderId
    })
    const history = await gw.request('GET', `/v1/sessions/${id}/events?after=${prompt.seq}&limit=1`)
    assert.deepEqual(history.body.events[0], toHolder, 'recorded in history')
  })

  it('allow: the holder sees the frames of the recorded allow transcript, with permission_resolved right after the request', async (t) => {
    const { holder, observer } = await setup(gw, t)
    const prompt = await ask(holder)
    answer(holder, prompt.request_id, { behavior: 'allow' })
    await holder.waitFor(isResult)
    await observer.waitFor(isResult)
    const reference = referenceWindow('allow', ['control_request/can_use_tool', 'system/session_state_changed:running', 'user', 'assistant', 'result/success'])
    assert.deepEqual(promptToResult(holder.frames), [reference[0], 'gateway/permission_resolved:allowed', ...reference.slice(1)])
    const observed = observer.seqFrames
    const from = observed.findIndex((f) => f.seq === prompt.seq)
    assert.deepEqual(observed.slice(from, from + 2).map(label), ['gateway/request_pending', 'gateway/permission_resolved:allowed'])
  })

  it('allow with updatedInput: the holder\'s input is what runs', async (t) => {
    const { id, holder } = await setup(gw, t)
    const prompt = await ask(holder)
    const updatedInput = { command: 'touch chosen-by-holder.txt', description: 'edited' }
    answer(holder, prompt.request_id, { behavior: 'allow', updatedInput })
    await holder.waitFor(isResult)
    assert.deepEqual(answersTo(gw, id, prompt.request_id).map((l) => l.response.response), [
      { behavior: 'allow', updatedInput, toolUseID: prompt.request.tool_use_id }
    ])
    assert.ok(existsSync(join(sessionCwd(gw, id), 'chosen-by-holder.txt')))
    assert.ok(!existsSync(join(sessionCwd(gw, id), 'fake-created.txt')), 'the original input did not run')
  })

  it('deny without message: a default message and the tool_use_id; the frames follow the recorded deny transcript', async (t) => {
    const { id, holder, observer } = await setup(gw, t)
    const prompt = await ask(holder)
    answer(holder, prompt.request_id, { behavior: 'deny' })
    await holder.waitFor(isResult)
    assert.deepEqual(answersTo(gw, id, prompt.request_id), [{
      type: 'control_response',
      response: {
        subtype: 'success',
        request_id: prompt.request_id,
        response: { behavior: 'deny', message: DEFAULT_DENY, toolUseID: prompt.request.tool_use_id }
      }
    }])
    const toolResult = holder.frames.find((f) => f.type === 'user' && f.message?.content?.[0]?.type === 'tool_result')
    assert.equal(toolResult?.message.content[0].content, DEFAULT_DENY)
    assert.ok(!existsSync(join(sessionCwd(gw, id), 'fake-created.txt')))
    assert.equal((await observer.waitFor(resolved(prompt.request_id))).decision, 'denied')

    const reference = referenceWindow('deny', ['control_request/can_use_tool', 'system/session_state_changed:running', 'user', 'assistant', 'result/success'])
    assert.deepEqual(promptToResult(holder.frames), [reference[0], 'gateway/permission_resolved:denied', ...reference.slice(1)])
  })

  it('deny with a message and interrupt: the message reaches the CLI as given and the turn ends', async (t) => {
    const { id, holder } = await setup(gw, t)
    const prompt = await ask(holder)
    answer(holder, prompt.request_id, { behavior: 'deny', message: 'Not in prod, please', interrupt: true })
    const result = await holder.waitFor(isResult)
    assert.equal(result.subtype, 'error_during_execution')
    assert.deepEqual(answersTo(gw, id, prompt.request_id).map((l) => l.response.response), [
      { behavior: 'deny', message: 'Not in prod, please', interrupt: true, toolUseID: prompt.request.tool_use_id }
    ])
    assert.equal((await holder.waitFor(resolved(prompt.request_id))).decision, 'denied')
  })

  it('an error control_response counts as a denial', async (t) => {
    const { id, holder } = await setup(gw, t)
    const prompt = await ask(holder)
    holder.send({ type: 'control_response', response: { subtype: 'error', request_id: prompt.request_id, error: 'client crashed' } })
    await holder.waitFor(isResult)
    assert.deepEqual(answersTo(gw, id, prompt.request_id), [
      { type: 'control_response', response: { subtype: 'error', request_id: prompt.request_id, error: 'client crashed' } }
    ])
    assert.equal((await holder.waitFor(resolved(prompt.request_id))).decision, 'denied')
  })

  it('unknown request ids, malformed answers and second answers are refused; only the first valid answer is written', async (t) => {
    const { id, holder, observer } = await setup(gw, t)
    const prompt = await ask(holder)

    answer(holder, 'no-such-request', { behavior: 'allow' })
    assert.equal((await holder.waitFor(isError('unknown_request'))).request_id, 'no-such-request')

    answer(holder, prompt.request_id, { behavior: 'maybe' })
    const malformed = await holder.waitFor(isError('invalid_frame'))
    assert.equal(malformed.request_id, prompt.request_id)
    const stillPending = await gw.request('GET', `/v1/sessions/${id}/permissions`)
    assert.deepEqual(stillPending.body.requests.map((r: Frame) => r.request_id), [prompt.request_id], 'a malformed answer does not resolve the prompt')

    answer(holder, prompt.request_id, { behavior: 'deny', message: 'first' })
    answer(holder, prompt.request_id, { behavior: 'allow' })
    holder.send({ type: 'control_response', response: { subtype: 'error', request_id: prompt.request_id, error: 'third' } })
    const late = await holder.until(() => {
      const e = holder.frames.filter(isError('already_resolved'))
      return e.length === 2 ? e : undefined
    }, 5000, 'two already_resolved errors')
    assert.deepEqual(late.map((e) => e.request_id), [prompt.request_id, prompt.request_id])
    await holder.waitFor(isResult)
    await fence(holder)

    assert.deepEqual(answersTo(gw, id, prompt.request_id).map((l) => l.response.response?.message), ['first'])
    assert.equal(holder.frames.filter(resolved(prompt.request_id)).length, 1)
    assert.equal(observer.frames.filter(resolved(prompt.request_id)).length, 1)
    assert.equal(holder.frames.filter(isError('unknown_request')).length, 1)
  })

  it('two prompts in one turn are answered one after the other, each with its own tool_use_id', async (t) => {
    const { id, holder } = await setup(gw, t)
    const first = await ask(holder, 'ask2')
    const listed = await gw.request('GET', `/v1/sessions/${id}/permissions`)
    assert.deepEqual(listed.body.requests.map((r: Frame) => r.request_id), [first.request_id])
    answer(holder, first.request_id, { behavior: 'allow' })
    const second = await holder.waitFor((f) => isPrompt(f) && f.request_id !== first.request_id)
    assert.notEqual(second.request.tool_use_id, first.request.tool_use_id)
    answer(holder, second.request_id, { behavior: 'deny' })
    const result = await holder.waitFor(isResult)
    assert.equal(result.subtype, 'success')

    const written = gw.stdinLines(id).filter((l) => l.type === 'control_response')
    assert.deepEqual(written.map((l) => [l.response.request_id, l.response.response.behavior, l.response.response.toolUseID]), [
      [first.request_id, 'allow', first.request.tool_use_id],
      [second.request_id, 'deny', second.request.tool_use_id]
    ])
    assert.deepEqual(holder.frames.filter((f) => f.subtype === 'permission_resolved').map((f) => [f.request_id, f.decision]), [
      [first.request_id, 'allowed'],
      [second.request_id, 'denied']
    ])
    assert.ok(existsSync(join(sessionCwd(gw, id), 'fake-one.txt')))
    assert.ok(!existsSync(join(sessionCwd(gw, id), 'fake-two.txt')))
  })
})
