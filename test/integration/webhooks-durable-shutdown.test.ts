/**
 * Webhook deliveries kept in Redis (src/webhooks/outbox-sweep.ts) when a
 * node is stopped (SIGTERM), with real gateway processes on one Redis and a
 * real receiver (test/support/durable-webhooks.ts):
 *
 * - stopped while the receiver is down: its turn.finished and the
 *   session.ended of its shutdown reach the receiver from the other node,
 *   in order;
 * - stopped while the receiver is slow: it stays listed while it drains,
 *   so the other node (seen sweeping meanwhile) takes nothing it is still
 *   sending, and each event arrives once.
 *
 * Split from webhooks-durable.test.ts so the runner runs the two side by
 * side. Every wait is on a request arriving, a process exiting, a key in
 * Redis or a metric; none is a sleep.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { describe, it } from 'node:test'
import { WAIT_MS, downReceiverAndNodes, recovered, turnOn } from '../support/durable-webhooks.js'
import { eventually } from '../support/gateway.js'
import type { GatewayNode } from '../support/gateway-nodes.js'
import { REDIS_URL, redisCommand } from '../support/redis-server.js'

// Each case has its own bound: each starts two gateway nodes.
describe('webhook deliveries kept in Redis, a node stopped', () => {
  it('a node stopped while the receiver is down: its events, the shutdown\'s session.ended included, reach the receiver from another node, in order', { timeout: 60_000 }, async (t) => {
    const { receiver, cluster } = await downReceiverAndNodes(t, 2)
    const [a, b] = cluster.nodes as [GatewayNode, GatewayNode]
    const { sessionId } = await turnOn(a, receiver)
    a.child.kill('SIGTERM')
    assert.equal(await a.exited, 0)
    const from = receiver.requests.length
    receiver.status = 200
    await receiver.until(() => receiver.requests.slice(from).filter((r) => r.json.session_id === sessionId).length >= 2, 'both events from node b', WAIT_MS)
    assert.deepEqual(receiver.requests.slice(from).filter((r) => r.json.session_id === sessionId).map((r) => r.json.type), ['turn.finished', 'session.ended'])
    assert.equal(await recovered(b), 2)
  })

  it('a node stopped while the receiver is slow: no other node takes over what it is still sending; each event arrives once, from it', { timeout: 60_000 }, async (t) => {
    const { receiver, cluster } = await downReceiverAndNodes(t, 2)
    const [a, b] = cluster.nodes as [GatewayNode, GatewayNode]
    receiver.status = 200
    receiver.hang = true
    const { sessionId } = await turnOn(a, receiver)
    a.child.kill('SIGTERM')
    const report = async (): Promise<any> => JSON.parse(await redisCommand(REDIS_URL, ['HGET', `${cluster.prefix}nodes`, 'node-a']) as string ?? 'null')
    // Its turn.finished in flight (held by the receiver), the shutdown's session.ended queued behind it: both kept.
    const keptByA = async (): Promise<number> => await redisCommand(REDIS_URL, ['HLEN', `${cluster.prefix}{webhooks}:out:node-a`]) as number
    await eventually(async () => await keptByA() === 2, WAIT_MS, 'the shutdown\'s session.ended kept')
    // A sweep of node b while node a drains: it takes over a gone node's (forged, dropped) entry ...
    const forgedId = randomUUID()
    await redisCommand(REDIS_URL, ['HSET', `${cluster.prefix}{webhooks}:out:node-z`, forgedId, 'not signed'])
    await redisCommand(REDIS_URL, ['SADD', `${cluster.prefix}{webhooks}:nodes`, 'node-z'])
    await eventually(async () => await redisCommand(REDIS_URL, ['EXISTS', `${cluster.prefix}{webhooks}:out:node-z`]) === 0, WAIT_MS, 'node b sweeping')
    // ... and not node a's, which it is still sending.
    assert.equal(await keptByA(), 2, 'node a\'s two events still kept under node a')
    assert.equal(await recovered(b), 0)
    assert.equal((await report())?.max, 0, 'node a still listed while it drains, with no room for creates')
    receiver.release() // within node a's 5 s for what it still sends at shutdown
    assert.equal(await a.exited, 0)
    const ids = receiver.requests.filter((r) => r.json.session_id === sessionId).map((r) => r.headers['webhook-id'])
    assert.deepEqual(receiver.requests.filter((r) => r.json.session_id === sessionId).map((r) => r.json.type), ['turn.finished', 'session.ended'], 'each event once')
    assert.equal(new Set(ids).size, 2)
    assert.equal(await recovered(b), 0, 'nothing taken over')
    assert.equal(await redisCommand(REDIS_URL, ['EXISTS', `${cluster.prefix}{webhooks}:out:node-a`]), 0, 'nothing left kept')
    assert.equal(await report(), null, 'node a left the list once done')
  })

})
