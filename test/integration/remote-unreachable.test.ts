/**
 * A gateway whose WebSocket never comes back (the REST calls still pass: a
 * proxy that drops upgrades, a gateway refusing them) must neither keep
 * claude-remote waiting for ever nor be left running a CLI nobody will end:
 * control requests the host wrote meanwhile and is waiting on at stdin EOF
 * get an error answer within a bound (a host that sends no SIGTERM, a
 * script, would otherwise wait for ever), and when claude-remote gives the
 * gateway up it stops the session as any other end does. The bridge runs
 * in-process (its bounds passed in, short) against a real gateway behind a
 * gate that keeps WebSocket upgrades waiting.
 */
import assert from 'node:assert/strict'
import { before, describe, it } from 'node:test'
import { type TestGateway, eventually, gateway, suiteScope } from '../support/gateway.js'
import { WAIT_MS } from '../support/remote.js'
import { cutOffAfterOneTurn } from '../support/remote-bridge.js'
import { within } from '../support/waiters.js'

async function stopped (gw: TestGateway, sessionId: string): Promise<void> {
  await eventually(async () => (await gw.request('GET', `/v1/sessions/${sessionId}`)).body.status === 'stopped', WAIT_MS, 'the session stopped')
}

// Each case has its own gate and session on one gateway.
describe('a gateway whose WebSocket never comes back', () => {
  let shared: TestGateway
  const scope = suiteScope()
  before(async () => { shared = await gateway(scope) })

  it('stdin EOF with control requests queued and the gateway never reachable again: each gets an error answer within the bound, the session is stopped, exit 1', async (t) => {
    // endWaitMs: the session's last lines cannot arrive (no WebSocket), so the end waits out that bound (15 s by default).
    const { gw, bridge, done, frames, lastSeen, sessionId } = await cutOffAfterOneTurn(t, { requestsAtEndMs: 1_000, endWaitMs: 1_000 }, shared)
    bridge.hostLine(JSON.stringify({ type: 'control_request', request_id: 'model-1', request: { subtype: 'set_model', model: 'claude-later' } }))
    bridge.hostEnd()

    assert.equal(await within(done, WAIT_MS, 'the end'), 1, lastSeen())
    const answers = frames().filter((f) => f.type === 'control_response' && f.response.request_id === 'model-1')
    assert.equal(answers.length, 1, lastSeen())
    assert.equal(answers[0].response.subtype, 'error')
    assert.equal(answers[0].response.error_code, 'request_timeout')
    // Never reached the CLI, and the CLI was stopped rather than left running.
    assert.equal(gw.stdinLines(sessionId).some((l) => l.request_id === 'model-1'), false)
    await stopped(gw, sessionId)
  })

  it('the gateway\'s WebSocket gone for longer than the give-up bound: claude-remote says so, stops the session (not left running), exit 1', async (t) => {
    const { gw, done, warned, lastSeen, sessionId } = await cutOffAfterOneTurn(t, { giveUpMs: 1_500, silence: { pingAfterMs: 200, deadAfterMs: 500 } }, shared)
    assert.equal(await within(done, WAIT_MS, 'the give-up'), 1, lastSeen())
    assert.ok(warned.some((m) => /giving up/.test(m)), lastSeen())
    await stopped(gw, sessionId)
  })
})
