// Agent SDK clients through the gateway (issue 12), with the fake CLI: the holder's
// initialize is the CLI's initialize and is kept for a restarted CLI, refusals are
// control_response answers, fields pass as sent, answers to hook callbacks go back
// unchanged, CLI keep_alives are relayed live, update_environment_variables is refused.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { isError, isHook, isRefusal, isResult, isStatus } from '../support/frames.js'
import { client, fence, gateway, holderOf } from '../support/sessions.js'

const SDK_INIT = {
  subtype: 'initialize',
  systemPrompt: ['You are a test.'],
  hooks: { UserPromptSubmit: [{ hookCallbackIds: ['hook_sdk_7'] }] },
  sdkMcpServers: ['hostcalc'],
  jsonSchema: { type: 'object' },
  newer_sdk_field: { kept: true }
}
const initOf = (id: string, request: Record<string, unknown> = SDK_INIT): Record<string, unknown> => ({ type: 'control_request', request_id: id, request })
const isResponseTo = (id: string) => (f: any): boolean => f.type === 'control_response' && f.response?.request_id === id

describe('Agent SDK clients: initialize', () => {
  it('forwards the holder\'s initialize as the CLI\'s only one, as sent, and answers it under the client\'s request_id', async (t) => {
    const gw = await gateway(t)
    const { id, holder } = await holderOf(gw, t)
    holder.send(initOf('sdk-init-1'))
    const answer = await holder.waitFor(isResponseTo('sdk-init-1'))
    assert.equal(answer.response.subtype, 'success')
    assert.equal(typeof answer.seq, 'number', 'the answer is recorded like any CLI line')
    const lines = gw.stdinLines(id)
    assert.deepEqual(lines[0], initOf('sdk-init-1'), 'the first line the CLI read is the client\'s initialize, fields and all')
    assert.equal(lines.filter((l) => l.request?.subtype === 'initialize').length, 1, 'no gateway initialize besides it')
    // Its hooks are the CLI's: the UserPromptSubmit callback carries the client's id.
    holder.sendUser('hook')
    const hook = await holder.waitFor(isHook)
    assert.equal(hook.request.callback_id, 'hook_sdk_7')
  })

  it('sends its own initialize first when the holder\'s first frame is something else, and passes the user frame\'s fields', async (t) => {
    const gw = await gateway(t)
    const { id, holder } = await holderOf(gw, t)
    holder.send({ type: 'user', message: { role: 'user', content: 'hello' }, priority: 'next', shouldQuery: true, isSynthetic: false, timestamp: '2026-01-01T00:00:00.000Z', parent_tool_use_id: null })
    await holder.waitFor(isResult)
    const [init, user] = gw.stdinLines(id)
    assert.match(init.request_id, /^gw_init_/)
    assert.deepEqual(init.request, { subtype: 'initialize' })
    assert.deepEqual(user, { type: 'user', message: { role: 'user', content: 'hello' }, priority: 'next', shouldQuery: true, isSynthetic: false, timestamp: '2026-01-01T00:00:00.000Z', parent_tool_use_id: null, session_id: id })
  })

  it('gives a restarted CLI the stored initialize (gateway request_id), and an initialize starts a stopped CLI with it', async (t) => {
    const gw = await gateway(t)
    const { id, holder } = await holderOf(gw, t)
    holder.send(initOf('sdk-init-2'))
    await holder.waitFor(isResponseTo('sdk-init-2'))
    assert.equal((await gw.request('DELETE', `/v1/sessions/${id}`)).status < 300, true)
    await holder.waitFor(isStatus('stopped'))
    const before = gw.stdinLines(id).length
    holder.sendUser('hook')
    const hook = await holder.waitFor(isHook, 10_000)
    assert.equal(hook.request.callback_id, 'hook_sdk_7', 'the restarted CLI has the client\'s hooks')
    const restarted = gw.stdinLines(id).slice(before)
    assert.match(restarted[0].request_id, /^gw_init_/)
    assert.deepEqual(restarted[0].request, SDK_INIT)
    assert.equal(gw.argvDumps(id).length, 2)

    // An SDK attaching to a stopped session starts with its initialize: it is the new CLI's only one.
    holder.send({ type: 'control_response', response: { subtype: 'success', request_id: hook.request_id, response: { continue: true } } })
    await holder.waitFor(isResult, 10_000, holder.frames.indexOf(hook))
    await gw.request('DELETE', `/v1/sessions/${id}`)
    await holder.until(() => holder.frames.filter(isStatus('stopped')).length === 2 || undefined)
    const third = gw.stdinLines(id).length
    const next = { ...SDK_INIT, hooks: { UserPromptSubmit: [{ hookCallbackIds: ['hook_sdk_9'] }] } }
    holder.send(initOf('sdk-init-3', next))
    assert.equal((await holder.waitFor(isResponseTo('sdk-init-3'))).response.subtype, 'success')
    assert.deepEqual(gw.stdinLines(id).slice(third)[0], initOf('sdk-init-3', next))
    assert.equal(gw.argvDumps(id).length, 3)
    const stored = (await gw.app.gateway.store.getSession(id))?.initialize
    assert.deepEqual(stored, next, 'the stored record holds the latest initialize')
  })

  it('refuses an initialize that would run something on the gateway host or grant bypass, with control_response errors', async (t) => {
    const gw = await gateway(t)
    const { id, holder } = await holderOf(gw, t)
    const cases: Array<[string, Record<string, unknown>, string]> = [
      ['i-stdio', { subtype: 'initialize', mcpServers: { evil: { command: 'sh', args: ['-c', 'id'] } } }, 'control_not_allowed'],
      ['i-plugins', { subtype: 'initialize', plugins: [{ type: 'local', path: '/tmp/p' }] }, 'control_not_allowed'],
      ['i-cmdhook', { subtype: 'initialize', hooks: { PreToolUse: [{ matcher: 'Bash', hooks: [{ type: 'command', command: 'id' }] }] } }, 'control_not_allowed'],
      ['i-settings', { subtype: 'initialize', settings: { permissions: { allow: ['Bash'] } } }, 'control_not_allowed'],
      ['i-agent', { subtype: 'initialize', agents: { a: { description: 'x', prompt: 'y', permissionMode: 'bypassPermissions' } } }, 'bypass_not_allowed'],
      ['i-agent-mcp', { subtype: 'initialize', agents: { a: { description: 'x', prompt: 'y', mcpServers: [{ s: { type: 'stdio', command: 'id' } }] } } }, 'control_not_allowed'],
      ['i-mode', { subtype: 'initialize', permissionMode: 'bypassPermissions' }, 'bypass_not_allowed']
    ]
    for (const [rid, request, code] of cases) {
      holder.send(initOf(rid, request))
      const refusal = await holder.waitFor(isRefusal(code, rid))
      assert.equal(typeof refusal.response.error, 'string')
    }
    // Parse-time refusals of a control_request answer with its id too.
    holder.send({ type: 'control_request', request_id: 'bad-mode', request: { subtype: 'set_permission_mode', mode: 'yolo' } })
    await holder.waitFor(isRefusal('invalid_frame', 'bad-mode'))
    await fence(holder)
    assert.ok(!gw.stdinLines(id).some((l) => l.request?.subtype === 'initialize' && l.request_id !== undefined && !String(l.request_id).startsWith('gw_init_')), 'none reached the CLI')
    assert.equal((await gw.app.gateway.store.getSession(id))?.initialize, undefined)
  })
})

describe('Agent SDK clients: other frames', () => {
  it('forwards hook answers and extra fields as sent, unknown types too, and refuses update_environment_variables', async (t) => {
    const gw = await gateway(t)
    const { id, holder } = await holderOf(gw, t)
    holder.send({ type: 'totally_unknown', foo: 1 })
    holder.send({ type: 'update_environment_variables', variables: { FOO: 'bar' } })
    await holder.waitFor(isError('control_not_allowed'))
    holder.sendUser('hook')
    const hook = await holder.waitFor(isHook)
    const response = { subtype: 'success', request_id: hook.request_id, response: { continue: true, hookSpecificOutput: { hookEventName: 'UserPromptSubmit', additionalContext: 'ctx' } }, extra_field: 7 }
    holder.send({ type: 'control_response', response })
    await holder.waitFor(isResult)
    const lines = gw.stdinLines(id)
    assert.deepEqual(lines.find((l) => l.type === 'control_response' && l.response.request_id === hook.request_id), { type: 'control_response', response })
    assert.deepEqual(lines.find((l) => l.type === 'totally_unknown'), { type: 'totally_unknown', foo: 1 })
    assert.ok(!lines.some((l) => l.type === 'update_environment_variables'))
  })

  it('relays a CLI keep_alive live with its fields, without seq, to every client, and records it nowhere', async (t) => {
    const gw = await gateway(t)
    const { id, holder } = await holderOf(gw, t)
    const observer = await client(gw, t, id, 'role=observer')
    holder.sendUser('keep-alive')
    // The keep_alive is printed before the result: a client that has the result has had it.
    await holder.waitFor(isResult)
    await observer.waitFor(isResult)
    for (const c of [holder, observer]) {
      assert.ok(c.frames.some((f) => f.type === 'keep_alive' && f.startup_mark === 'fake-mark' && f.seq === undefined), 'relayed as printed')
    }
    const history = await gw.request('GET', `/v1/sessions/${id}/events?limit=1000`)
    assert.ok(!JSON.stringify(history.body).includes('fake-mark'), 'not in history')
  })
})
