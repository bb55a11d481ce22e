/**
 * Clients of a node that does not run the CLI, after the session's CLI
 * stopped and started again on another node (real gateway processes on one
 * Redis, the fake CLI). When the CLI stops, a client that asked for control
 * holds the session again on its own node; when another node then starts
 * the CLI, that client is routed to it, so the owner's holder rules apply to
 * it again. Before, it stayed unrouted: it was shown the new CLI's prompts
 * in full as the holder of its own node, and its answers, handled there,
 * were refused `unknown_request` until it sent a user message.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { type Frame, isError, isHello, isIdle, isPrompt, isStatus, resolved } from '../support/frames.js'
import { TOKEN_A } from '../support/gateway.js'
import { type GatewayNode, type GatewayNodes, startNodes } from '../support/gateway-nodes.js'
import { REDIS_URL } from '../support/redis-server.js'

const isHolderFrame = (f: Frame): boolean => f.type === 'gateway' && f.subtype === 'holder'
const isNotice = (f: Frame): boolean => f.type === 'gateway' && f.subtype === 'request_pending'

describe('a client on another node when the CLI starts again elsewhere', { timeout: 60_000 }, () => {
  let cluster: GatewayNodes
  before(async () => { cluster = await startNodes({ count: 2, redisUrl: REDIS_URL }) })
  after(async () => { await cluster.close() })

  it('is routed to the new owner: its node and the owner agree who holds, and the holder\'s answer ends the prompt', async () => {
    const [a, b] = cluster.nodes as [GatewayNode, GatewayNode]
    const created = await a.create()
    const x = await b.connect(created.id, 'after=0')
    const xId = (await x.waitFor(isHello)).client_id as string
    await x.waitFor((f) => isHolderFrame(f) && f.holder === xId)
    x.sendUser('echo first')
    await x.waitFor(isIdle)

    // The CLI stops (on A); X, on B, holds the session there again.
    const res = await fetch(`${a.url}/v1/sessions/${created.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${TOKEN_A}` } })
    assert.ok(res.status < 300, `DELETE: ${res.status}`)
    await x.waitFor(isStatus('stopped'))

    // Y, on A, starts it again there, with a prompt.
    const y = await a.connect(created.id)
    await y.waitFor(isHello)
    const fromX = x.frames.length
    y.sendUser('ask Bash touch new-owner.txt')
    // In full or as a notice, as Y holds the session when it is asked or not.
    const prompt = await y.waitFor((f) => isPrompt(f) || isNotice(f))
    await x.waitFor((f) => f.seq === prompt.seq, 10_000, fromX)

    // X is a client of A's session again: A tells it who holds.
    const told = await x.waitFor((f) => isHolderFrame(f) && f.holder !== null, 10_000, fromX)
    const holderId = told.holder as string
    assert.equal((await a.session(created.id)).body.holder, holderId, 'B and the owner agree')
    const holder = holderId === xId ? x : y
    const observer = holder === x ? y : x
    const full = await holder.waitFor((f) => isPrompt(f) && f.request_id === prompt.request_id)
    holder.send({ type: 'control_response', response: { subtype: 'success', request_id: prompt.request_id, response: { behavior: 'allow', updatedInput: full.request.input } } })
    const done = await holder.waitFor(resolved(prompt.request_id))
    assert.equal(done.by, holderId)
    await observer.waitFor(resolved(prompt.request_id))
    assert.equal(x.frames.some(isError('unknown_request')), false, 'no answer of X refused')
  })
})
