/**
 * The byte budget of a client still being replayed to: live frames the
 * audience holds for it count with what its connection has not sent; past
 * the budget it is ended as a slow consumer and its backlog is dropped; frames
 * the replay has released (is sending) no longer count.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Audience, type ClientPort, type EndReason } from '../../src/session/audience.js'
import type { LogEvent } from '../../src/session/event-log.js'

class FakePort implements ClientPort {
  readonly id = 'fake'
  readonly sent: Array<string | Buffer> = []
  readonly ends: Array<[EndReason, string]> = []
  pending = 0
  constructor (readonly maxBufferedBytes: number) {}
  send (data: string | Buffer): void { this.sent.push(data) }
  buffered (): number { return this.pending }
  end (reason: EndReason, message: string): void { this.ends.push([reason, message]) }
  get ended (): boolean { return this.ends.length > 0 }
}

const reasons = (port: FakePort): EndReason[] => port.ends.map(([reason]) => reason)

/** A recorded frame of exactly `bytes` UTF-8 bytes. */
function event (seq: number, bytes = 100): LogEvent {
  const head = `{"seq":${seq},"x":"`
  return { seq, frame: head + 'x'.repeat(bytes - head.length - 2) + '"}' }
}

describe('Audience budget during a replay', () => {
  it('ends a client whose held live frames and unsent bytes pass its budget, and drops what it held', () => {
    const audience = new Audience()
    const port = new FakePort(1000)
    const att = audience.add(port, 'observer')
    port.pending = 500
    audience.broadcast([event(1), event(2), event(3), event(4), event(5)]) // 500 held + 500 unsent: at the budget
    assert.deepEqual(reasons(port), [])
    assert.equal(att.backlog?.length, 5)
    audience.broadcast([event(6)])
    assert.deepEqual(reasons(port), ['slow_consumer'])
    assert.equal(att.backlog?.length, 0)
    assert.equal(audience.has(port), false, 'a replay to it stops')
    audience.broadcast([event(7)])
    assert.equal(att.backlog?.length, 0, 'the backlog no longer grows')
    assert.equal(port.sent.length, 0)
  })

  it('counts only held frames the replay has not sent yet', () => {
    const audience = new Audience()
    const port = new FakePort(250)
    const att = audience.add(port, 'observer')
    audience.broadcast([event(1), event(2)])
    // The replay sends seq 1 from the backlog (it releases each frame just before sending it).
    audience.release(att, (att.backlog?.[0] as LogEvent).seq)
    audience.broadcast([event(3)]) // 200 unsent, not 300
    assert.deepEqual(reasons(port), [])
    audience.broadcast([event(4)])
    assert.deepEqual(reasons(port), ['slow_consumer'])
  })

  it('does not hold back or end a live client (its port bounds what it is sent)', () => {
    const audience = new Audience()
    const port = new FakePort(100)
    const att = audience.add(port, 'observer')
    att.backlog = null
    audience.broadcast([event(1), event(2), event(3)])
    assert.equal(port.sent.length, 3)
    assert.deepEqual(reasons(port), [])
  })
})
