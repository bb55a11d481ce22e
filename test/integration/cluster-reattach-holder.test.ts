/**
 * The newest controller holds the session, across nodes too (PROTOCOL.md,
 * "Holding a session"). A client of another node that the owner forgot
 * (its node missed three heartbeats: paused, or its bus messages late) and
 * that attaches again did not just attach: it must not take the session
 * from the client that holds it. Real gateway processes on one Redis.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { isHello } from '../support/frames.js'
import { type GatewayNode, type GatewayNodes, holdsIt, startNodes } from '../support/gateway-nodes.js'
import { REDIS_URL } from '../support/redis-server.js'
import { eventually } from '../support/waiters.js'

describe('a client of another node attached again', { timeout: 60_000 }, () => {
  let cluster: GatewayNodes
  before(async () => { cluster = await startNodes({ count: 2, redisUrl: REDIS_URL, concurrent: true }) })
  after(async () => { await cluster.close() })

  it('does not take the session from the newer controller holding it', async () => {
    const [a, b] = cluster.nodes as [GatewayNode, GatewayNode]
    const created = await a.create()
    const older = await b.connect(created.id, 'after=0')
    await older.waitFor(isHello)
    await older.waitFor(holdsIt)
    const newer = await a.connect(created.id, 'after=0')
    const newerId = (await newer.waitFor(isHello)).client_id as string
    await older.waitFor((f) => f.type === 'gateway' && f.subtype === 'holder' && f.role === 'observer')
    // B misses its heartbeats: A forgets its client.
    b.child.kill('SIGSTOP')
    try {
      await eventually(async () => (await a.session(created.id)).body.clients === 1, 15_000, 'A to forget B\'s client')
    } finally {
      b.child.kill('SIGCONT')
    }
    await eventually(async () => (await a.session(created.id)).body.clients === 2, 15_000, 'B\'s client attached again')
    assert.equal((await a.session(created.id)).body.holder, newerId, 'the newer controller still holds the session')
    assert.equal(newer.frames.filter((f) => f.type === 'gateway' && f.subtype === 'holder' && f.role === 'observer').length, 0, 'the holder was not made an observer')
  })
})
