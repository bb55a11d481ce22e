/**
 * `DELETE /v1/sessions/:id` sent to a node that does not run the CLI waits
 * for the owner to stop it, however long the CLI takes to go (stdin closed,
 * then SIGTERM, then SIGKILL, CLI_STOP_TIMEOUT_MS apart): the owner is
 * alive and at work, so the request must not be answered 503
 * `node_unavailable` after the 5 s a call waits for a silent owner, while the
 * session is stopped anyway. Real gateway processes on one Redis; the fake
 * CLI ignores stdin's end and SIGTERM, as one busy in a tool may.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { TOKEN_A } from '../support/gateway.js'
import { type GatewayNode, type GatewayNodes, startNodes } from '../support/gateway-nodes.js'
import { REDIS_URL } from '../support/redis-server.js'

describe('a call the owner takes long to carry out', { timeout: 60_000 }, () => {
  let cluster: GatewayNodes
  before(async () => {
    cluster = await startNodes({ count: 2, redisUrl: REDIS_URL, concurrent: true, env: { CLI_STOP_TIMEOUT_MS: '3000', CLAUDE_ARGS_EXTRA: '--fake-mode hang,ignore-sigterm' } })
  })
  after(async () => { await cluster.close() })

  it('DELETE on another node answers the stopped session once the owner stopped its CLI', async () => {
    const [a, b] = cluster.nodes as [GatewayNode, GatewayNode]
    const created = await a.create()
    const res = await fetch(`${b.url}/v1/sessions/${created.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${TOKEN_A}` } })
    const body = await res.json() as Record<string, any>
    assert.equal(res.status, 200, JSON.stringify(body))
    assert.equal(body.status, 'stopped')
  })
})
