/**
 * SendQueue over a fake sink: frames go straight through while the sink has
 * room, wait in order otherwise, count against one budget with what the sink
 * holds, and are dropped by close() so the owner's last word goes next.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { SendQueue } from '../../src/net/send-queue.js'

/** A sink with a fixed room: it holds what it was given until `drain()` hands it on. */
class FakeSink {
  readonly out: string[] = []
  held = 0
  constructor (readonly mark: number) {}
  write = (chunk: string): void => { this.out.push(chunk); this.held += Buffer.byteLength(chunk) }
  room = (): boolean => this.held < this.mark
  pending = (): number => this.held
  drain (): void { this.held = 0 }
}

function queue (mark: number, max: number): { q: SendQueue<string>, sink: FakeSink, overflows: () => number } {
  const sink = new FakeSink(mark)
  let overflows = 0
  const q = new SendQueue<string>(sink, max, () => { overflows++ })
  return { q, sink, overflows: () => overflows }
}

describe('SendQueue', () => {
  it('writes straight through while the sink has room, then queues in order and flushes on drain', () => {
    const { q, sink } = queue(10, 1000)
    q.send('aaaaa')
    q.send('bbbbb') // sink now holds 10: no room
    q.send('ccccc')
    q.send('ddddd')
    assert.deepEqual(sink.out, ['aaaaa', 'bbbbb'])
    assert.equal(q.queuedBytes, 10)
    assert.equal(q.buffered(), 20)
    sink.drain()
    q.flush()
    assert.deepEqual(sink.out, ['aaaaa', 'bbbbb', 'ccccc', 'ddddd'])
    assert.equal(q.queuedBytes, 0)
  })

  it('queues behind waiting frames even when the sink has room again', () => {
    const { q, sink } = queue(5, 1000)
    q.send('aaaaa')
    q.send('bbbbb')
    sink.drain() // room, but 'bbbbb' still waits: 'ccccc' must not overtake it
    q.send('ccccc')
    assert.deepEqual(sink.out, ['aaaaa'])
    q.flush()
    assert.deepEqual(sink.out, ['aaaaa', 'bbbbb'])
    sink.drain()
    q.flush()
    assert.deepEqual(sink.out, ['aaaaa', 'bbbbb', 'ccccc'])
  })

  it('overflows instead of queueing past the budget (queue and sink together)', () => {
    const { q, sink, overflows } = queue(100_000, 200_000)
    q.send('x'.repeat(100_000)) // straight to the sink
    q.send('y'.repeat(60_000)) // queued: 160 000 held
    assert.equal(overflows(), 0)
    q.send('z'.repeat(50_000)) // 210 000 > 200 000
    assert.equal(overflows(), 1)
    assert.equal(q.buffered(), 160_000)
    assert.equal(sink.out.length, 1)
  })

  it('queues a single frame larger than the budget for a client that is keeping up', () => {
    const { q, overflows } = queue(10, 1000)
    q.send('a'.repeat(10))
    q.send('b'.repeat(5000))
    assert.equal(overflows(), 0)
    assert.equal(q.queuedBytes, 5000)
  })

  it('writable() is null while idle, else settles once flushed with room, or on close', async () => {
    const { q, sink } = queue(5, 1000)
    assert.equal(q.writable(), null)
    q.send('aaaaa')
    q.send('bbbbb')
    const wait = q.writable()
    assert.notEqual(wait, null)
    let settled = false
    void wait?.then(() => { settled = true })
    sink.drain()
    q.flush() // 'bbbbb' goes out, but the sink is full again
    await Promise.resolve()
    assert.equal(settled, false)
    sink.drain()
    q.flush()
    await wait
    assert.equal(settled, true)

    q.send('ccccc')
    const closing = q.writable()
    assert.notEqual(closing, null)
    q.close()
    await closing
  })

  it('close() drops what waits and every later send', () => {
    const { q, sink } = queue(5, 1000)
    q.send('aaaaa')
    q.send('bbbbb')
    q.close()
    assert.equal(q.queuedBytes, 0)
    sink.drain()
    q.flush()
    q.send('ccccc')
    assert.deepEqual(sink.out, ['aaaaa'])
    assert.equal(q.writable(), null)
  })

  it('keeps order across many frames and compactions', () => {
    const { q, sink } = queue(50, 10_000_000)
    const sent: string[] = []
    for (let i = 0; i < 5000; i++) {
      const frame = `f${i}`
      sent.push(frame)
      q.send(frame)
      if (i % 7 === 0) { sink.drain(); q.flush() }
    }
    while (q.queuedBytes > 0) { sink.drain(); q.flush() }
    assert.deepEqual(sink.out, sent)
  })
})
