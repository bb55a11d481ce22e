/**
 * The byte budget of a client still being replayed to: live frames the
 * audience holds for it count with what its connection has not sent; past
 * the budget it is ended as a slow consumer and its backlog is dropped; once
 * the replay has sent history it hands the held frames over at once and the
 * client is live.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Audience, type ClientPort, type EndReason } from '../../src/session/audience.js'
import pino from 'pino'
import { EventLog, type LogEvent } from '../../src/session/event-log.js'
import { replay } from '../../src/session/replay.js'
import { MemoryStore } from '../../src/store/memory.js'

class FakePort implements ClientPort {
  readonly id = 'fake'
  readonly sent: Array<string | Buffer> = []
  readonly ends: Array<[EndReason, string]> = []
  pending = 0
  writable?: () => Promise<void> | null
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

  it('a replay hands its held frames to the connection in one go and is live in the same tick, even while the socket is busy', async () => {
    const audience = new Audience()
    const port = new FakePort(250)
    // A busy socket: a replay that waited for it between held frames would still be replaying when
    // the next live frames came, and they would count against the budget as held frames.
    port.writable = () => new Promise<void>(() => {})
    const att = audience.add(port, 'observer')
    audience.broadcast([event(1), event(2)])
    const log = new EventLog({
      sessionId: 's1',
      store: new MemoryStore({ retention: { maxEventsPerSession: 100, ttlSecondsAfterEnd: 0 } }),
      lastSeq: 0,
      maxUnsaved: 10,
      logger: pino({ level: 'silent' }),
      onCommit: () => {},
      onDegraded: () => {},
      onOverflow: () => {}
    })
    const replaying = replay(att, 0, 0, { events: log, audience, log: pino({ level: 'silent' }), wait: { waitMs: 0, gone: () => false } })
    assert.equal(att.backlog, null, 'live before the replay\'s first await')
    assert.deepEqual(port.sent, [event(1).frame, event(2).frame])
    audience.broadcast([event(3), event(4), event(5)]) // sent, not held: the port's own queue bounds them
    assert.deepEqual(port.sent.length, 5)
    assert.deepEqual(reasons(port), [])
    assert.equal(await replaying, 0)
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
