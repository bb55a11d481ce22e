/**
 * A client of another node re-attached to the session's owner after the
 * session moved there (`attachRemote` with `rejoin`) did not just attach:
 * asking for control, it took the session from the client holding it,
 * though the newest controller wins only on a fresh attach (PROTOCOL.md).
 * It is a controller candidate: it holds only when nobody does, and takes
 * over when the holder leaves. Session objects on a MemoryStore, stub CLI.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { Frame } from '../support/frames.js'
import { TestPort, ownedSession } from '../support/session-stubs.js'

/** A client of another node, as the owner's router gives it to the session. */
class RemoteTestPort extends TestPort {
  readonly remote = true
}

const holderFrames = (port: TestPort): Frame[] => port.frames.filter((f) => f.type === 'gateway' && f.subtype === 'holder')

describe('a remote client re-attached after the session moved', () => {
  it('a fresh remote controller takes the session (the newest controller wins)', async () => {
    const { session } = await ownedSession()
    const local = new TestPort()
    await session.attach(local, { role: 'controller', after: 0 })
    const remote = new RemoteTestPort()
    session.attachRemote(remote, 'controller')
    assert.equal(session.snapshot().holder, remote.id)
    assert.deepEqual(holderFrames(remote).at(-1), { type: 'gateway', subtype: 'holder', holder: remote.id, role: 'controller' })
    await session.close(1000)
  })

  it('rejoining, it does not take the session from its holder, is told so, and holds once the holder leaves', async () => {
    const { session } = await ownedSession()
    const local = new TestPort()
    await session.attach(local, { role: 'controller', after: 0 })
    assert.equal(session.snapshot().holder, local.id)
    const seenByHolder = holderFrames(local).length
    const remote = new RemoteTestPort()
    session.attachRemote(remote, 'controller', { rejoin: true })
    assert.equal(session.snapshot().holder, local.id, 'the holder keeps the session')
    assert.equal(holderFrames(local).length, seenByHolder, 'the holder is told of no change')
    // Its node may still show it as the holder the old owner said it was: it learns it is not.
    assert.deepEqual(holderFrames(remote), [{ type: 'gateway', subtype: 'holder', holder: local.id, role: 'observer' }])
    session.detach(local)
    assert.equal(session.snapshot().holder, remote.id, 'a controller candidate once the holder leaves')
    assert.deepEqual(holderFrames(remote).at(-1), { type: 'gateway', subtype: 'holder', holder: remote.id, role: 'controller' })
    await session.close(1000)
  })

  it('rejoining while nobody holds the session, it holds it', async () => {
    const { session } = await ownedSession()
    const watcher = new TestPort()
    await session.attach(watcher, { role: 'observer', after: 0 })
    const remote = new RemoteTestPort()
    session.attachRemote(remote, 'controller', { rejoin: true })
    assert.equal(session.snapshot().holder, remote.id)
    assert.deepEqual(holderFrames(remote), [{ type: 'gateway', subtype: 'holder', holder: remote.id, role: 'controller' }])
    assert.deepEqual(holderFrames(watcher).at(-1), { type: 'gateway', subtype: 'holder', holder: remote.id, role: 'observer' })
    await session.close(1000)
  })
})
