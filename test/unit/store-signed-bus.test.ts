/**
 * SignedBus (src/store/signed-bus.ts) over the in-process bus: what one node
 * signs another sharing the secret receives as sent; a message not signed
 * with the secret, altered, moved to another inbox, out of its time, or a
 * copy of one delivered, is refused, logged and counted. A node of an older
 * version can still read a signed message. (Over Redis, with gateway
 * processes: test/integration/cluster-nodes.test.ts.)
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import pino from 'pino'
import { MemoryBus } from '../../src/store/memory-bus.js'
import { type BusRefusal, SignedBus } from '../../src/store/signed-bus.js'
import type { NodeBus } from '../../src/store/store.js'

const SECRET = 's'.repeat(40)

/** A bus that keeps what it was asked to send, so a test can deliver it (or a changed copy) itself. */
class Tap implements NodeBus {
  readonly sent: Array<{ node: string, text: string }> = []
  readonly #inboxes = new Map<string, (message: string) => void>()
  async start (node: string, onMessage: (message: string) => void): Promise<void> { this.#inboxes.set(node, onMessage) }
  async send (node: string, text: string): Promise<void> { this.sent.push({ node, text }) }
  async close (): Promise<void> {}
  /** Hands `text` to `node`'s reader as the store would. */
  deliver (node: string, text: string): void { this.#inboxes.get(node)?.(text) }
}

interface Receiver { got: string[], refused: BusRefusal[], logs: any[] }

async function receiver (bus: NodeBus, node: string, options: { secret?: string, acceptUnsigned?: boolean, now?: () => number } = {}): Promise<Receiver> {
  const r: Receiver = { got: [], refused: [], logs: [] }
  const logger = pino({ level: 'trace' }, { write: (line: string) => { r.logs.push(JSON.parse(line)) } })
  const signed = new SignedBus(bus, { secret: options.secret ?? SECRET, logger, acceptUnsigned: options.acceptUnsigned, now: options.now, onRefused: (why) => { r.refused.push(why) } })
  await signed.start(node, (m) => { r.got.push(m) })
  return r
}

function sender (bus: NodeBus, options: { secret?: string, now?: () => number } = {}): SignedBus {
  return new SignedBus(bus, { secret: options.secret ?? SECRET, logger: pino({ level: 'silent' }), now: options.now })
}

describe('SignedBus', () => {
  it('delivers what a node sharing the secret sent, byte for byte and in order', async () => {
    const bus = new MemoryBus()
    const b = await receiver(bus, 'node-b')
    const a = sender(bus)
    const messages = [
      JSON.stringify({ k: 'frame', s: 'x', f: { type: 'user', message: { content: 'héllo "quoted" \\ \u2028' } }, i: 1 }),
      '{}',
      JSON.stringify({ k: 'ack', c: 'c1', i: 2 })
    ]
    for (const m of messages) await a.send('node-b', m)
    await new Promise((resolve) => { setImmediate(resolve) })
    assert.deepEqual(b.got, messages)
    assert.deepEqual(b.refused, [])
    await bus.close()
  })

  it('sends a JSON object a node of an older version still reads, with every member of the original', async () => {
    const tap = new Tap()
    const original = { k: 'call', s: 'x', id: 'node-a:1', n: 'node-a', op: 'stop', a: [] }
    await sender(tap).send('node-b', JSON.stringify(original))
    const [{ node, text }] = tap.sent as [{ node: string, text: string }]
    assert.equal(node, 'node-b')
    const parsed = JSON.parse(text) as Record<string, unknown>
    assert.match(String(parsed.$), /^[A-Za-z0-9_-]{16}\.1\.\d+\.[A-Za-z0-9_-]{43}$/)
    delete parsed.$
    assert.deepEqual(parsed, original)
    await assert.rejects(sender(tap).send('node-b', '"a string"'), TypeError, 'only JSON objects can carry the signature')
  })

  it('refuses a message signed with another secret, altered, or posted to another inbox', async () => {
    const tap = new Tap()
    const b = await receiver(tap, 'node-b')
    await receiver(tap, 'node-c')
    await sender(tap, { secret: 'o'.repeat(40) }).send('node-b', '{"k":"ack","c":"c","i":1}')
    const a = sender(tap)
    await a.send('node-b', '{"k":"ack","c":"c","i":2}')
    await a.send('node-c', '{"k":"ack","c":"c","i":3}')
    const [other, own, toC] = tap.sent.map((s) => s.text) as [string, string, string]
    tap.deliver('node-b', other)
    tap.deliver('node-b', own.replace('"i":2', '"i":7'))
    tap.deliver('node-b', toC)
    tap.deliver('node-b', own.replace(/\.[A-Za-z0-9_-]{43}"/, '."')) // no MAC at all
    assert.deepEqual(b.got, [])
    assert.deepEqual(b.refused, ['mac', 'mac', 'mac', 'mac'])
    tap.deliver('node-b', own)
    assert.deepEqual(b.got, ['{"k":"ack","c":"c","i":2}'], 'the unaltered message, in its own inbox, is delivered')
    // Three senders as the receiver sees them (the other secret's, node A, one it cannot name): node A's second refusal is at debug.
    assert.deepEqual(b.logs.map((l) => l.level), [50, 50, 20, 50], 'one error line per sender and reason, the rest at debug')
    assert.match(b.logs[0].msg, /refused/)
  })

  it('refuses a message without a signature, unless a rolling upgrade asks to accept them', async () => {
    const tap = new Tap()
    const strict = await receiver(tap, 'node-b')
    const upgrading = await receiver(tap, 'node-c', { acceptUnsigned: true })
    tap.deliver('node-b', '{"k":"detach","s":"x","c":"c"}')
    tap.deliver('node-c', '{"k":"detach","s":"x","c":"c"}')
    assert.deepEqual(strict.got, [])
    assert.deepEqual(strict.refused, ['unsigned'])
    assert.deepEqual(upgrading.got, ['{"k":"detach","s":"x","c":"c"}'])
    assert.equal(upgrading.logs[0].level, 40, 'the first unsigned message delivered is logged at warn')
    // Accepting unsigned messages does not mean accepting badly signed ones.
    await sender(tap, { secret: 'o'.repeat(40) }).send('node-c', '{}')
    tap.deliver('node-c', (tap.sent[0] as { text: string }).text)
    assert.deepEqual(upgrading.refused, ['mac'])
  })

  it('refuses a copy of a message already delivered, but takes messages out of order once each', async () => {
    const tap = new Tap()
    const b = await receiver(tap, 'node-b')
    const a = sender(tap)
    for (let i = 1; i <= 3; i++) await a.send('node-b', `{"i":${i}}`)
    const [m1, m2, m3] = tap.sent.map((s) => s.text) as [string, string, string]
    for (const text of [m3, m1, m1, m2, m3]) tap.deliver('node-b', text)
    assert.deepEqual(b.got, ['{"i":3}', '{"i":1}', '{"i":2}'])
    assert.deepEqual(b.refused, ['replay', 'replay'])
    // Another sender's seqs are its own.
    await sender(tap).send('node-b', '{"i":1}')
    tap.deliver('node-b', (tap.sent[3] as { text: string }).text)
    assert.deepEqual(b.got.at(-1), '{"i":1}')
  })

  it('refuses a message whose time is more than two minutes from the receiver\'s clock, either way', async () => {
    const tap = new Tap()
    let now = 1_000_000_000
    const b = await receiver(tap, 'node-b', { now: () => now })
    const a = sender(tap, { now: () => now })
    await a.send('node-b', '{"i":1}')
    await a.send('node-b', '{"i":2}')
    await a.send('node-b', '{"i":3}')
    const [m1, m2, m3] = tap.sent.map((s) => s.text) as [string, string, string]
    now += 120_000
    tap.deliver('node-b', m1)
    now += 1
    tap.deliver('node-b', m2)
    now -= 240_002
    tap.deliver('node-b', m3)
    assert.deepEqual(b.got, ['{"i":1}'])
    assert.deepEqual(b.refused, ['stale', 'stale'])
  })

  it('forgets a sender after four quiet minutes, when every copy of its messages is out of its time', async () => {
    const tap = new Tap()
    let now = 1_000_000_000
    const b = await receiver(tap, 'node-b', { now: () => now })
    const a = sender(tap, { now: () => now })
    await a.send('node-b', '{"i":1}')
    const m1 = (tap.sent[0] as { text: string }).text
    tap.deliver('node-b', m1)
    now += 240_001
    await sender(tap, { now: () => now }).send('node-b', '{"i":2}') // another sender's message makes the receiver prune
    tap.deliver('node-b', (tap.sent[1] as { text: string }).text)
    tap.deliver('node-b', m1)
    assert.deepEqual(b.got, ['{"i":1}', '{"i":2}'])
    assert.deepEqual(b.refused, ['stale'], 'the forgotten sender\'s copy is refused by its time')
  })
})
