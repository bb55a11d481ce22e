// End to end with the real CLI 2.1.332 (issue 12): the holder's initialize, sent
// through the gateway, is the CLI's own — its systemPrompt and jsonSchema reach the
// API request and its PreToolUse hook is called back through the holder — and
// session_state_changed frames come through on every session.
import assert from 'node:assert/strict'
import { after, test } from 'node:test'
import { E2E_TEST_TIMEOUT_MS, WAIT_MS, closeAll, isCanUseTool, isCli, isResponseTo, startE2e, streamedPrompt, waitLive } from '../support/e2e.js'

after(closeAll)

const stateOf = (f: any): string | undefined => f.type === 'system' && f.subtype === 'session_state_changed' ? f.state : undefined

test('the holder\'s initialize reaches the CLI: systemPrompt and jsonSchema in the API request, PreToolUse hook called through the holder', { timeout: E2E_TEST_TIMEOUT_MS }, async () => {
  const e = await startE2e()
  try {
    const session = await e.createSession()
    const client = await e.connect(session.id)
    client.send({
      type: 'control_request',
      request_id: 'sdk-init',
      request: {
        subtype: 'initialize',
        systemPrompt: ['SDK-SYSTEM-PROMPT-MARKER'],
        jsonSchema: { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'] },
        hooks: { PreToolUse: [{ matcher: 'Bash', hookCallbackIds: ['hook_pre'], timeout: 30 }] }
      }
    })
    const init = await waitLive(client, isResponseTo('sdk-init'))
    assert.equal(init.response.subtype, 'success', JSON.stringify(init).slice(0, 300))

    client.sendUser('RUN_BASH echo through-hook')
    const hook = await waitLive(client, (f) => f.type === 'control_request' && f.request?.subtype === 'hook_callback')
    assert.equal(hook.request.callback_id, 'hook_pre')
    assert.equal(hook.request.input.hook_event_name, 'PreToolUse')
    const request = await e.mock.waitForRequest(streamedPrompt('RUN_BASH echo through-hook'), WAIT_MS)
    const body = request.body as { system?: unknown, tools?: Array<{ name?: string }> }
    const system = JSON.stringify(body.system ?? '')
    assert.ok(system.includes('SDK-SYSTEM-PROMPT-MARKER'), 'the client\'s system prompt is the one the API got')
    assert.ok((body.tools ?? []).some((tool) => tool.name === 'StructuredOutput'), 'the jsonSchema made the CLI offer StructuredOutput')

    // The hook's answer, as the SDK sends it, decides: allow without a permission prompt.
    client.send({ type: 'control_response', response: { subtype: 'success', request_id: hook.request_id, response: { hookSpecificOutput: { hookEventName: 'PreToolUse', permissionDecision: 'allow', permissionDecisionReason: 'hook allowed it' } } } })
    const result = await waitLive(client, isCli('result'))
    assert.ok(!client.frames.some(isCanUseTool), 'the hook\'s allow made a prompt unnecessary')
    assert.ok(result.subtype === 'success' || result.subtype === 'error_max_structured_output_retries', JSON.stringify(result).slice(0, 300))
    const idle = await waitLive(client, (f) => stateOf(f) === 'idle')
    assert.equal(typeof idle.seq, 'number', 'session state frames are recorded like other CLI lines')
    const states = client.frames.map(stateOf).filter((s) => s !== undefined)
    assert.equal(states[0], 'running')
    const snapshot = await e.gw.request('GET', `/v1/sessions/${session.id}`)
    assert.equal(snapshot.body.status, 'running', 'the idle state does not change the session status')
  } finally {
    await e.close()
  }
})
