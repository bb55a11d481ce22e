// End to end: gateway + real claude CLI + Messages API stand-in + a real
// webhook receiver. What the operator's receiver gets for one real turn with
// a Bash prompt answered over HTTP (as a chat button would, from the
// permission.requested it got), the turn's result and the session's DELETE:
// four signed events in order, their fields read from the real CLI's lines.
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { verifyWebhook } from '../../src/webhooks/signature.js'
import { E2E_TEST_TIMEOUT_MS, closeAll, isCanUseTool, isCli, isGateway, startE2e, waitLive } from '../support/e2e.js'
import { Receiver } from '../support/webhook-receiver.js'

after(closeAll)

const SECRET = 'whsec-e2e-0123456789abcdef0123456789ab'

test('webhooks from a real CLI: a prompt answered from its permission.requested over HTTP, the turn\'s result and the end, signed and in order', { timeout: E2E_TEST_TIMEOUT_MS }, async (t) => {
  const receiver = await Receiver.start(t)
  const e = await startE2e({ env: { WEBHOOK_URL: `http://127.0.0.1:${receiver.port}/hooks`, WEBHOOK_SECRET: SECRET } })
  try {
    const session = await e.createSession()
    const holder = await e.connect(session.id)
    holder.sendUser('RUN_BASH touch hooked.txt && echo hooked-ok')

    // The operator's side: the webhook names the prompt; its request_id answers it over HTTP.
    const asked = await receiver.until(() => receiver.requests.find((r) => r.json.type === 'permission.requested'), 'permission.requested')
    const prompt = await waitLive(holder, isCanUseTool)
    assert.equal(asked.json.data.request_id, prompt.request_id)
    assert.equal(asked.json.data.tool_name, 'Bash')
    assert.equal(asked.json.data.summary, 'touch hooked.txt && echo hooked-ok')
    assert.deepEqual(JSON.parse(asked.json.data.input_preview), prompt.request.input)
    assert.equal(asked.json.data.seq, prompt.seq)
    const answered = await e.gw.request('POST', `/v1/sessions/${session.id}/permissions/${asked.json.data.request_id as string}`, { behavior: 'allow' })
    assert.equal(answered.status, 200, JSON.stringify(answered.body))

    const result = await waitLive(holder, isCli('result'))
    assert.equal(result.result, 'Tool finished: hooked-ok')
    assert.ok(existsSync(join(e.workspace(session.id), 'hooked.txt')), 'the allowed command ran')
    const finished = await receiver.until(() => receiver.requests.find((r) => r.json.type === 'turn.finished'), 'turn.finished')
    assert.deepEqual({ ...finished.json.data, duration_ms: typeof finished.json.data.duration_ms },
      { subtype: 'success', is_error: false, duration_ms: 'number', total_cost_usd: result.total_cost_usd, result: 'Tool finished: hooked-ok', result_truncated: false, seq: result.seq })

    assert.equal((await e.gw.request('DELETE', `/v1/sessions/${session.id}`)).status, 200)
    const stopped = await waitLive(holder, isGateway('status', { status: 'stopped' }))
    const ended = await receiver.until(() => receiver.requests.find((r) => r.json.type === 'session.ended'), 'session.ended')
    assert.equal(ended.json.data.status, 'stopped')
    assert.equal(ended.json.data.seq, stopped.seq)

    assert.deepEqual(receiver.types, ['permission.requested', 'permission.resolved', 'turn.finished', 'session.ended'])
    const resolution = receiver.requests[1]?.json
    assert.deepEqual({ decision: resolution.data.decision, by: resolution.data.by, request_id: resolution.data.request_id }, { decision: 'allowed', by: 'http:tenant-a', request_id: prompt.request_id }, 'answered through the HTTP path, as the frame says')
    for (const r of receiver.requests) {
      assert.equal(r.json.session_id, session.id)
      assert.equal(verifyWebhook({ secret: SECRET, timestamp: r.headers['webhook-timestamp'] as string, signature: r.headers['webhook-signature'] as string, body: r.body }), null)
    }
  } finally {
    await e.close()
  }
})
