/**
 * An answer routed to an owner that is slow to confirm it (real gateway
 * processes on one Redis, the fake CLI). The owner is frozen (SIGSTOP) past
 * three heartbeats while its lease still holds: the test stretches the lease
 * for the frozen process, standing in for an owner whose lease keeper runs
 * while its inbox lags. The client's node must not take the answer for lost:
 * handled there it was refused `unknown_request` though the owner took it
 * when it woke, and the client, no longer routed, had its next answer
 * refused the same way (that prompt stuck until it sent a message).
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { Redis } from 'ioredis'
import { type Frame, isHello, isPrompt, isResult, resolved } from '../support/frames.js'
import { eventually } from '../support/gateway.js'
import { type GatewayNode, type GatewayNodes, startNodes } from '../support/gateway-nodes.js'
import { REDIS_URL } from '../support/redis-server.js'

const holdsIt = (f: Frame): boolean => f.type === 'gateway' && f.subtype === 'holder' && f.role === 'controller'
const isGatewayError = (f: Frame): boolean => f.type === 'gateway' && f.subtype === 'error'
const allow = (prompt: Frame): Frame => ({ type: 'control_response', response: { subtype: 'success', request_id: prompt.request_id, response: { behavior: 'allow', updatedInput: prompt.request.input } } })

/** The node-bus messages in a node's inbox, parsed, in order. */
async function inbox (redis: Redis, nodes: GatewayNodes, node: string): Promise<Frame[]> {
  const entries = await redis.xrange(`${nodes.prefix}node:{${node}}:inbox`, '-', '+')
  return entries.map(([, fields]) => JSON.parse(fields[1] as string) as Frame)
}

describe('an answer routed to an owner slow to confirm it', { timeout: 60_000 }, () => {
  let cluster: GatewayNodes
  let redis: Redis
  before(async () => {
    cluster = await startNodes({ count: 2, redisUrl: REDIS_URL })
    redis = new Redis(REDIS_URL)
  })
  after(async () => {
    redis.disconnect()
    await cluster.close()
  })

  it('waits for the owner while it holds the lease: the answer and the next one reach the CLI, none is refused', async () => {
    const [a, b] = cluster.nodes as [GatewayNode, GatewayNode]
    const created = await a.create()
    const x = await b.connect(created.id, 'after=0')
    const xId = (await x.waitFor(isHello)).client_id as string
    await x.waitFor(holdsIt)
    x.sendUser('ask2')
    const first = await x.waitFor(isPrompt)
    const from = x.frames.length

    a.child.kill('SIGSTOP')
    try {
      assert.equal(await redis.pexpire(`${cluster.prefix}{${created.id}}:lease`, 60_000), 1, 'the owner\'s lease, stretched')
      x.send(allow(first))
      // Past the point where node B used to give the answer up (three heartbeats after it was
      // sent): five more heartbeats of X's attachment, or X told its answer failed.
      const heartbeatsAfterAnswer = async (): Promise<number> => {
        const messages = await inbox(redis, cluster, a.id)
        const sent = messages.findIndex((m) => m.k === 'frame' && m.c === xId && m.f?.type === 'control_response')
        return sent < 0 ? 0 : messages.slice(sent).filter((m) => m.k === 'attach' && m.c === xId).length
      }
      await eventually(async () => x.frames.slice(from).some(isGatewayError) || await heartbeatsAfterAnswer() >= 5,
        15_000, 'five heartbeats after the answer, or an error')
    } finally {
      a.child.kill('SIGCONT')
    }
    const done = await x.waitFor(resolved(first.request_id), 10_000, from)
    assert.deepEqual({ decision: done.decision, by: done.by }, { decision: 'allowed', by: xId })

    // The same turn's second prompt: X answers it as it is, still routed to the owner.
    const second = await x.waitFor((f) => isPrompt(f) && f.request_id !== first.request_id, 10_000, from)
    x.send(allow(second))
    await x.waitFor((f) => resolved(second.request_id)(f) || (isGatewayError(f) && f.request_id === second.request_id), 10_000, from)
    const refused = x.frames.slice(from).filter(isGatewayError).map((f) => ({ code: f.code, request_id: f.request_id }))
    assert.deepEqual(refused, [], 'no answer was refused')
    const next = await x.waitFor(resolved(second.request_id), 10_000, from)
    assert.deepEqual({ decision: next.decision, by: next.by }, { decision: 'allowed', by: xId })
    const result = await x.waitFor(isResult, 10_000, from)
    assert.equal(result.is_error, false)
    assert.equal(cluster.argvDumps(created.id).length, 1, 'one CLI, on the owner')
  })
})
