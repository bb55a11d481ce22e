/**
 * A prompt the owner redelivers to a new holder on another node while that
 * node still replays history to it (real gateway processes on one Redis,
 * the fake CLI, the typed client). The redelivery comes over the node bus
 * whenever it comes; sent at once, its seq overtook the replay frames before
 * it, and the typed client, which drops every seq at or below the last one
 * it delivered, lost them (and reported a gap). It waits for the replay now.
 *
 * The order is forced: the typed client X does not read its socket, so its
 * replay (megabytes of history) stalls early; another client Z on the same
 * node is the barrier: X's attach makes the owner tell Z who holds, and
 * Z's next frame is answered by the owner after it redelivered the prompt
 * to X (one inbox, read in order). Then X reads.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import WebSocket from 'ws'
import { GatewayClient, type PermissionRequest, type WebSocketCtor } from '../../src/client/index.js'
import { type Frame, isHello, isIdle, isPrompt } from '../support/frames.js'
import { TOKEN_A } from '../support/gateway.js'
import { type GatewayNode, type GatewayNodes, startNodes } from '../support/gateway-nodes.js'
import { REDIS_URL } from '../support/redis-server.js'
import { Waiters } from '../support/waiters.js'

const isHolderFrame = (f: Frame): boolean => f.type === 'gateway' && f.subtype === 'holder'

describe('a prompt redelivered to a holder on another node during its replay', { timeout: 120_000 }, () => {
  let cluster: GatewayNodes
  before(async () => { cluster = await startNodes({ count: 2, redisUrl: REDIS_URL }) })
  after(async () => { await cluster.close() })

  it('comes after the replay, and the typed client loses no frame', async (t) => {
    const [a, b] = cluster.nodes as [GatewayNode, GatewayNode]
    const created = await a.create()
    const y = await a.connect(created.id, 'after=0')
    await y.waitFor(isHello)
    // History far larger than what the sockets between B and X buffer.
    y.sendUser('burst 400 40000')
    await y.waitFor(isIdle, 60_000)
    y.sendUser('ask Bash touch redelivered.txt')
    const prompt = await y.waitFor(isPrompt)

    const z = await b.connect(created.id)
    const zId = (await z.waitFor(isHello)).client_id as string
    await z.waitFor((f) => isHolderFrame(f) && f.holder === zId)

    // X: the typed client on B, its socket not read until the owner has redelivered the prompt.
    let socket: { pause: () => void, resume: () => void } | null = null
    class Unread extends WebSocket {
      constructor (...args: ConstructorParameters<typeof WebSocket>) {
        super(...args)
        this.once('open', () => {
          socket = (this as unknown as { _socket: { pause: () => void, resume: () => void } })._socket
          socket.pause()
        })
      }
    }
    const waiters = new Waiters()
    const seqs: number[] = []
    const gaps: unknown[] = []
    const asked: PermissionRequest[] = []
    const ended: string[] = []
    let lastSeqAtHello: number | null = null
    const client = new GatewayClient({ url: b.url, token: TOKEN_A, WebSocket: Unread as unknown as WebSocketCtor })
    const x = client.connect(created.id, {
      after: 0,
      onPermission: (request) => { asked.push(request); waiters.wake(); return undefined }
    })
    t.after(() => x.close())
    x.on('frame', (f) => { seqs.push(f.seq); waiters.wake() })
    x.on('gap', (g) => { gaps.push(g); waiters.wake() })
    x.on('message', (m) => { if (isHello(m)) lastSeqAtHello = Number((m as Frame).last_seq); waiters.wake() })
    x.on('permissionResolved', (r) => { ended.push(`${r.requestId}:${r.decision}`); waiters.wake() })
    const seen = (): string => `lastSeq ${x.lastSeq}, frames ${seqs.length}, gaps ${JSON.stringify(gaps)}, asked ${asked.length}`

    // The owner took X's attach (it tells Z X holds), and redelivered the prompt to it in the same turn.
    const told = await z.waitFor((f) => isHolderFrame(f) && f.role === 'observer', 20_000)
    const xId = told.holder as string
    z.send({ type: 'control_request', request_id: 'barrier', request: { subtype: 'mcp_status' } })
    await z.waitFor((f) => f.type === 'control_response' && f.response?.request_id === 'barrier', 20_000)
    assert.ok(socket !== null, 'X\'s socket is open')
    ;(socket as { resume: () => void }).resume()

    await waiters.until(() => lastSeqAtHello !== null && x.lastSeq >= lastSeqAtHello && asked.length > 0, 60_000, 'X caught up and asked the prompt', seen)
    assert.equal(x.clientId, xId)
    assert.deepEqual(gaps, [], 'no gap')
    assert.deepEqual(seqs, Array.from({ length: x.lastSeq }, (_, i) => i + 1), 'every seq once, in order')
    assert.equal(asked.length, 1)
    assert.equal(asked[0]?.requestId, prompt.request_id)
    assert.equal(asked[0]?.canAnswer, true)

    x.allow(prompt.request_id)
    await waiters.until(() => ended.includes(`${prompt.request_id}:allowed`), 20_000, 'the prompt allowed', seen)
  })
})
