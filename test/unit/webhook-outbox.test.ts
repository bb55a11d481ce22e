/**
 * Webhook deliveries kept in the store's outbox (WebhookNotifier with an
 * outbox, OutboxSweep) over the memory outbox and a real HTTP receiver:
 * a delivery is kept from the moment it is queued until it ends for good
 * (delivered, rejected, given up, dropped), and stays kept when a close
 * abandons it; deliveries taken over are sent again oldest first, the same
 * id and bytes; the sweep takes over nodes that are gone (and this node's
 * own previous run, once), never a live node, and nothing when it cannot
 * tell which nodes live. Waits are on requests, logs and outbox contents.
 */
import assert from 'node:assert/strict'
import { Writable } from 'node:stream'
import { describe, it } from 'node:test'
import type { TestContext } from 'node:test'
import pino from 'pino'
import { MemoryOutbox } from '../../src/store/memory-outbox.js'
import type { OutboxEntry, WebhookOutbox } from '../../src/store/store.js'
import { OutboxSweep } from '../../src/webhooks/outbox-sweep.js'
import { eventually } from '../support/gateway.js'
import { Waiters } from '../support/waiters.js'
import { Receiver } from '../support/webhook-receiver.js'
import { keptBy, testNotifier, turnFinished } from '../support/webhook-notifier.js'

const WAIT_MS = 10_000

/** A pino logger whose JSON lines a test can read. */
function captured (): { logger: pino.Logger, lines: any[] } {
  const lines: any[] = []
  const stream = new Writable({
    write (chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n').filter((l) => l !== '')) lines.push(JSON.parse(line))
      done()
    }
  })
  return { logger: pino({ level: 'debug' }, stream), lines }
}

/** The seqs of the kept deliveries' bodies, sorted. */
async function keptSeqs (outbox: MemoryOutbox, node: string): Promise<number[]> {
  return (await keptBy(outbox, node)).map((e) => JSON.parse(JSON.parse(e.text).body).data.seq as number).sort((a, b) => a - b)
}

/**
 * `node`'s turn.finished (seq 1) offered to a receiver answering 503, then
 * the node closed: kept, unsent. The receiver answers 200 from then on;
 * `from` is where its later requests start.
 */
async function leftUnsent (t: TestContext, node: string, given?: { receiver: Receiver, outbox: MemoryOutbox }): Promise<{ receiver: Receiver, outbox: MemoryOutbox, from: number }> {
  const receiver = given?.receiver ?? await Receiver.start(t)
  receiver.status = 503
  const outbox = given?.outbox ?? new MemoryOutbox()
  const left = testNotifier(t, receiver, outbox, node)
  turnFinished(left, 1)
  await receiver.until(() => receiver.requests.length >= 1, `${node}'s attempt`)
  await left.close(50)
  receiver.status = 200
  return { receiver, outbox, from: receiver.requests.length }
}

/** `outbox` whose takeOver runs `takeOver` instead (a store that fails, before or after the move). */
function withTakeOver (outbox: MemoryOutbox, takeOver: WebhookOutbox['takeOver']): WebhookOutbox {
  return { keep: outbox.keep.bind(outbox), remove: outbox.remove.bind(outbox), nodes: outbox.nodes.bind(outbox), takeOver }
}

describe('webhook outbox', () => {
  it('keeps a delivery from its queueing until it ends: delivered, rejected, given up and dropped ones are forgotten, an abandoned one stays', async (t) => {
    const receiver = await Receiver.start(t)
    const outbox = new MemoryOutbox()
    const n = testNotifier(t, receiver, outbox, 'n1', { maxAttempts: 2, queueMax: 1, concurrency: 1 })

    receiver.hang = true
    turnFinished(n, 1)
    const first = await receiver.until(() => receiver.requests[0], 'the first attempt')
    const [entry] = await keptBy(outbox, 'n1') as [OutboxEntry]
    assert.equal(entry.id, first.json.id, 'kept under its Webhook-Id while in flight')
    assert.equal(JSON.parse(entry.text).body, first.body, 'with the very bytes sent')
    turnFinished(n, 2) // waits behind the first (concurrency 1)
    turnFinished(n, 3) // the queue holds 1 waiting: 2 is dropped
    assert.deepEqual(await keptSeqs(outbox, 'n1'), [1, 3])
    receiver.release()
    await eventually(() => n.stats.delivered === 2, WAIT_MS, 'two delivered')
    await eventually(async () => (await keptBy(outbox, 'n1')).length === 0, WAIT_MS, 'delivered ones forgotten')

    receiver.status = 400
    turnFinished(n, 4)
    await eventually(() => n.stats.rejected === 1, WAIT_MS, 'rejected')
    receiver.status = 503
    turnFinished(n, 5)
    await eventually(() => n.stats.exhausted === 1, WAIT_MS, 'given up after two attempts')
    await eventually(async () => (await keptBy(outbox, 'n1')).length === 0, WAIT_MS, 'rejected and exhausted ones forgotten')

    turnFinished(n, 6)
    await receiver.until(() => receiver.requests.some((r) => r.json.data.seq === 6), 'the sixth offered')
    await n.close(50)
    assert.equal(n.stats.abandoned, 1)
    assert.deepEqual(await keptSeqs(outbox, 'n1'), [6], 'abandoned at close: still kept for another node')
  })

  it('sends what it takes over oldest first, with the same ids and bytes, attempts from 1, and forgets each once sent; an unreadable entry is dropped', async (t) => {
    const receiver = await Receiver.start(t)
    receiver.status = 503
    const outbox = new MemoryOutbox()
    const gone = testNotifier(t, receiver, outbox, 'gone')
    for (let seq = 1; seq <= 3; seq++) turnFinished(gone, seq, seq === 2 ? 'sess-b' : 'sess-a')
    await receiver.until(() => receiver.requests.length >= 3 && receiver.requests, 'three attempts')
    await gone.close(50)
    // Seq 3 waits behind seq 1 in its session, unsent: the close keeps it with seq 1 (webhook-close-order.test.ts).
    const offered = new Map(receiver.requests.map((r) => [r.json.data.seq as number, { id: r.headers['webhook-id'], body: r.body }]))
    for (const e of await keptBy(outbox, 'gone')) {
      const body = JSON.parse(e.text).body as string
      offered.set(JSON.parse(body).data.seq as number, { id: e.id, body })
    }

    const from = receiver.requests.length
    receiver.status = 200
    const log = captured()
    const next = testNotifier(t, receiver, outbox, 'next', { logger: log.logger })
    await outbox.keep('gone', { id: 'not-a-delivery', text: '{"v":1}' })
    next.adopt(await outbox.takeOver('gone', 'next'), 'gone')
    await receiver.until(() => receiver.requests.length >= from + 3, 'the three sent again')
    const sent = receiver.requests.slice(from)
    assert.deepEqual(sent.map((r) => r.json.data.seq), [1, 2, 3], 'oldest first')
    for (const r of sent) {
      const before = offered.get(r.json.data.seq) as NonNullable<ReturnType<typeof offered.get>>
      assert.equal(r.headers['webhook-id'], before.id)
      assert.equal(r.body, before.body)
      assert.equal(r.headers['webhook-attempt'], '1')
    }
    assert.equal(next.stats.recovered, 3)
    assert.ok(log.lines.some((l) => l.level === 50 && l.delivery === 'not-a-delivery'), 'the unreadable entry is logged')
    await eventually(async () => (await keptBy(outbox, 'next')).length === 0, WAIT_MS, 'all forgotten, the unreadable one too')
  })

  it('takes up its own previous run\'s deliveries, not this run\'s, which are queued already', async (t) => {
    const { receiver, outbox, from } = await leftUnsent(t, 'fixed-id')
    const again = testNotifier(t, receiver, outbox, 'fixed-id')
    turnFinished(again, 2) // kept before the store answers the sweep's first takeover
    await receiver.until(() => receiver.requests.slice(from).some((r) => r.json.data.seq === 2), 'this run\'s own')
    again.adopt(await outbox.takeOver('fixed-id', 'fixed-id'), 'fixed-id')
    await receiver.until(() => receiver.requests.slice(from).some((r) => r.json.data.seq === 1), 'the previous run\'s')
    await eventually(async () => (await keptBy(outbox, 'fixed-id')).length === 0, WAIT_MS, 'both forgotten once delivered')
    assert.deepEqual(receiver.requests.slice(from).map((r) => r.json.data.seq).sort(), [1, 2], 'each sent once')
    assert.equal(again.stats.recovered, 1)
  })
})

describe('OutboxSweep', () => {
  const entry = (id: string): OutboxEntry => ({ id, text: id })

  it('takes over nodes that are gone, its own previous run once, never a live node; then sweeps again', async (t) => {
    const outbox = new MemoryOutbox()
    for (const node of ['gone', 'alive', 'pid-gone', 'self']) await outbox.keep(node, entry(`${node}-1`))
    const taken: Array<[string, string[]]> = []
    const waiters = new Waiters()
    const sweep = new OutboxSweep({
      outbox,
      node: 'self',
      liveNodes: async () => ['alive', 'pid-gone', 'self'],
      isDead: (node) => node === 'pid-gone',
      everyMs: 20,
      onTaken: (entries, from) => { taken.push([from, entries.map((e) => e.id)]); waiters.wake() },
      logger: pino({ level: 'silent' })
    })
    t.after(() => sweep.close())
    await sweep.start()
    assert.deepEqual(taken.sort(), [['gone', ['gone-1']], ['pid-gone', ['pid-gone-1']], ['self', ['self-1']]])
    assert.deepEqual((await keptBy(outbox, 'alive')).map((e) => e.id), ['alive-1'])
    assert.deepEqual((await keptBy(outbox, 'self')).map((e) => e.id).sort(), ['gone-1', 'pid-gone-1', 'self-1'], 'moved under this node')

    await outbox.keep('self', entry('self-2'))
    await outbox.keep('gone-later', entry('later-1'))
    await waiters.until(() => taken.some(([from]) => from === 'gone-later'), WAIT_MS, 'a later sweep', () => JSON.stringify(taken))
    assert.ok(!taken.some(([, ids]) => ids.includes('self-2')), 'its own live deliveries are never taken again')
    assert.deepEqual((await keptBy(outbox, 'alive')).map((e) => e.id), ['alive-1'])
  })

  it('tries its own previous run\'s deliveries again at the next sweep when the store did not answer the first', async (t) => {
    const outbox = new MemoryOutbox()
    await outbox.keep('self', entry('previous-run'))
    let failures = 1
    const flaky = withTakeOver(outbox, async (from, to) => {
      if (failures-- > 0) throw new Error('store down')
      return await outbox.takeOver(from, to)
    })
    const taken: string[] = []
    const waiters = new Waiters()
    const sweep = new OutboxSweep({
      outbox: flaky,
      node: 'self',
      liveNodes: async () => ['self'],
      isDead: () => false,
      everyMs: 20,
      onTaken: (entries) => { taken.push(...entries.map((e) => e.id)); waiters.wake() },
      logger: pino({ level: 'silent' })
    })
    t.after(() => sweep.close())
    await sweep.start()
    assert.deepEqual(taken, [], 'the first sweep failed')
    await waiters.until(() => taken.length > 0, WAIT_MS, 'a later sweep', () => JSON.stringify(taken))
    assert.deepEqual(taken, ['previous-run'])
  })

  it('after a takeover that failed but may have run (a timeout), takes up what it moved under this node at the next sweep; the notifier sends each once', async (t) => {
    const receiver = await Receiver.start(t)
    const outbox = new MemoryOutbox()
    // Running before the gone node kept its delivery, as every node of a running cluster is.
    const self = testNotifier(t, receiver, outbox, 'self')
    const { from } = await leftUnsent(t, 'gone', { receiver, outbox })
    let timeouts = 1
    const timingOut = withTakeOver(outbox, async (fromNode, to) => {
      const moved = await outbox.takeOver(fromNode, to)
      if (fromNode !== to && timeouts-- > 0) throw new Error('Command timed out') // ran in the store, the answer lost
      return moved
    })
    const sweep = new OutboxSweep({
      outbox: timingOut,
      node: 'self',
      liveNodes: async () => ['self'],
      isDead: () => false,
      everyMs: 20,
      onTaken: (entries, fromNode) => { self.adopt(entries, fromNode) },
      logger: pino({ level: 'silent' })
    })
    t.after(() => sweep.close())
    await sweep.start()
    assert.deepEqual(await keptSeqs(outbox, 'self'), [1], 'moved under this node, the answer lost')
    await receiver.until(() => receiver.requests.length > from, 'sent from this node after a later sweep')
    self.adopt(await outbox.takeOver('self', 'self'), 'self') // taken up again while held: not queued twice
    await eventually(async () => (await keptBy(outbox, 'self')).length === 0, WAIT_MS, 'forgotten once delivered')
    assert.deepEqual(receiver.requests.slice(from).map((r) => r.json.data.seq), [1], 'sent once')
    assert.equal(self.stats.recovered, 1)
  })

  it('takes nothing when it cannot read which nodes are live', async (t) => {
    const outbox = new MemoryOutbox()
    await outbox.keep('maybe-alive', entry('m-1'))
    const log = captured()
    let taken = 0
    const sweep = new OutboxSweep({
      outbox,
      node: 'self',
      liveNodes: async () => { throw new Error('store down') },
      isDead: () => false,
      everyMs: 60_000,
      onTaken: () => { taken++ },
      logger: log.logger
    })
    t.after(() => sweep.close())
    await sweep.start()
    assert.equal(taken, 0)
    assert.deepEqual((await keptBy(outbox, 'maybe-alive')).map((e) => e.id), ['m-1'])
    assert.ok(log.lines.some((l) => l.level === 40 && /store down/.test(l.err)), 'warned')
  })
})
