/**
 * A node load report written into Redis by someone other than a gateway
 * (no STORE_SECRET) is not believed. Two real gateway processes share one
 * Redis; a third node that does not exist is written into the reports with
 * plenty of room, once without a MAC and once as a copy of node B's signed
 * report under its own name. A create on the full node A must still go to B,
 * the node with room that really runs, and no create may be sent to the
 * inboxes of the forged ones (believed, each would be tried first: a create
 * request left in an inbox nobody reads, and the caller kept waiting for
 * its reply's timeout); A counts the refusals in cgw_store_refused_total.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { TOKEN_A } from '../support/gateway.js'
import { type GatewayNodes, startNodes } from '../support/gateway-nodes.js'
import { REDIS_URL, redisCommand } from '../support/redis-server.js'

describe('a forged node load report', { timeout: 60_000 }, () => {
  let cluster: GatewayNodes
  before(async () => { cluster = await startNodes({ count: 2, redisUrl: REDIS_URL, env: { MAX_SESSIONS: '2' } }) })
  after(async () => { await cluster.close() })

  it('is left out of placement: a create on a full node goes to the real node with room', async () => {
    const [a, b] = cluster.nodes as [typeof cluster.nodes[0], typeof cluster.nodes[0]]
    await a.create()
    await a.create()
    await b.create()
    const key = `${cluster.prefix}nodes`
    const ofB = JSON.parse(await redisCommand(REDIS_URL, ['HGET', key, b.id]) as string)
    // Less loaded than B either way (B runs 1 of 2): believed, either would be tried first.
    const until = Date.now() + 3_600_000
    await redisCommand(REDIS_URL, ['HSET', key, 'node-forged', JSON.stringify({ running: 0, max: 100, at: Date.now(), until })])
    await redisCommand(REDIS_URL, ['HSET', key, 'node-copied', JSON.stringify({ ...ofB, node: 'node-copied', running: 0 })])

    const placed = await fetch(`${a.url}/v1/sessions`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN_A}`, 'content-type': 'application/json' }, body: '{}' })
    const body = await placed.json() as any
    assert.equal(placed.status, 201, JSON.stringify(body))
    assert.equal((await b.session(body.id)).body.pid, body.pid, 'node B runs it')
    for (const forged of ['node-forged', 'node-copied']) {
      assert.equal(await redisCommand(REDIS_URL, ['EXISTS', `${cluster.prefix}node:{${forged}}:inbox`]), 0, `nothing was sent to ${forged}`)
    }

    const metrics = await (await fetch(`${a.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN_A}` } })).text()
    const count = (reason: string): number => Number(new RegExp(`^cgw_store_refused_total\\{kind="node",reason="${reason}"\\} (\\d+)`, 'm').exec(metrics)?.[1] ?? NaN)
    assert.ok(count('unsigned') >= 1, 'the report without a MAC was counted')
    assert.ok(count('mac') >= 1, 'the copied report was counted')
  })
})
