// The in-process node bus (src/store/memory-bus.ts): messages in order and
// exactly once from two senders, asynchronous delivery, nothing for a node
// before it starts, one inbox per node, a throwing listener reported, and
// nothing after close. Expectations are built from what was sent.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { MemoryBus } from '../../src/store/memory-bus.js'
import { Waiters } from '../support/waiters.js'

const TIMEOUT_MS = 10_000

/** What one node's inbox received, with a wait on it. */
class Inbox {
  readonly messages: string[] = []
  readonly #waiters = new Waiters()
  readonly onMessage = (message: string): void => { this.messages.push(message); this.#waiters.wake() }

  async count (n: number): Promise<void> {
    await this.#waiters.until(() => this.messages.length >= n, TIMEOUT_MS, `${n} message(s)`,
      () => `${this.messages.length} so far, last ${this.messages.at(-1) ?? 'none'}`)
  }
}

describe('MemoryBus', () => {
  it('delivers 1000 messages from two senders in order, exactly once', async () => {
    const bus = new MemoryBus()
    const inbox = new Inbox()
    await bus.start('n1', inbox.onMessage)
    const sent: Record<string, string[]> = { a: [], b: [] }
    const sends: Array<Promise<void>> = []
    for (let i = 0; i < 500; i++) {
      for (const sender of ['a', 'b']) {
        const message = JSON.stringify({ sender, i, text: `line ${i}\nü ✓` })
        sent[sender]?.push(message)
        sends.push(bus.send('n1', message))
      }
    }
    await Promise.all(sends)
    const total = (sent.a?.length ?? 0) + (sent.b?.length ?? 0)
    await inbox.count(total)
    assert.equal(inbox.messages.length, total)
    for (const sender of ['a', 'b']) {
      assert.deepEqual(inbox.messages.filter((m) => (JSON.parse(m) as { sender: string }).sender === sender), sent[sender])
    }
    await bus.close()
  })

  it('delivers asynchronously: not inside send', async () => {
    const bus = new MemoryBus()
    const inbox = new Inbox()
    await bus.start('n1', inbox.onMessage)
    const sending = bus.send('n1', 'hello')
    assert.deepEqual(inbox.messages, [], 'nothing delivered before send returned')
    await sending
    await inbox.count(1)
    assert.deepEqual(inbox.messages, ['hello'])
    await bus.close()
  })

  it('drops a message sent before start, and delivers one sent after start resolves', async () => {
    const bus = new MemoryBus()
    await bus.send('n1', 'too early')
    const inbox = new Inbox()
    await bus.start('n1', inbox.onMessage)
    await bus.send('n1', 'in time')
    await inbox.count(1)
    assert.deepEqual(inbox.messages, ['in time'])
    await bus.close()
  })

  it('gives each node only its own messages, and refuses a second start of a node', async () => {
    const bus = new MemoryBus()
    const one = new Inbox()
    const two = new Inbox()
    await bus.start('n1', one.onMessage)
    await bus.start('n2', two.onMessage)
    await assert.rejects(bus.start('n1', () => {}), /already reading/)
    const toOne = ['1a', '1b', '1c']
    const toTwo = ['2a', '2b']
    for (let i = 0; i < 3; i++) {
      if (toOne[i] !== undefined) await bus.send('n1', toOne[i] as string)
      if (toTwo[i] !== undefined) await bus.send('n2', toTwo[i] as string)
    }
    await one.count(toOne.length)
    await two.count(toTwo.length)
    assert.deepEqual(one.messages, toOne)
    assert.deepEqual(two.messages, toTwo)
    await bus.close()
  })

  it('reports a throwing listener and keeps delivering', async () => {
    const errors: Error[] = []
    const bus = new MemoryBus({ onError: (err) => { errors.push(err) } })
    const inbox = new Inbox()
    await bus.start('n1', (message) => { inbox.onMessage(message); if (message === 'bad') throw new Error('listener bug') })
    const sent = ['ok', 'bad', 'after']
    for (const m of sent) await bus.send('n1', m)
    await inbox.count(sent.length)
    assert.deepEqual(inbox.messages, sent)
    assert.deepEqual(errors.map((e) => e.message), ['listener bug'])
    await bus.close()
  })

  it('delivers nothing once closed, even what was sent just before, and refuses sends after', async () => {
    const bus = new MemoryBus()
    const inbox = new Inbox()
    await bus.start('n1', inbox.onMessage)
    const sending = bus.send('n1', 'in flight')
    await bus.close()
    await sending
    // Past the microtask the message would have been delivered on.
    await new Promise((resolve) => setImmediate(resolve))
    assert.deepEqual(inbox.messages, [])
    await assert.rejects(bus.send('n1', 'late'), /closed/)
    await assert.rejects(bus.start('n2', () => {}), /closed/)
  })
})
