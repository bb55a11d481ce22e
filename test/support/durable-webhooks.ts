/**
 * Set-up shared by the durable-webhook files (webhooks-durable*.test.ts):
 * a receiver whose backend is down and gateway nodes on one Redis sending
 * to it, a turn that offers a turn.finished, and what the receiver and a
 * node's metrics say.
 */
import type { TestContext } from 'node:test'
import { isHello, isResult } from './frames.js'
import { TOKEN_A } from './gateway.js'
import { type GatewayNode, type GatewayNodes, startNodes } from './gateway-nodes.js'
import { REDIS_URL } from './redis-server.js'
import { Receiver } from './webhook-receiver.js'

export const SECRET = 'whsec-integration-0123456789abcdef012345'
export const WAIT_MS = 15_000

/** A receiver whose backend is down (503 to everything) and `count` nodes on one Redis sending to it. */
export async function downReceiverAndNodes (t: TestContext, count: number): Promise<{ receiver: Receiver, cluster: GatewayNodes }> {
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
export async function turnOn (node: GatewayNode, receiver: Receiver): Promise<{ sessionId: string, deliveryId: string }> {
  const { id } = await node.create()
  const holder = await node.connect(id)
  await holder.waitFor(isHello)
  holder.sendUser('hello')
  await holder.waitFor(isResult)
  const offered = await receiver.until(() => receiver.requests.find((r) => r.json.session_id === id && r.json.type === 'turn.finished'), 'turn.finished offered')
  return { sessionId: id, deliveryId: offered.json.id }
}

/** The counter `cgw_webhook_recovered_total` on `node`. */
export async function recovered (node: GatewayNode): Promise<number> {
  const text = await (await fetch(`${node.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN_A}` } })).text()
  return Number(/^cgw_webhook_recovered_total (\d+)$/m.exec(text)?.[1] ?? Number.NaN)
}

/** Requests with this Webhook-Id answered 200 (the receiver's status when they came). */
export function deliveredWith (receiver: Receiver, id: string, from: number): number {
  return receiver.requests.slice(from).filter((r) => r.headers['webhook-id'] === id).length
}
