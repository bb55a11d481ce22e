/**
 * A `cli_problem` is said once per turn (a turn ends with `result`). A turn
 * cut short by the CLI's end (stopped, crashed: no result) ends too: the next
 * CLI's turn that hits the same problem is told it again, and counts its own
 * retries, not the dead CLI's.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { isStatus } from '../support/frames.js'
import { gateway } from '../support/gateway.js'
import { scriptedCli } from '../support/scripted-cli.js'
import { holderOf } from '../support/sessions.js'

/**
 * A CLI that answers control requests and, for any prompt, starts a turn
 * whose API cannot be reached: `api_retry` lines (no HTTP status, as when
 * nothing answers), then it waits for ever (the user stops the session).
 */
const CLI = {
  head: 'let attempt = 0',
  onUser: `      out({ type: 'system', subtype: 'init', session_id: 's' })
      for (let i = 0; i < 2; i++) out({ type: 'system', subtype: 'api_retry', attempt: ++attempt, max_retries: 10, retry_delay_ms: 500, error_status: null, error: 'unknown', session_id: 's' })`
}

const isProblem = (f: any): boolean => f.type === 'gateway' && f.subtype === 'cli_problem' && f.code === 'api_unreachable'

describe('session core: cli_problem after a restart', () => {
  it('a CLI stopped mid-turn leaves nothing told or counted for the turn of the CLI after it', async (t) => {
    const bin = scriptedCli(t, 'unreachable-cli', CLI)
    const gw = await gateway(t, { env: { CLAUDE_BIN: bin, CLAUDE_ARGS_EXTRA: '' } })
    const { id, holder } = await holderOf(gw, t)
    holder.sendUser('first')
    await holder.waitFor(isProblem)
    // The user gives up on the turn: the session is stopped, the turn never printed a result.
    assert.equal((await gw.request('DELETE', `/v1/sessions/${id}`)).status, 200)
    await holder.waitFor(isStatus('stopped'))
    const from = holder.frames.length
    holder.sendUser('second')
    const retries = await holder.waitFor((f) => f.type === 'system' && f.subtype === 'api_retry' && f.attempt === 2, 10_000, from)
    // A fence: the CLI's answer to it is recorded after anything recorded for its retries.
    holder.send({ type: 'control_request', request_id: 'fence', request: { subtype: 'mcp_status' } })
    await holder.waitFor((f) => f.type === 'control_response' && f.response?.request_id === 'fence', 10_000, from)
    const at = holder.frames.indexOf(retries)
    const problem = holder.frames.slice(from).find(isProblem)
    assert.ok(problem !== undefined && holder.frames.indexOf(problem) > at,
      `the second CLI's unreachable API is told too: ${holder.frames.slice(from).map((f) => `${f.type}/${f.subtype ?? ''}`).join(' ')}`)
    assert.equal(problem.attempt, 2)
  })
})
