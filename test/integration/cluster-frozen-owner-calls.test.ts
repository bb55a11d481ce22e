/**
 * An HTTP request made on one node that the session's owner carries out (an
 * answer to a prompt, here) waits in the owner's inbox while the owner is
 * frozen (SIGSTOP) past its lease; another node takes the session over
 * meanwhile, and the owner wakes. The call must not be carried out on the
 * woken owner's fenced CLI (its tool would run for a turn nobody stores), nor
 * be answered 200 as if it had been: the session moved. Real gateway
 * processes on one Redis; the fake CLI logs what it read on stdin.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { TOKEN_A, processAlive } from '../support/gateway.js'
import { frozenOwnerNodes, movedWhileFrozen } from '../support/frozen-owner.js'
import type { GatewayNode } from '../support/gateway-nodes.js'
import { REDIS_URL, redisCommand } from '../support/redis-server.js'
import { eventually } from '../support/waiters.js'

describe('a call waiting in a frozen owner\'s inbox', { timeout: 60_000 }, () => {
  const nodes = frozenOwnerNodes('cgw-frozen-calls-')
  /** The messages waiting in a node's bus inbox. */
  const inbox = async (node: string): Promise<Array<Record<string, unknown>>> => {
    const entries = await redisCommand(REDIS_URL, ['XRANGE', `${nodes.cluster.prefix}node:{${node}}:inbox`, '-', '+']) as Array<[string, string[]]>
    return entries.map(([, fields]) => JSON.parse(fields[1] as string) as Record<string, unknown>)
  }

  it('an answer is not given to the woken owner\'s CLI, nor answered 200, once the session moved', async () => {
    const [a, b] = nodes.cluster.nodes as [GatewayNode, GatewayNode]
    const { id, requestId, oldPid, frozen } = await movedWhileFrozen(nodes.cluster, {
      beforeFreeze: async (id) => {
        // A client of B attached to A: B repeats its attachment every heartbeat, so A's inbox read
        // was sent again just before the freeze, and does not time out before A wakes.
        const watching = await b.connect(id, 'after=0&role=observer')
        await watching.waitFor((f) => f.type === 'gateway' && f.subtype === 'request_pending')
      },
      frozen: async (id, requestId) => {
        const answered = fetch(`${b.url}/v1/sessions/${id}/permissions/${requestId}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${TOKEN_A}`, 'content-type': 'application/json' },
          body: JSON.stringify({ behavior: 'allow' })
        }).then(async (res) => ({ status: res.status, body: await res.json() }))
        await eventually(async () => (await inbox(a.id)).some((m) => m.k === 'call' && m.op === 'answer'), 10_000, 'the answer call in A\'s inbox')
        return { answered }
      }
    })
    const reply = await frozen.answered
    await eventually(() => !processAlive(oldPid), 15_000, 'the fenced CLI to be stopped')
    assert.deepEqual(nodes.answersGiven(id).filter((r) => r === requestId), [], 'no CLI was given the answer')
    assert.notEqual(reply.status, 200, `answered ${JSON.stringify(reply.body)} though the session moved`)
  })
})
