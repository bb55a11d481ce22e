/**
 * Webhook deliveries kept in Redis until they end (src/webhooks/outbox-sweep.ts,
 * the store's outbox), with real gateway processes on one Redis and a real
 * receiver whose backend is down (503) until the test brings it up:
 *
 * - a node SIGKILLed with an event unsent: the other node sends it, with the
 *   same Webhook-Id, once the dead node's report lapses;
 * - a node restarted under the same NODE_ID sends what its previous run left;
 * - an outbox entry written into Redis behind the gateways' back (unsigned)
 *   is taken over and dropped, never sent;
 * - a Redis restarted without its data: the gateway keeps what it still has
 *   to send again once Redis answers.
 *
 * A node stopped (SIGTERM) is webhooks-durable-shutdown.test.ts, a file of
 * its own so the runner runs the two side by side. Every wait is on a request arriving, a process exiting, a key in Redis or
 * a metric; none is a sleep.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { describe, it } from 'node:test'
import { defaultNodeId } from '../../src/config/node-id.js'
import { SECRET, WAIT_MS, deliveredWith, downReceiverAndNodes, recovered, turnOn } from '../support/durable-webhooks.js'
import { isHello, isResult } from '../support/frames.js'
import { type TestGateway, eventually, gateway } from '../support/gateway.js'
import type { GatewayNode } from '../support/gateway-nodes.js'
import { REDIS_URL, redisCommand, startRedisServer } from '../support/redis-server.js'
import { Receiver } from '../support/webhook-receiver.js'

// Each case has its own bound: they start gateway nodes, several per case, so one bound for the suite
// timed it out under load and cancelled the cases still to run.
describe('webhook deliveries kept in Redis', () => {
  it('a node killed with an event unsent: another node sends it, with the same Webhook-Id; an entry forged in Redis is never sent', { timeout: 60_000 }, async (t) => {
    const { receiver, cluster } = await downReceiverAndNodes(t, 2)
    const [a, b] = cluster.nodes as [GatewayNode, GatewayNode]
    const { deliveryId } = await turnOn(a, receiver)

    // Written behind the gateways' back under a node that is gone: no signature.
    const forgedId = randomUUID()
    const forged = JSON.stringify({ v: 1, type: 'turn.finished', session: randomUUID(), body: JSON.stringify({ id: forgedId, type: 'turn.finished' }), at: 0, n: 0 })
    await redisCommand(REDIS_URL, ['HSET', `${cluster.prefix}{webhooks}:out:node-z`, forgedId, forged])
    await redisCommand(REDIS_URL, ['SADD', `${cluster.prefix}{webhooks}:nodes`, 'node-z'])

    await a.kill()
    const from = receiver.requests.length
    receiver.status = 200
    await receiver.until(() => deliveredWith(receiver, deliveryId, from) > 0, 'the killed node\'s turn.finished, sent by node b', WAIT_MS)
    assert.ok(await recovered(b) >= 1)
    await eventually(async () => await redisCommand(REDIS_URL, ['EXISTS', `${cluster.prefix}{webhooks}:out:node-z`]) === 0, WAIT_MS, 'the forged entry taken over')
    assert.equal(receiver.requests.filter((r) => r.headers['webhook-id'] === forgedId).length, 0, 'the forged entry was dropped, not sent')
    // Sent once by b: it is not kept any more, under any node.
    await eventually(async () => await redisCommand(REDIS_URL, ['HEXISTS', `${cluster.prefix}{webhooks}:out:node-b`, deliveryId]) === 0, WAIT_MS, 'the delivery forgotten once sent')
    assert.equal(await redisCommand(REDIS_URL, ['HEXISTS', `${cluster.prefix}{webhooks}:out:node-b`, forgedId]), 0, 'nor is the forged one kept')
    assert.equal(await redisCommand(REDIS_URL, ['EXISTS', `${cluster.prefix}{webhooks}:out:node-a`]), 0)
  })

  it('a node restarted under the same NODE_ID sends what its previous run left unsent', { timeout: 60_000 }, async (t) => {
    const { receiver, cluster } = await downReceiverAndNodes(t, 1)
    const { deliveryId } = await turnOn(cluster.nodes[0] as GatewayNode, receiver)
    await (cluster.nodes[0] as GatewayNode).kill()
    const from = receiver.requests.length
    receiver.status = 200
    const again = await cluster.start('node-a')
    await receiver.until(() => deliveredWith(receiver, deliveryId, from) > 0, 'the turn.finished of the previous run')
    const sent = receiver.requests.slice(from).find((r) => r.headers['webhook-id'] === deliveryId)
    assert.equal(sent?.headers['webhook-attempt'], '1', 'its attempts counted again on the new run')
    assert.equal(await recovered(again), 1)
  })

  it('a Redis restarted without its data: what is still to send is kept again once it answers', { timeout: 60_000 }, async (t) => {
    const server = await startRedisServer()
    // The gateway closed first: closing with its Redis gone, it would wait out its grace for the store.
    let gw: TestGateway | null = null
    t.after(async () => { await gw?.close(); await server.kill() })
    const receiver = await Receiver.start(t)
    receiver.status = 503
    gw = await gateway(t, { env: { REDIS_URL: server.url, REDIS_PREFIX: 'cgw-wh:', WEBHOOK_URL: `http://127.0.0.1:${receiver.port}/hooks`, WEBHOOK_SECRET: SECRET, WEBHOOK_RETRY_BASE_MS: '20', WEBHOOK_RETRY_MAX_MS: '200', WEBHOOK_MAX_ATTEMPTS: '100' } })
    const { id } = await gw.createSession()
    const holder = await gw.connect(id)
    await holder.waitFor(isHello)
    holder.sendUser('hello')
    await holder.waitFor(isResult)
    const offered = await receiver.until(() => receiver.requests.find((r) => r.json.type === 'turn.finished'), 'turn.finished offered')
    const key = `cgw-wh:{webhooks}:out:${defaultNodeId()}`
    const keptNow = async (): Promise<boolean> => await redisCommand(server.url, ['HEXISTS', key, offered.json.id]) === 1
    await eventually(keptNow, WAIT_MS, 'kept in Redis')

    // A key only the test writes: gone after the restart, so the restart lost everything (the gateway may
    // already have reconnected and kept its delivery again by the time the test looks, so that key proves nothing).
    await redisCommand(server.url, ['SET', 'cgw-wh:marker', '1'])
    await server.stop()
    await server.start()
    assert.equal(await redisCommand(server.url, ['EXISTS', 'cgw-wh:marker']), 0, 'the restart lost what Redis held')
    await eventually(keptNow, WAIT_MS, 'kept again once the gateway is connected again')

    receiver.status = 200
    await receiver.until(() => receiver.requests.some((r) => r.json.id === offered.json.id && r.res.statusCode === 200), 'delivered')
    await eventually(async () => !await keptNow(), WAIT_MS, 'forgotten once delivered')
  })
})
