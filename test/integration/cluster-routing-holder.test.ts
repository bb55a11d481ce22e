/**
 * Who holds a session when its holder leaves a node that does not run the
 * CLI (real gateway processes on one Redis, the fake CLI): the owner decides,
 * among every node's clients, and the client's node repeats no decision of
 * its own. Two controllers on node B and one on the owner A between them in
 * time: when the newest (on B) leaves, the owner's client is the newest
 * remaining controller, and B's older client is never told it holds.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { type Frame, isHello } from '../support/frames.js'
import { type GatewayNode, type GatewayNodes, startNodes } from '../support/gateway-nodes.js'
import { REDIS_URL } from '../support/redis-server.js'

const isHolderFrame = (f: Frame): boolean => f.type === 'gateway' && f.subtype === 'holder'
const holdsIt = (f: Frame): boolean => isHolderFrame(f) && f.role === 'controller'

describe('a holder leaving a node that does not run the CLI', { timeout: 60_000 }, () => {
  let cluster: GatewayNodes
  before(async () => { cluster = await startNodes({ count: 2, redisUrl: REDIS_URL }) })
  after(async () => { await cluster.close() })

  it('the owner picks the next holder across nodes; the node it left promotes nobody itself', async () => {
    const [a, b] = cluster.nodes as [GatewayNode, GatewayNode]
    const created = await a.create()
    // In attach order: X2 on B, Y on A (the owner), X on B. The newest controller holds.
    const x2 = await b.connect(created.id, 'after=0')
    await x2.waitFor(isHello)
    await x2.waitFor(holdsIt)
    const y = await a.connect(created.id, 'after=0')
    const yId = (await y.waitFor(isHello)).client_id as string
    await x2.waitFor((f) => isHolderFrame(f) && f.holder === yId)
    const x = await b.connect(created.id, 'after=0')
    const xId = (await x.waitFor(isHello)).client_id as string
    await x.waitFor(holdsIt)
    await y.waitFor((f) => isHolderFrame(f) && f.holder === xId)
    await x2.waitFor((f) => isHolderFrame(f) && f.holder === xId)

    const fromX2 = x2.frames.length
    const fromY = y.frames.length
    x.terminate()
    // Y, on the owner, attached after X2: it holds now, and X2 hears so from the owner.
    await y.waitFor(holdsIt, 10_000, fromY)
    await x2.waitFor((f) => isHolderFrame(f) && f.holder === yId, 10_000, fromX2)
    const told = x2.frames.slice(fromX2).filter(isHolderFrame).map((f) => ({ holder: f.holder, role: f.role }))
    assert.deepEqual(told, [{ holder: yId, role: 'observer' }], 'X2 only hears the owner\'s decision')
    const seen = (await a.session(created.id)).body
    assert.equal(seen.holder, yId)
  })
})
