/**
 * A client of another node rejoining the session when its CLI starts again
 * (real gateway processes on one Redis, the fake CLI). When the CLI stops,
 * each node's controller holds the session where it is; the one whose
 * message starts the CLI again holds it on the new owner. A controller of
 * another node that then rejoins that owner did not just attach: it must not
 * take the session from the client that just started it (the newest
 * controller wins only on a fresh attach, PROTOCOL.md "Holding a session").
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { type Frame, isHello, isIdle, isStatus } from '../support/frames.js'
import { TOKEN_A } from '../support/gateway.js'
import { type GatewayNode, type GatewayNodes, holdsIt, startNodes } from '../support/gateway-nodes.js'
import { REDIS_URL } from '../support/redis-server.js'

const isHolderFrame = (f: Frame): boolean => f.type === 'gateway' && f.subtype === 'holder'

describe('a controller of another node when the CLI starts again', { timeout: 60_000 }, () => {
  let cluster: GatewayNodes
  before(async () => { cluster = await startNodes({ count: 2, redisUrl: REDIS_URL }) })
  after(async () => { await cluster.close() })

  it('rejoins the new owner without taking the session from the client whose message started it', async () => {
    const [a, b] = cluster.nodes as [GatewayNode, GatewayNode]
    const created = await a.create()
    // X (on B) attaches first; Y (on A, the owner) after it, so Y holds.
    const x = await b.connect(created.id, 'after=0')
    const xId = (await x.waitFor(isHello)).client_id as string
    await x.waitFor(holdsIt)
    const y = await a.connect(created.id, 'after=0')
    const hello = await y.waitFor(isHello)
    const yId = hello.client_id as string
    assert.equal(hello.holder, yId)
    await x.waitFor((f) => isHolderFrame(f) && f.holder === yId && f.role === 'observer')

    // The CLI stops: X holds the session on B again (B runs nothing), Y on A.
    const res = await fetch(`${a.url}/v1/sessions/${created.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${TOKEN_A}` } })
    assert.ok(res.status < 300, `DELETE: ${res.status}`)
    const stopped = await x.waitFor(isStatus('stopped'))
    await x.waitFor((f) => isHolderFrame(f) && f.holder === xId, 10_000, x.frames.indexOf(stopped))
    await y.waitFor(isStatus('stopped'))

    // Y's message starts the CLI on A; X, on B, sees it start and rejoins A's session.
    const fromY = y.frames.length
    y.sendUser('echo again')
    await y.waitFor(isIdle, 10_000, fromY)
    const released = await x.waitFor((f) => isHolderFrame(f) && f.holder === null, 10_000, x.frames.indexOf(stopped))
    const told = await x.waitFor((f) => isHolderFrame(f) && f.holder !== null, 10_000, x.frames.indexOf(released))

    assert.deepEqual({ holder: told.holder, role: told.role }, { holder: yId, role: 'observer' }, 'A tells X that Y holds')
    assert.equal((await a.session(created.id)).body.holder, yId, 'Y, whose message started the CLI, still holds the session')
    assert.deepEqual(y.frames.slice(fromY).filter(isHolderFrame), [], 'Y was never made an observer')
  })
})
