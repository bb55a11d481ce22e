/**
 * Pending CLI control requests over HTTP: `GET /v1/sessions/:id/permissions`
 * lists them, `POST /v1/sessions/:id/permissions/:request_id` answers one,
 * with the same completion of the answer, the same checks and the same
 * first-answer-wins rule as a holder's WebSocket answer, including when HTTP
 * and WebSocket answers race. What reaches the CLI is read from the fake's
 * stdin log.
 */
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { before, describe, it } from 'node:test'
import { type Frame, isError, isResult, resolved, resolvedFrame } from '../support/frames.js'
import { TOKEN_B, type TestGateway, gateway, suiteScope } from '../support/gateway.js'
import { LIMITS, answersTo, ask, fence, setup } from '../support/sessions.js'

describe('permission prompts over HTTP', () => {
  let gw: TestGateway
  const scope = suiteScope()
  before(async () => { gw = await gateway(scope, { env: LIMITS }) })

  it('lists the pending prompt and answers it with allow: the request\'s input and tool_use_id go to the CLI; clients are told', async (t) => {
    const { id, holder, observer, permissions } = await setup(gw, t)
    assert.deepEqual((await gw.request('GET', permissions)).body, { requests: [] })
    const prompt = await ask(holder)

    const listed = await gw.request('GET', permissions)
    assert.equal(listed.status, 200)
    assert.equal(listed.body.requests.length, 1)
    const item = listed.body.requests[0]
    assert.deepEqual({ ...item, created_at: undefined }, {
      request_id: prompt.request_id, subtype: 'can_use_tool', request: prompt.request, seq: prompt.seq, created_at: undefined
    })
    assert.ok(Math.abs(Date.parse(item.created_at) - Date.now()) < 60_000)

    const res = await gw.request('POST', `${permissions}/${prompt.request_id}`, { behavior: 'allow' })
    assert.equal(res.status, 200)
    assert.deepEqual(res.body, { request_id: prompt.request_id, decision: 'allowed' })
    for (const c of [holder, observer]) {
      const r = await c.waitFor(resolved(prompt.request_id))
      assert.deepEqual([r.decision, r.by, r.seq], ['allowed', 'http:tenant-a', prompt.seq + 1])
    }
    assert.equal((await holder.waitFor(isResult)).subtype, 'success')
    assert.deepEqual(answersTo(gw, id, prompt.request_id), [{
      type: 'control_response',
      response: {
        subtype: 'success',
        request_id: prompt.request_id,
        response: { behavior: 'allow', updatedInput: prompt.request.input, toolUseID: prompt.request.tool_use_id }
      }
    }])
    assert.ok(existsSync(join(gw.dataDir, 'workspaces', 'tenant-a', id, 'fake-created.txt')))
    assert.deepEqual((await gw.request('GET', permissions)).body, { requests: [] })
  })

  it('answers with deny and a message; the message is what the CLI gets', async (t) => {
    const { id, holder, permissions } = await setup(gw, t)
    const prompt = await ask(holder)
    const res = await gw.request('POST', `${permissions}/${prompt.request_id}`, { behavior: 'deny', message: 'Denied from my phone' })
    assert.deepEqual([res.status, res.body], [200, { request_id: prompt.request_id, decision: 'denied' }])
    await holder.waitFor(isResult)
    assert.deepEqual(answersTo(gw, id, prompt.request_id).map((l) => l.response), [{
      subtype: 'success',
      request_id: prompt.request_id,
      response: { behavior: 'deny', message: 'Denied from my phone', toolUseID: prompt.request.tool_use_id }
    }])
    const toolResult = holder.frames.find((f) => f.type === 'user' && f.message?.content?.[0]?.type === 'tool_result')
    assert.equal(toolResult?.message.content[0].content, 'Denied from my phone')
  })

  it('answers a hook callback with a generic success body', async (t) => {
    const { id, holder, permissions } = await setup(gw, t)
    const hook = await ask(holder, 'hook')
    assert.equal(hook.request.subtype, 'hook_callback')
    const listed = await gw.request('GET', permissions)
    assert.deepEqual(listed.body.requests.map((r: Frame) => [r.request_id, r.subtype]), [[hook.request_id, 'hook_callback']])
    const res = await gw.request('POST', `${permissions}/${hook.request_id}`, { subtype: 'success', response: { continue: true } })
    assert.deepEqual([res.status, res.body], [200, { request_id: hook.request_id, decision: 'answered' }])
    assert.equal((await holder.waitFor(resolvedFrame('request_resolved', hook.request_id))).decision, 'answered')
    await holder.waitFor(isResult)
    assert.deepEqual(answersTo(gw, id, hook.request_id).map((l) => l.response), [
      { subtype: 'success', request_id: hook.request_id, response: { continue: true } }
    ])
  })

  it('refuses unknown ids (404), second answers (409, HTTP or WebSocket), malformed bodies (400) and other tenants (404)', async (t) => {
    const { id, holder, permissions } = await setup(gw, t)
    const prompt = await ask(holder)

    const unknown = await gw.request('POST', `${permissions}/no-such-request`, { behavior: 'allow' })
    assert.deepEqual([unknown.status, unknown.body.code], [404, 'unknown_request'])
    const bad = await gw.request('POST', `${permissions}/${prompt.request_id}`, { behavior: 'perhaps' })
    assert.deepEqual([bad.status, bad.body.code], [400, 'bad_request'])

    // Another tenant cannot see or answer the prompt: the session does not exist for it.
    const otherList = await gw.request('GET', permissions, undefined, TOKEN_B)
    assert.deepEqual([otherList.status, otherList.body.code], [404, 'session_not_found'])
    const otherAnswer = await gw.request('POST', `${permissions}/${prompt.request_id}`, { behavior: 'allow' }, TOKEN_B)
    assert.deepEqual([otherAnswer.status, otherAnswer.body.code], [404, 'session_not_found'])
    assert.deepEqual((await gw.request('GET', permissions)).body.requests.map((r: Frame) => r.request_id), [prompt.request_id], 'still pending')

    const first = await gw.request('POST', `${permissions}/${prompt.request_id}`, { behavior: 'deny', message: 'first' })
    assert.deepEqual([first.status, first.body.decision], [200, 'denied'])
    const second = await gw.request('POST', `${permissions}/${prompt.request_id}`, { behavior: 'allow' })
    assert.deepEqual([second.status, second.body.code], [409, 'already_resolved'])
    holder.send({ type: 'control_response', response: { subtype: 'success', request_id: prompt.request_id, response: { behavior: 'allow' } } })
    assert.equal((await holder.waitFor(isError('already_resolved'))).request_id, prompt.request_id)

    await holder.waitFor(isResult)
    await fence(holder)
    assert.deepEqual(answersTo(gw, id, prompt.request_id).map((l) => l.response.response.message), ['first'])
    assert.equal(holder.frames.filter(resolved(prompt.request_id)).length, 1)
  })

  it('two HTTP answers and a WebSocket answer racing: exactly one reaches the CLI, the others get already_resolved', async (t) => {
    const { id, holder, holderId, observer, permissions } = await setup(gw, t)
    for (let round = 0; round < 3; round++) {
      const prompt = await ask(holder, round === 0 ? 'ask' : `ask Bash touch race-${round}.txt`)
      const url = `${permissions}/${prompt.request_id}`
      const posts = Promise.all([
        gw.request('POST', url, { behavior: 'allow' }),
        gw.request('POST', url, { behavior: 'deny', message: 'from http' })
      ])
      holder.send({ type: 'control_response', response: { subtype: 'success', request_id: prompt.request_id, response: { behavior: 'deny', message: 'from ws' } } })
      const [p1, p2] = await posts
      const winner = await holder.waitFor(resolved(prompt.request_id))
      const wsWon = winner.by === holderId
      const statuses = [p1.status, p2.status].sort()
      if (wsWon) {
        assert.deepEqual(statuses, [409, 409])
      } else {
        assert.equal(winner.by, 'http:tenant-a')
        assert.deepEqual(statuses, [200, 409])
        assert.equal((await holder.waitFor(isError('already_resolved'))).request_id, prompt.request_id)
      }
      for (const p of [p1, p2]) if (p.status === 409) assert.equal(p.body.code, 'already_resolved')
      await holder.waitFor((f) => isResult(f) && f.seq > prompt.seq)
      await fence(holder)

      const written = answersTo(gw, id, prompt.request_id)
      assert.equal(written.length, 1, 'exactly one answer reached the CLI')
      const expectedDecision = wsWon ? 'denied' : (p1.status === 200 ? p1 : p2).body.decision
      assert.equal(winner.decision, expectedDecision)
      assert.equal(written[0]?.response.response.behavior, expectedDecision === 'allowed' ? 'allow' : 'deny')
      assert.equal(holder.frames.filter(resolved(prompt.request_id)).length, 1)
      assert.equal(observer.frames.filter(resolved(prompt.request_id)).length, 1)
    }
  })

  it('GET /v1/permissions lists the waiting prompts of all the caller\'s sessions, oldest first, and no other tenant\'s', async (t) => {
    const first = await setup(gw, t)
    const second = await setup(gw, t)
    const hooked = await setup(gw, t)
    const mine = new Set([first.id, second.id, hooked.id])
    const listed = async (token?: string): Promise<any[]> => {
      const res = await gw.request('GET', '/v1/permissions', undefined, token)
      assert.equal(res.status, 200)
      assert.equal(res.body.unreachable_sessions, 0)
      return res.body.permissions.filter((p: any) => mine.has(p.session_id))
    }
    assert.deepEqual(await listed(), [])
    const a = await ask(first.holder)
    const b = await ask(second.holder)
    await ask(hooked.holder, 'hook') // a hook callback is not a permission prompt
    const items = await listed()
    assert.deepEqual(items.map((p) => [p.session_id, p.request_id, p.tool_name, p.seq]), [
      [first.id, a.request_id, a.request.tool_name, a.seq],
      [second.id, b.request_id, b.request.tool_name, b.seq]
    ])
    for (const [item, prompt] of [[items[0], a], [items[1], b]]) {
      assert.equal(item.summary, String(prompt.request.input.command ?? prompt.request.input.file_path), 'the input\'s telling field')
      assert.ok(item.age_ms >= 0 && item.age_ms < 60_000)
      assert.equal(item.created_at, new Date(Date.parse(item.created_at)).toISOString())
    }
    assert.deepEqual(await listed(TOKEN_B), [], 'another tenant sees none of them')
    await gw.request('POST', `${first.permissions}/${a.request_id}`, { behavior: 'deny', message: 'no' })
    assert.deepEqual((await listed()).map((p) => p.request_id), [b.request_id], 'an answered prompt leaves the list')
  })
})
