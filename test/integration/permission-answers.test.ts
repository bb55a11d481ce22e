/**
 * The holder answering CLI permission prompts over its WebSocket: what is
 * written to the CLI (the exact control_response on the fake's stdin), what
 * every client is told (`permission_resolved`, recorded with a seq), the
 * first-answer-wins rule, and the frame order a holder sees compared with the
 * recorded transcripts of the real CLI 2.1.332 (allow, deny).
 */
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { before, describe, it } from 'node:test'
import { type Frame, isError, isPrompt, isResult, label, promptToResult, referenceWindow, resolved } from '../support/frames.js'
import { type TestGateway, gateway, suiteScope } from '../support/gateway.js'
import { LIMITS, answer, answersTo, ask, fence, setup } from '../support/sessions.js'

const DEFAULT_DENY = 'The user denied this tool use.'

function sessionCwd (gw: TestGateway, sessionId: string): string {
  return join(gw.dataDir, 'workspaces', 'tenant-a', sessionId)
}

describe('answering permission prompts over the WebSocket', () => {
  let gw: TestGateway
  const scope = suiteScope()
  before(async () => { gw = await gateway(scope, { env: LIMITS }) })

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
