/**
 * `turn_running` follows the CLI, not a count of messages against results:
 * turns that print no result of their own (queued messages an `interrupt`
 * with `cancel_queued: true` cancels, as the real CLI 2.1.332 does and
 * advertises with `interrupt_cancel_queued_v1`) end with the CLI's
 * `session_state_changed` `idle`. Left counted, the session showed a turn
 * running for ever and never idled out once its clients left.
 */
import assert from 'node:assert/strict'
import { before, describe, it } from 'node:test'
import { type Frame, isIdle, isResult } from '../support/frames.js'
import { type TestGateway, eventually, gateway, suiteScope } from '../support/gateway.js'
import { LIMITS, holderOf } from '../support/sessions.js'

// Long enough for the holder to attach before a new session with no client idles out.
const IDLE_MS = 2000

const user = (text: string, uuid: string): Frame => ({ type: 'user', message: { role: 'user', content: text }, uuid, parent_tool_use_id: null })

describe('turns cancelled by interrupt cancel_queued', () => {
  const scope = suiteScope()
  let gw: TestGateway
  before(async () => { gw = await gateway(scope, { env: { ...LIMITS, IDLE_TIMEOUT_MS: String(IDLE_MS) } }) })

  it('turn_running is false once the CLI is idle, and the session idles out when its client leaves', async (t) => {
    const { id, holder } = await holderOf(gw, t)
    holder.send(user('slow 50 200', '11111111-1111-4111-8111-111111111111'))
    holder.send(user('one', '22222222-2222-4222-8222-222222222222'))
    holder.send(user('two', '33333333-3333-4333-8333-333333333333'))
    const from = holder.frames.length
    holder.send({ type: 'control_request', request_id: 'stop-all', request: { subtype: 'interrupt', cancel_queued: true } })
    const receipt = await holder.waitFor((f) => f.type === 'control_response' && f.response?.request_id === 'stop-all', 10_000, from)
    assert.deepEqual(receipt.response.response, { still_queued: [], cancelled: ['22222222-2222-4222-8222-222222222222', '33333333-3333-4333-8333-333333333333'] })
    assert.equal((await holder.waitFor(isResult, 10_000, from)).subtype, 'error_during_execution')
    await holder.waitFor(isIdle, 10_000, from)
    assert.equal(holder.frames.filter(isResult).length, 1, 'the cancelled messages print no result')

    const snapshot = await gw.request('GET', `/v1/sessions/${id}`)
    assert.equal(snapshot.body.turn_running, false, 'no turn runs: the CLI said idle')

    // Idle timeout: no client, no turn, no prompt (an attached observer would keep it busy: polled instead).
    holder.terminate()
    await eventually(async () => (await gw.request('GET', `/v1/sessions/${id}`)).body.status === 'stopped', 10_000, 'the session stopped by IDLE_TIMEOUT_MS')
  })
})
