/**
 * `DELETE /v1/sessions/:id` sent to a node that does not run the session's
 * CLI (any node behind a load balancer) stops it on the node that does, and
 * answers the session as it is once stopped, as GET then shows it (before,
 * it answered the receiving node's stale copy: `status: "starting"`, no exit,
 * the seq of before the stop).
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { TOKEN_A } from '../support/gateway.js'
import { type GatewayNode, type GatewayNodes, startNodes } from '../support/gateway-nodes.js'
import { REDIS_URL } from '../support/redis-server.js'

describe('DELETE on a node that does not run the CLI', { timeout: 60_000 }, () => {
  let cluster: GatewayNodes
  before(async () => { cluster = await startNodes({ count: 2, redisUrl: REDIS_URL }) })
  after(async () => { await cluster.close() })

  it('answers the stopped session, as GET shows it', async () => {
    const [a, b] = cluster.nodes as [GatewayNode, GatewayNode]
    const created = await a.create()
    // B has its own copy of the session loaded before the stop.
    assert.equal((await b.session(created.id)).status, 200)
    const res = await fetch(`${b.url}/v1/sessions/${created.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${TOKEN_A}` } })
    assert.equal(res.status, 200)
    const body = await res.json() as Record<string, any>
    const shown = (await a.session(created.id)).body
    assert.deepEqual({ status: body.status, exit: body.exit?.reason ?? null, last_seq: body.last_seq },
      { status: 'stopped', exit: 'stopped', last_seq: shown.last_seq }, JSON.stringify(body))
  })
})
