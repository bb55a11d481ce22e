// End to end: gateway + real claude CLI + Messages API stand-in + real
// WebSocket clients. Permission prompts: allow, deny, interrupt while one is
// pending, and what an observer sees and may do.
import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { findToolResults } from '../support/mock-anthropic.js'
import {
  E2E_TEST_TIMEOUT_MS, WAIT_MS, allowAnswer, assertContiguous, waitLive, controlRequest, denyAnswer,
  isCanUseTool, isCli, isGateway, isResponseTo, startE2e, type E2e
} from '../support/e2e.js'

// One gateway and stand-in for every case: each case has its own session (and
// its own prompts and files); the close at the end still checks no CLI survived.
let e: E2e
before(async () => { e = await startE2e() })
// Not closeAll(): it drops the close's failures, and this close is where they are checked.
after(async () => { await e.close() })

test('permission allow: the holder allows without updatedInput, the tool runs in the session workspace', { timeout: E2E_TEST_TIMEOUT_MS }, async () => {
  const session = await e.createSession()
  const holder = await e.connect(session.id)
  holder.sendUser('RUN_BASH touch allowed.txt && echo allowed-ok')

  const prompt = await waitLive(holder, isCanUseTool)
  assert.equal(prompt.request.tool_name, 'Bash')
  assert.equal(prompt.request.input.command, 'touch allowed.txt && echo allowed-ok')
  assert.equal(typeof prompt.seq, 'number')
  assert.ok(!existsSync(join(e.workspace(session.id), 'allowed.txt')), 'nothing ran before the answer')

  // No updatedInput: the gateway must fill it (the CLI denies an allow without it).
  holder.send(allowAnswer(prompt.request_id))
  const resolved = await waitLive(holder, isGateway('permission_resolved', { request_id: prompt.request_id }))
  assert.equal(resolved.decision, 'allowed')
  assert.equal(resolved.request_subtype, 'can_use_tool')

  const result = await waitLive(holder, isCli('result'))
  assert.equal(result.subtype, 'success', JSON.stringify(result))
  assert.equal(result.result, 'Tool finished: allowed-ok')
  const init = holder.frames.find(isCli('system', 'init'))
  assert.equal(init.cwd, e.workspace(session.id), 'the CLI runs in <DATA_DIR>/workspaces/<tenant>/<id>')
  assert.ok(existsSync(join(e.workspace(session.id), 'allowed.txt')), 'the allowed command created its file in the workspace')
  assert.equal(holder.frames.filter((f) => f.type === 'gateway' && f.subtype === 'error').length, 0)
  assertContiguous(holder.seqFrames)
})

test('permission deny with a message: nothing runs, the message reaches the model as a tool_result', { timeout: E2E_TEST_TIMEOUT_MS }, async () => {
  const message = 'Denied from the e2e test: not in this folder'
  const session = await e.createSession()
  const holder = await e.connect(session.id)
  holder.sendUser('RUN_BASH touch denied.txt && echo denied-ran')

  const prompt = await waitLive(holder, isCanUseTool)
  holder.send(denyAnswer(prompt.request_id, message))
  const resolved = await waitLive(holder, isGateway('permission_resolved', { request_id: prompt.request_id }))
  assert.equal(resolved.decision, 'denied')

  const result = await waitLive(holder, isCli('result'))
  assert.equal(result.subtype, 'success', JSON.stringify(result))
  assert.ok(!existsSync(join(e.workspace(session.id), 'denied.txt')), 'the denied command did not run')

  const toolUseId = prompt.request.tool_use_id
  assert.equal(typeof toolUseId, 'string')
  const toolResults = e.turns().flatMap((r) => findToolResults(r.body))
  const denied = toolResults.find((t) => t.toolUseId === toolUseId)
  assert.ok(denied, `no tool_result for ${String(toolUseId)} in ${JSON.stringify(toolResults)}`)
  assert.ok(denied.content.includes(message), `tool_result content: ${denied.content}`)
  assert.equal(denied.isError, true)
  assert.equal(result.result, `Tool finished: ${denied.content}`)
})

test('interrupt while a prompt is pending: cancelled, nothing written, a late answer is already_resolved', { timeout: E2E_TEST_TIMEOUT_MS }, async () => {
  const session = await e.createSession()
  const holder = await e.connect(session.id)
  const observer = await e.connect(session.id, 'role=observer&after=0')
  holder.sendUser('RUN_BASH touch interrupted.txt && echo interrupted-ran')
  const prompt = await waitLive(holder, isCanUseTool)
  await waitLive(observer, isGateway('request_pending', { request_id: prompt.request_id }))

  holder.send(controlRequest('e2e-interrupt-1', { subtype: 'interrupt' }))
  for (const client of [holder, observer]) {
    const cancel = await waitLive(client, (f) => f.type === 'control_cancel_request' && f.request_id === prompt.request_id)
    const resolved = await waitLive(client, isGateway('permission_resolved', { request_id: prompt.request_id }))
    assert.equal(resolved.decision, 'cancelled')
    assert.equal(resolved.by, null)
    const answer = await waitLive(client, isResponseTo('e2e-interrupt-1'))
    assert.equal(answer.response.subtype, 'success')
    const result = await waitLive(client, isCli('result'))
    assert.equal(result.subtype, 'error_during_execution', JSON.stringify(result))
    assert.ok(cancel.seq < resolved.seq && resolved.seq < result.seq, 'cancel, then resolved, then result')
  }

  // The cancelled prompt is over: answering it now changes nothing.
  const mark = holder.frames.length
  holder.send(allowAnswer(prompt.request_id))
  const late = await waitLive(holder, isGateway('error', { request_id: prompt.request_id }), mark)
  assert.equal(late.code, 'already_resolved')

  // The session goes on; the model is told the turn was interrupted.
  const next = holder.frames.length
  holder.sendUser('After the interrupt')
  const result = await waitLive(holder, isCli('result'), next)
  const request = await e.mock.waitForRequest((r) => r.stream && JSON.stringify(r.body).includes('After the interrupt'), WAIT_MS)
  assert.ok(JSON.stringify(request.body).includes('[Request interrupted by user'), 'the next request says the turn was interrupted')
  assert.equal(result.subtype, 'success', JSON.stringify(result))
  assert.equal(holder.frames.slice(next).filter(isCanUseTool).length, 0, 'the cancelled tool is not asked again')
  assert.ok(!existsSync(join(e.workspace(session.id), 'interrupted.txt')), 'the cancelled command never ran')
  const snapshot = await e.gw.request('GET', `/v1/sessions/${session.id}`)
  assert.equal(snapshot.body.pending_requests, 0)
  assert.equal(snapshot.body.turn_running, false)
  assertContiguous(holder.seqFrames)
})

test('two clients: the observer sees the same seq frames, gets request_pending, and may not answer', { timeout: E2E_TEST_TIMEOUT_MS }, async () => {
  const session = await e.createSession()
  const holder = await e.connect(session.id)
  const observer = await e.connect(session.id, 'role=observer&after=0')
  const hello = holder.frames.find(isGateway('hello'))
  assert.equal(hello.role, 'controller')
  assert.equal(observer.frames.find(isGateway('hello')).role, 'observer')

  holder.sendUser('RUN_BASH touch observed.txt && echo observed-ok')
  const prompt = await waitLive(holder, isCanUseTool)
  const notice = await waitLive(observer, isGateway('request_pending', { request_id: prompt.request_id }))
  assert.equal(notice.seq, prompt.seq, 'the notice takes the prompt\'s place in the sequence')
  assert.equal(notice.request_subtype, 'can_use_tool')
  assert.equal(notice.tool_name, 'Bash')
  assert.equal(notice.input, undefined, 'the observer does not get the tool input')
  assert.equal(observer.frames.filter(isCanUseTool).length, 0, 'the observer never gets the prompt itself')
  // One attaching while the prompt is pending gets the notice in its replay, too.
  const late = await e.connect(session.id, 'role=observer&after=0')
  assert.deepEqual(await waitLive(late, (f) => f.seq === prompt.seq), notice)
  assert.deepEqual(late.frames.find(isGateway('hello')).pending_requests, [prompt.request_id])

  // The observer may neither answer nor prompt.
  let mark = observer.frames.length
  observer.send(allowAnswer(prompt.request_id))
  const refused = await waitLive(observer, isGateway('error', { request_id: prompt.request_id }), mark)
  assert.equal(refused.code, 'not_holder')
  mark = observer.frames.length
  observer.sendUser('RUN_BASH touch from-observer.txt')
  assert.equal((await waitLive(observer, isGateway('error'), mark)).code, 'not_holder')

  holder.send(allowAnswer(prompt.request_id))
  for (const client of [holder, observer]) {
    const resolved = await waitLive(client, isGateway('permission_resolved', { request_id: prompt.request_id }))
    assert.equal(resolved.decision, 'allowed')
    assert.equal(resolved.by, hello.client_id, 'answered by the holder')
  }
  const result = await waitLive(holder, isCli('result'))
  assert.equal(result.subtype, 'success')
  assert.equal(result.result, 'Tool finished: observed-ok')
  await waitLive(observer, (f) => f.seq === result.seq)
  await waitLive(late, (f) => f.seq === result.seq)
  assert.equal(late.frames.filter(isCanUseTool).length, 0)

  // Same seqs, same frames, but for the prompt (live or replayed).
  const upTo = (frames: any[]): any[] => frames.filter((f) => typeof f.seq === 'number' && f.seq <= result.seq)
  const mine = upTo(holder.frames)
  assertContiguous(mine)
  for (const other of [observer, late]) {
    const theirs = upTo(other.frames)
    assert.deepEqual(theirs.map((f) => f.seq), mine.map((f) => f.seq))
    for (const [i, f] of mine.entries()) {
      if (f.seq === prompt.seq) assert.deepEqual(theirs[i], notice)
      else assert.deepEqual(theirs[i], f, `seq ${String(f.seq)} differs`)
    }
  }
  assert.ok(existsSync(join(e.workspace(session.id), 'observed.txt')))
  assert.ok(!existsSync(join(e.workspace(session.id), 'from-observer.txt')))
  assert.equal(e.turns().filter((r) => JSON.stringify(r.body).includes('from-observer')).length, 0, 'the observer\'s prompt never reached the CLI')
  assert.ok(readFileSync(join(e.workspace(session.id), 'observed.txt')).length === 0)
})
