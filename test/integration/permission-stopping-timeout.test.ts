/**
 * A prompt still pending while its session is being stopped (DELETE, idle
 * stop, shutdown: stdin closed, the CLI not yet gone for up to
 * CLI_STOP_TIMEOUT_MS) was withdrawn because the session ended: when
 * PERMISSION_TIMEOUT_MS runs out during that stop, it ends `cancelled`, as
 * docs/PROTOCOL.md says of a CLI's exit, with nothing written to the closed
 * stdin (before, it was recorded `timed_out`, as if nobody had answered).
 */
import assert from 'node:assert/strict'
import { before, describe, it } from 'node:test'
import { type Frame, isStatus, resolved } from '../support/frames.js'
import { type TestGateway, gateway, suiteScope } from '../support/gateway.js'
import { LIMITS, answersTo } from '../support/sessions.js'
import { promptWhileStopping, slowExitCli } from '../support/stopping-session.js'

const PERMISSION_TIMEOUT_MS = 1000

describe('a prompt pending while the session is stopping', () => {
  const scope = suiteScope()
  let gw: TestGateway
  before(async () => {
    // A CLI slow to exit after stdin EOF: the stop outlasts the prompt's PERMISSION_TIMEOUT_MS.
    gw = await gateway(scope, { env: { ...LIMITS, CLAUDE_BIN: slowExitCli(scope), CLI_STOP_TIMEOUT_MS: String(PERMISSION_TIMEOUT_MS * 4), PERMISSION_TIMEOUT_MS: String(PERMISSION_TIMEOUT_MS) } })
  })

  it('ends cancelled in the event log, not timed_out, and nothing is written for it', async (t) => {
    const { id, holder, prompt, stopping } = await promptWhileStopping(gw, t)
    const live = await holder.waitFor(resolved(prompt.request_id), PERMISSION_TIMEOUT_MS * 8)
    await stopping
    await holder.waitFor(isStatus('stopped'))
    const events = await gw.request('GET', `/v1/sessions/${id}/events?limit=1000`)
    assert.equal(events.status, 200)
    const recorded = (events.body.events as Frame[]).filter(resolved(prompt.request_id)).map((f) => f.decision)
    assert.deepEqual({ recorded, live: live.decision }, { recorded: ['cancelled'], live: 'cancelled' })
    assert.deepEqual(answersTo(gw, id, prompt.request_id), [], 'nothing written to the closed stdin')
  })
})
