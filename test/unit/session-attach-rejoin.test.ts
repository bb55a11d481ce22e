/**
 * A client attaching with `rejoin` (`?rejoin=true`: a controller displaced
 * earlier, reconnecting after a drop) did not just attach: the newest
 * controller wins only on a fresh attach (PROTOCOL.md). It holds the
 * session only when nobody does, else its hello says who does and it waits
 * as the next candidate. Session objects on a MemoryStore, stub CLI.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { Frame } from '../support/frames.js'
import { TestPort, ownedSession } from '../support/session-stubs.js'

const holderFrames = (port: TestPort): Frame[] => port.frames.filter((f) => f.type === 'gateway' && f.subtype === 'holder')
const hello = (port: TestPort): Frame | undefined => port.frames.find((f) => f.type === 'gateway' && f.subtype === 'hello')

describe('a controller attaching with rejoin', () => {
  it('does not take the session from its holder, whose clients hear of no change; it holds once the holder leaves', async () => {
    const { session } = await ownedSession()
    const phone = new TestPort()
    await session.attach(phone, { role: 'controller', after: 0 })
    const watcher = new TestPort()
    await session.attach(watcher, { role: 'observer', after: 0 })
    const seen = { phone: holderFrames(phone).length, watcher: holderFrames(watcher).length }

    const laptop = new TestPort()
    await session.attach(laptop, { role: 'controller', rejoin: true, after: 0 })
    assert.equal(session.snapshot().holder, phone.id)
    assert.deepEqual({ role: hello(laptop)?.role, holder: hello(laptop)?.holder }, { role: 'observer', holder: phone.id })
    assert.deepEqual({ phone: holderFrames(phone).length, watcher: holderFrames(watcher).length }, seen, 'nobody is told of a change that did not happen')

    session.detach(phone)
    assert.equal(session.snapshot().holder, laptop.id, 'the next candidate')
    assert.deepEqual(holderFrames(laptop).at(-1), { type: 'gateway', subtype: 'holder', holder: laptop.id, role: 'controller' })
    assert.deepEqual(holderFrames(watcher).at(-1), { type: 'gateway', subtype: 'holder', holder: laptop.id, role: 'observer' })
    await session.close(1000)
  })

  it('holds the session when nobody does, and every other client is told', async () => {
    const { session } = await ownedSession()
    const watcher = new TestPort()
    await session.attach(watcher, { role: 'observer', after: 0 })
    const laptop = new TestPort()
    await session.attach(laptop, { role: 'controller', rejoin: true, after: 0 })
    assert.equal(session.snapshot().holder, laptop.id)
    assert.deepEqual({ role: hello(laptop)?.role, holder: hello(laptop)?.holder }, { role: 'controller', holder: laptop.id })
    assert.deepEqual(holderFrames(watcher).at(-1), { type: 'gateway', subtype: 'holder', holder: laptop.id, role: 'observer' })
    await session.close(1000)
  })

  it('a fresh controller attaching after it still takes the session (the newest controller wins)', async () => {
    const { session } = await ownedSession()
    const laptop = new TestPort()
    await session.attach(laptop, { role: 'controller', rejoin: true, after: 0 })
    const phone = new TestPort()
    await session.attach(phone, { role: 'controller', after: 0 })
    assert.equal(session.snapshot().holder, phone.id)
    assert.deepEqual(holderFrames(laptop).at(-1), { type: 'gateway', subtype: 'holder', holder: phone.id, role: 'observer' })
    await session.close(1000)
  })
})
