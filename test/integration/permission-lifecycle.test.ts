/**
 * CLI control requests never get stuck: a permission prompt nobody answers is
 * denied with `interrupt` after PERMISSION_TIMEOUT_MS (and the turn ends);
 * a prompt the CLI cancels (`interrupt` from the holder) or that dies with the
 * CLI (killed, or stopped with DELETE) ends `cancelled` with nothing written
 * for it; other requests (hook callbacks) go to the holder and get an error
 * answer after CONTROL_REQUEST_TIMEOUT_MS. What reaches the CLI is checked on
 * the fake's stdin log; the interrupt case against the recorded transcript of
 * the real CLI 2.1.332 (interrupt_pending_permission).
 */
import assert from 'node:assert/strict'
import { before, describe, it } from 'node:test'
import { type Frame, isError, isPrompt, isResult, promptToResult, referenceWindow, resolved, resolvedFrame } from '../support/frames.js'
import { type TestGateway, eventually, processAlive, gateway, suiteScope } from '../support/gateway.js'
import { LIMITS, answer, answersTo, ask, fence, setup } from '../support/sessions.js'

const TIMEOUT_MS = 300

describe(`with PERMISSION_TIMEOUT_MS and CONTROL_REQUEST_TIMEOUT_MS at ${TIMEOUT_MS}`, () => {
  const scope = suiteScope()
  let gw: TestGateway
  before(async () => {
    gw = await gateway(scope, { env: { ...LIMITS, PERMISSION_TIMEOUT_MS: String(TIMEOUT_MS), CONTROL_REQUEST_TIMEOUT_MS: String(TIMEOUT_MS) } })
  })

  it('an unanswered prompt is denied with interrupt and a timed-out message, the turn ends, and later answers are refused', async (t) => {
    const { id, holder, observer } = await setup(gw, t)
    const prompt = await ask(holder)
    const r = await holder.waitFor(resolved(prompt.request_id))
    assert.deepEqual(r, {
      type: 'gateway', subtype: 'permission_resolved', seq: r.seq, request_id: prompt.request_id, request_subtype: 'can_use_tool', decision: 'timed_out', by: null
    })
    assert.equal((await observer.waitFor(resolved(prompt.request_id))).decision, 'timed_out')
    const result = await holder.waitFor(isResult)
    assert.equal(result.subtype, 'error_during_execution')

    const written = answersTo(gw, id, prompt.request_id)
    assert.equal(written.length, 1)
    const { message, ...rest } = written[0]?.response.response as Frame
    assert.deepEqual({ ...written[0], response: { ...written[0]?.response, response: rest } }, {
      type: 'control_response',
      response: { subtype: 'success', request_id: prompt.request_id, response: { behavior: 'deny', interrupt: true, toolUseID: prompt.request.tool_use_id } }
    })
    assert.match(message, new RegExp(`within ${TIMEOUT_MS} ms`))
    assert.match(message, /PERMISSION_TIMEOUT_MS/)
    assert.doesNotMatch(message, /user denied/i, 'the user did not deny it')

    assert.deepEqual(promptToResult(holder.frames).slice(0, 2), ['control_request/can_use_tool', 'gateway/permission_resolved:timed_out'])
    assert.equal(promptToResult(holder.frames).at(-1), 'result/error_during_execution')

    answer(holder, prompt.request_id, { behavior: 'allow' })
    assert.equal((await holder.waitFor(isError('already_resolved'))).request_id, prompt.request_id)
    const http = await gw.request('POST', `/v1/sessions/${id}/permissions/${prompt.request_id}`, { behavior: 'allow' })
    assert.equal(http.status, 409)
    assert.equal(http.body.code, 'already_resolved')
    await fence(holder)
    assert.equal(answersTo(gw, id, prompt.request_id).length, 1)
  })

  it('times out even with no client attached; a client coming back finds it in history', async (t) => {
    const { id, holder, observer, connect } = await setup(gw, t)
    const prompt = await ask(holder)
    holder.terminate()
    observer.terminate()
    await eventually(() => answersTo(gw, id, prompt.request_id).length === 1, 5000, 'the gateway\'s denial on the CLI\'s stdin')
    assert.equal(answersTo(gw, id, prompt.request_id)[0]?.response.response.interrupt, true)

    const back = await connect('after=0')
    const r = await back.waitFor(resolved(prompt.request_id))
    assert.equal(r.decision, 'timed_out')
    assert.equal((await back.waitFor(isResult)).subtype, 'error_during_execution')
    assert.equal(back.frames.filter(isPrompt).length, 1, 'replayed once, not offered again')
    assert.deepEqual((await gw.request('GET', `/v1/sessions/${id}/permissions`)).body.requests, [])
  })

  it('a hook callback goes to the holder; unanswered, the CLI gets an error answer and clients request_resolved timed_out', async (t) => {
    const { id, holder, observer } = await setup(gw, t)
    const hook = await ask(holder, 'hook')
    const notice = await observer.waitFor((f) => f.subtype === 'request_pending')
    assert.deepEqual([notice.seq, notice.request_id, notice.request_subtype], [hook.seq, hook.request_id, 'hook_callback'])
    const r = await holder.waitFor(resolvedFrame('request_resolved', hook.request_id))
    assert.deepEqual([r.decision, r.request_subtype, typeof r.seq], ['timed_out', 'hook_callback', 'number'])
    assert.equal((await observer.waitFor(resolvedFrame('request_resolved', hook.request_id))).decision, 'timed_out')
    await holder.waitFor(isResult)
    assert.deepEqual(answersTo(gw, id, hook.request_id), [{
      type: 'control_response',
      response: { subtype: 'error', request_id: hook.request_id, error: `No client answered within ${TIMEOUT_MS} ms` }
    }])
    const said = holder.frames.filter((f) => f.type === 'assistant').map((f) => f.message.content[0].text)
    assert.deepEqual(said, [`Hook failed: No client answered within ${TIMEOUT_MS} ms`])
  })
})

describe('prompts that end without an answer', () => {
  const scope = suiteScope()
  let gw: TestGateway
  before(async () => { gw = await gateway(scope, { env: LIMITS }) })

  it('interrupt while a prompt is pending: the CLI cancels it, nothing is written for it, frames follow the recorded transcript', async (t) => {
    const { id, holder, observer } = await setup(gw, t)
    const prompt = await ask(holder)
    holder.send({ type: 'control_request', request_id: 'int-1', request: { subtype: 'interrupt' } })
    const result = await holder.waitFor(isResult)
    assert.equal(result.subtype, 'error_during_execution')

    const r = await holder.waitFor(resolved(prompt.request_id))
    assert.deepEqual([r.decision, r.by], ['cancelled', null])
    assert.equal((await observer.waitFor(resolved(prompt.request_id))).decision, 'cancelled')
    const reference = referenceWindow('interrupt_pending_permission', [
      'control_request/can_use_tool', 'control_cancel_request', 'control_response/success',
      'system/session_state_changed:running', 'user', 'user', 'result/error_during_execution'
    ])
    assert.deepEqual(reference.slice(0, 2), ['control_request/can_use_tool', 'control_cancel_request'])
    assert.deepEqual(promptToResult(holder.frames), [...reference.slice(0, 2), 'gateway/permission_resolved:cancelled', ...reference.slice(2)])
    const interruptAnswer = holder.frames.find((f) => f.type === 'control_response' && f.response?.request_id === 'int-1')
    assert.deepEqual(interruptAnswer?.response, { subtype: 'success', request_id: 'int-1', response: { still_queued: [] } })

    answer(holder, prompt.request_id, { behavior: 'allow' })
    assert.equal((await holder.waitFor(isError('already_resolved'))).request_id, prompt.request_id)
    const http = await gw.request('POST', `/v1/sessions/${id}/permissions/${prompt.request_id}`, { behavior: 'deny' })
    assert.deepEqual([http.status, http.body.code], [409, 'already_resolved'])
    await fence(holder)
    assert.deepEqual(answersTo(gw, id, prompt.request_id), [], 'nothing was written to the CLI for the cancelled prompt')
    assert.deepEqual(gw.stdinLines(id).filter((l) => l.request_id === 'int-1'), [{ type: 'control_request', request_id: 'int-1', request: { subtype: 'interrupt' } }])
  })

  it('the CLI dying with a prompt pending cancels it', async (t) => {
    const { id, holder, observer } = await setup(gw, t)
    const prompt = await ask(holder)
    const pid = (await gw.request('GET', `/v1/sessions/${id}`)).body.pid as number
    assert.ok(processAlive(pid))
    process.kill(pid, 'SIGKILL')
    const r = await holder.waitFor(resolved(prompt.request_id))
    assert.deepEqual([r.decision, r.by], ['cancelled', null])
    assert.equal((await observer.waitFor(resolved(prompt.request_id))).decision, 'cancelled')
    await holder.waitFor((f) => f.subtype === 'status' && f.status === 'exited')
    assert.deepEqual((await gw.request('GET', `/v1/sessions/${id}/permissions`)).body.requests, [])
    answer(holder, prompt.request_id, { behavior: 'allow' })
    assert.equal((await holder.waitFor(isError('already_resolved'))).request_id, prompt.request_id)
  })

  it('a crash after a prompt was answered leaves nothing pending and reports no extra resolution', async (t) => {
    const { id, holder } = await setup(gw, t)
    const prompt = await ask(holder)
    answer(holder, prompt.request_id, { behavior: 'allow' })
    await holder.waitFor(isResult)
    holder.sendUser('crash')
    await holder.waitFor((f) => f.subtype === 'status' && f.status === 'exited')
    assert.deepEqual(holder.frames.filter((f) => f.subtype === 'permission_resolved').map((f) => f.decision), ['allowed'])
    assert.deepEqual((await gw.request('GET', `/v1/sessions/${id}/permissions`)).body.requests, [])
  })

  it('DELETE with a prompt pending: the prompt is cancelled and nothing is written for it', async (t) => {
    const { id, holder, observer } = await setup(gw, t)
    const prompt = await ask(holder)
    const stopped = await gw.request('DELETE', `/v1/sessions/${id}`)
    assert.equal(stopped.status, 200)
    const r = await holder.waitFor(resolved(prompt.request_id))
    assert.deepEqual([r.decision, r.by], ['cancelled', null])
    assert.equal((await observer.waitFor(resolved(prompt.request_id))).decision, 'cancelled')
    await holder.waitFor((f) => f.subtype === 'status' && f.status === 'stopped')
    assert.deepEqual(answersTo(gw, id, prompt.request_id), [])
    const http = await gw.request('POST', `/v1/sessions/${id}/permissions/${prompt.request_id}`, { behavior: 'allow' })
    assert.deepEqual([http.status, http.body.code], [409, 'already_resolved'])
  })

  it('a hook callback answered by the holder: written once, request_resolved answered', async (t) => {
    const { id, holder, observer } = await setup(gw, t)
    const hook = await ask(holder, 'hook')
    answer(holder, hook.request_id, { continue: true })
    const r = await holder.waitFor(resolvedFrame('request_resolved', hook.request_id))
    assert.deepEqual([r.decision, r.request_subtype], ['answered', 'hook_callback'])
    assert.equal((await observer.waitFor(resolvedFrame('request_resolved', hook.request_id))).decision, 'answered')
    await holder.waitFor(isResult)
    assert.deepEqual(answersTo(gw, id, hook.request_id), [
      { type: 'control_response', response: { subtype: 'success', request_id: hook.request_id, response: { continue: true } } }
    ])
    const said = holder.frames.filter((f) => f.type === 'assistant').map((f) => f.message.content[0].text)
    assert.deepEqual(said, ['Hook answered: {"continue":true}'])
    answer(holder, hook.request_id, { continue: false })
    assert.equal((await holder.waitFor(isError('already_resolved'))).request_id, hook.request_id)
  })
})
