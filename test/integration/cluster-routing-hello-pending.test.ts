/**
 * The hello of a client on a node that does not run the CLI lists the
 * session's pending prompts (real gateway processes on one Redis, the fake
 * CLI). That node's own control plane holds none: the prompts are those the
 * session's log leaves open, read from the store when the node starts
 * following the session. With `"pending_requests":[]`, the typed client took
 * a prompt it had replayed for one that ended unseen, and told its app so
 * (`permissionResolved`, decision `unknown`) while the prompt was still open.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import WebSocket from 'ws'
import { GatewayClient, type WebSocketCtor } from '../../src/client/index.js'
import { isHello, isPrompt, resolved } from '../support/frames.js'
import { TOKEN_A } from '../support/gateway.js'
import { type GatewayNode, type GatewayNodes, startNodes } from '../support/gateway-nodes.js'
import { REDIS_URL } from '../support/redis-server.js'
import { Waiters } from '../support/waiters.js'

describe('a hello on a node that does not run the CLI', { timeout: 60_000 }, () => {
  let cluster: GatewayNodes
  before(async () => { cluster = await startNodes({ count: 2, redisUrl: REDIS_URL }) })
  after(async () => { await cluster.close() })

  it('lists the open prompt, and the typed client keeps it open until it is answered', async (t) => {
    const [a, b] = cluster.nodes as [GatewayNode, GatewayNode]
    const created = await a.create()
    const holder = await a.connect(created.id, 'after=0')
    const holderId = (await holder.waitFor(isHello)).client_id as string
    holder.sendUser('ask Bash touch pending.txt')
    const prompt = await holder.waitFor(isPrompt)

    // B loads the session after the prompt was asked: it never saw it live.
    const raw = await b.connect(created.id, 'after=0&role=observer')
    const hello = await raw.waitFor(isHello)
    assert.deepEqual(hello.pending_requests, [prompt.request_id], 'the session\'s pending prompt')

    const client = new GatewayClient({ url: b.url, token: TOKEN_A, WebSocket: WebSocket as unknown as WebSocketCtor })
    const conn = client.connect(created.id, { after: 0, role: 'observer' })
    t.after(() => conn.close())
    const waiters = new Waiters()
    const ended: Array<{ requestId: string, decision: string }> = []
    const hellos: Array<Record<string, unknown>> = []
    conn.on('permissionResolved', (r) => { ended.push({ requestId: r.requestId, decision: r.decision }); waiters.wake() })
    conn.on('message', (m) => { if (isHello(m)) hellos.push(m as Record<string, unknown>); waiters.wake() })
    conn.on('frame', () => waiters.wake())
    const seen = (): string => `state ${conn.state}, lastSeq ${conn.lastSeq}, pending ${JSON.stringify([...conn.pending.keys()])}, ended ${JSON.stringify(ended)}`
    // Its replay reaches the prompt (a notice) and the hello's last_seq: it is caught up.
    await waiters.until(() => hellos.length > 0 && conn.lastSeq >= Number(hellos[0]?.last_seq) && conn.pending.has(prompt.request_id), 15_000, 'the replay with the prompt', seen)

    holder.send({ type: 'control_response', response: { subtype: 'success', request_id: prompt.request_id, response: { behavior: 'allow', updatedInput: prompt.request.input } } })
    assert.equal((await holder.waitFor(resolved(prompt.request_id))).by, holderId)
    await waiters.until(() => ended.some((r) => r.decision === 'allowed'), 15_000, 'the prompt resolved', seen)
    assert.deepEqual(ended, [{ requestId: prompt.request_id, decision: 'allowed' }], 'ended once, when it was answered')
  })
})
