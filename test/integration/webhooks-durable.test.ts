/**
 * Webhook deliveries kept in Redis until they end (src/webhooks/outbox-sweep.ts,
 * the store's outbox), with real gateway processes on one Redis and a real
 * receiver whose backend is down (503) until the test brings it up:
 *
 * - a node SIGKILLed with an event unsent: the other node sends it, with the
 *   same Webhook-Id, once the dead node's report lapses;
 * - a node restarted under the same NODE_ID sends what its previous run left;
 * - a node stopped (SIGTERM) while the receiver is down: its turn.finished
 *   and the session.ended of its shutdown reach the receiver from the other
 *   node, in order;
 * - a node stopped while the receiver is slow: it stays listed while it
 *   drains, so the other node (seen sweeping meanwhile) takes nothing it is
 *   still sending, and each event arrives once;
 * - an outbox entry written into Redis behind the gateways' back (unsigned)
 *   is taken over and dropped, never sent;
 * - a Redis restarted without its data: the gateway keeps what it still has
 *   to send again once Redis answers.
 *
 * Every wait is on a request arriving, a process exiting, a key in Redis or
 * a metric; none is a sleep.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { describe, it } from 'node:test'
import type { TestContext } from 'node:test'
import { defaultNodeId } from '../../src/config/node-id.js'
import { isHello, isResult } from '../support/frames.js'
import { TOKEN_A, type TestGateway, eventually, gateway } from '../support/gateway.js'
import { type GatewayNode, type GatewayNodes, startNodes } from '../support/gateway-nodes.js'
import { REDIS_URL, redisCommand, startRedisServer } from '../support/redis-server.js'
import { Receiver } from '../support/webhook-receiver.js'

const SECRET = 'whsec-integration-0123456789abcdef012345'
const WAIT_MS = 15_000

/** A receiver whose backend is down (503 to everything) and `count` nodes on one Redis sending to it. */
async function downReceiverAndNodes (t: TestContext, count: number): Promise<{ receiver: Receiver, cluster: GatewayNodes }> {
  const receiver = await Receiver.start(t)
  receiver.status = 503
  const cluster = await startNodes({
    count: 0,
    redisUrl: REDIS_URL,
    env: { WEBHOOK_URL: `http://127.0.0.1:${receiver.port}/hooks`, WEBHOOK_SECRET: SECRET, WEBHOOK_RETRY_BASE_MS: '20', WEBHOOK_RETRY_MAX_MS: '200', WEBHOOK_MAX_ATTEMPTS: '100' }
  })
  t.after(() => cluster.close())
  // Started side by side (a process start is most of a case's time); every start settled before a failure
  // is thrown, so the close above finds each node that did start.
  const started = await Promise.allSettled(Array.from({ length: count }, async (_, i) => await cluster.start(`node-${String.fromCharCode(97 + i)}`)))
  for (const s of started) if (s.status === 'rejected') throw s.reason
  cluster.nodes.push(...started.map((s) => (s as PromiseFulfilledResult<GatewayNode>).value))
  return { receiver, cluster }
}

/** Runs one turn on a new session of `node`; resolves with the session id once the receiver has been offered its turn.finished. */
async function turnOn (node: GatewayNode, receiver: Receiver): Promise<{ sessionId: string, deliveryId: string }> {
  const { id } = await node.create()
  const holder = await node.connect(id)
  await holder.waitFor(isHello)
  holder.sendUser('hello')
  await holder.waitFor(isResult)
  const offered = await receiver.until(() => receiver.requests.find((r) => r.json.session_id === id && r.json.type === 'turn.finished'), 'turn.finished offered')
  return { sessionId: id, deliveryId: offered.json.id }
}

/** The counter `cgw_webhook_recovered_total` on `node`. */
async function recovered (node: GatewayNode): Promise<number> {
  const text = await (await fetch(`${node.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN_A}` } })).text()
  return Number(/^cgw_webhook_recovered_total (\d+)$/m.exec(text)?.[1] ?? Number.NaN)
}

/** Requests with this Webhook-Id answered 200 (the receiver's status when they came). */
function deliveredWith (receiver: Receiver, id: string, from: number): number {
  return receiver.requests.slice(from).filter((r) => r.headers['webhook-id'] === id).length
}

// Each case has its own bound: the five start ten gateway nodes between them, so one bound for the suite
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
