/**
 * A client control request outlives the connection that sent it. An SDK
 * bridge (claude-remote) that reconnects sends its unanswered requests again
 * and reads `duplicate_request_id` as "the original's answer will come". The
 * CLI's answer does (it is recorded), and so must the gateway's own: the
 * `session_not_running` of a CLI that exits before answering, and
 * `request_timeout`, reach the connection that asked again, not only the
 * dead one that asked first.
 */
import assert from 'node:assert/strict'
import { before, describe, it } from 'node:test'
import { isRefusal } from '../support/frames.js'
import { type TestGateway, gateway, suiteScope } from '../support/gateway.js'
import { LIMITS, client, holderOf } from '../support/sessions.js'

describe('a client request in flight when its client reconnects (the CLI never answers: --fake-mode hang)', () => {
  const scope = suiteScope()
  let gw: TestGateway
  before(async () => {
    gw = await gateway(scope, { cliArgs: ['--fake-mode', 'hang'], env: { ...LIMITS, CLIENT_REQUEST_TIMEOUT_MS: '1500' } })
  })

  /** The holder's request `id` is in flight (a second copy is refused as a duplicate); then the holder reconnects and sends it again. */
  async function reconnected (t: Parameters<typeof client>[1], id: string): Promise<{ session: string, again: Awaited<ReturnType<typeof client>> }> {
    const { id: session, holder } = await holderOf(gw, t)
    const request = { type: 'control_request', request_id: id, request: { subtype: 'mcp_status' } }
    holder.send(request)
    holder.send(request)
    await holder.waitFor(isRefusal('duplicate_request_id', id))
    holder.terminate()
    const again = await client(gw, t, session)
    assert.equal(again.frames[0]?.role, 'controller')
    again.send(request)
    await again.waitFor(isRefusal('duplicate_request_id', id))
    return { session, again }
  }

  it('the CLI exits before answering: the reconnected client gets session_not_running for it', async (t) => {
    const { session, again } = await reconnected(t, 'q-exit')
    assert.equal((await gw.request('DELETE', `/v1/sessions/${session}`)).status < 300, true)
    const refusal = await again.waitFor(isRefusal('session_not_running', 'q-exit'), 10_000)
    assert.equal(refusal.response.error, 'The CLI exited before answering')
  })

  it('the CLI does not answer in CLIENT_REQUEST_TIMEOUT_MS: the reconnected client gets request_timeout for it', async (t) => {
    const { session, again } = await reconnected(t, 'q-timeout')
    await again.waitFor(isRefusal('request_timeout', 'q-timeout'), 10_000)
    await gw.request('DELETE', `/v1/sessions/${session}`)
  })
})
