/**
 * An answer that arrives while the CLI is being stopped (its stdin closed,
 * the process not yet gone: up to CLI_STOP_TIMEOUT_MS) is refused, 409
 * `session_not_running`, since the CLI can no longer read it; nothing is
 * written to its stdin, and the prompt ends `cancelled` with the exit
 * (before, it was answered 200 and recorded `allowed` though dropped).
 */
import assert from 'node:assert/strict'
import { before, describe, it } from 'node:test'
import { resolved } from '../support/frames.js'
import { type TestGateway, gateway, suiteScope } from '../support/gateway.js'
import { LIMITS, answersTo } from '../support/sessions.js'
import { promptWhileStopping, slowExitCli } from '../support/stopping-session.js'

describe('an answer while the session is stopping', () => {
  const scope = suiteScope()
  let gw: TestGateway
  before(async () => {
    // A CLI slow to exit after stdin EOF: it goes on SIGTERM, CLI_STOP_TIMEOUT_MS later.
    gw = await gateway(scope, { env: { ...LIMITS, CLAUDE_BIN: slowExitCli(scope), CLI_STOP_TIMEOUT_MS: '1500' } })
  })

  it('is refused (the CLI can no longer read it), and the prompt ends cancelled', async (t) => {
    const { id, holder, prompt, stopping } = await promptWhileStopping(gw, t)
    const http = await gw.request('POST', `/v1/sessions/${id}/permissions/${prompt.request_id}`, { behavior: 'allow' })
    await stopping
    const r = await holder.waitFor(resolved(prompt.request_id))
    const written = answersTo(gw, id, prompt.request_id)
    assert.deepEqual(written, [], 'the CLI never read the answer (its stdin was closed)')
    assert.deepEqual({ http: http.status, decision: r.decision }, { http: 409, decision: 'cancelled' },
      `HTTP ${http.status} ${JSON.stringify(http.body)}; history says ${r.decision} by ${String(r.by)}`)
  })
})
