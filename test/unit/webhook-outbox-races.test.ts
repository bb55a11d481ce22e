/**
 * The webhook outbox when removals fail (the store gone for a moment), over
 * the memory outbox and a real HTTP receiver: a removal that failed is
 * tried again, so neither another node nor this run sends a delivered
 * event again. (A takeover that failed part way: webhook-outbox.test.ts.)
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import pino from 'pino'
import { MemoryOutbox } from '../../src/store/memory-outbox.js'
import type { WebhookOutbox } from '../../src/store/store.js'
import { OutboxSweep } from '../../src/webhooks/outbox-sweep.js'
import { eventually } from '../support/gateway.js'
import { Waiters } from '../support/waiters.js'
import { Receiver } from '../support/webhook-receiver.js'
import { keptBy, testNotifier, turnFinished } from '../support/webhook-notifier.js'

const WAIT_MS = 10_000

describe('webhook outbox, the store failing part way', () => {
  it('a delivery that ended while the store could not take its removal is removed once the store is back: whoever takes the node over sends nothing again', async (t) => {
    const receiver = await Receiver.start(t)
    const outbox = new MemoryOutbox()
    let storeDown = false
    const flaky: WebhookOutbox = {
      keep: outbox.keep.bind(outbox),
      remove: async (node, ids) => { if (storeDown) throw new Error('Connection is closed.'); await outbox.remove(node, ids) },
      nodes: outbox.nodes.bind(outbox),
      takeOver: outbox.takeOver.bind(outbox)
    }
    receiver.hang = true
    const n1 = testNotifier(t, receiver, flaky, 'n1')
    turnFinished(n1, 1) // kept while the store answers
    await receiver.until(() => receiver.requests[0], 'the attempt')
    storeDown = true // a blip of a second or so: ioredis rejects the HDEL
    receiver.release()
    await eventually(() => n1.stats.delivered === 1, WAIT_MS, 'delivered')
    await eventually(async () => true) // let the remove's rejection settle
    storeDown = false
    n1.keepAgain() // the store's onReconnect
    // n1 stops normally: nothing unsent.
    await n1.close(50)
    assert.equal(n1.stats.abandoned, 0)
    // Another node takes n1 over (or n1 starts again under a fixed NODE_ID).
    const n2 = testNotifier(t, receiver, outbox, 'n2')
    n2.adopt(await outbox.takeOver('n1', 'n2'), 'n1')
    await eventually(async () => (await keptBy(outbox, 'n2')).length === 0, WAIT_MS, 'n2 forgot what it took over')
    assert.equal(receiver.requests.length, 1, `a delivered event was sent ${receiver.requests.length} times`)
  })

  it('within one run: a previous run\'s delivery delivered during a store blip (its removal failing, a sweep failing too) is not taken up again when the store answers', async (t) => {
    const receiver = await Receiver.start(t)
    const outbox = new MemoryOutbox()
    // The previous run of NODE_ID "self" left one delivery unsent.
    receiver.status = 503
    const previous = testNotifier(t, receiver, outbox, 'self')
    turnFinished(previous, 1)
    await receiver.until(() => receiver.requests.length >= 1, 'the previous run\'s attempt')
    await previous.close(50)
    const from = receiver.requests.length

    let storeDown = false
    let sweeps = 0 // calls the sweep makes (its own takeover, the live nodes)
    const waiters = new Waiters()
    const down = async (): Promise<void> => { if (storeDown) throw new Error('Connection is closed.') }
    const flaky: WebhookOutbox = {
      keep: async (node, entry) => { await down(); await outbox.keep(node, entry) },
      remove: async (node, ids) => { await down(); await outbox.remove(node, ids) },
      nodes: async () => { await down(); return await outbox.nodes() },
      takeOver: async (f, to) => { if (f === to) { sweeps++; waiters.wake() } await down(); return await outbox.takeOver(f, to) }
    }
    const self = testNotifier(t, receiver, flaky, 'self')
    receiver.hang = true // the receiver is slow: the adopted delivery is in flight when the blip starts
    const sweep = new OutboxSweep({
      outbox: flaky,
      node: 'self',
      liveNodes: async () => { sweeps++; waiters.wake(); await down(); return ['self'] },
      isDead: () => false,
      everyMs: 20,
      onTaken: (entries, fromNode) => { self.adopt(entries, fromNode) },
      logger: pino({ level: 'silent' })
    })
    t.after(() => sweep.close())
    await sweep.start() // takes up the previous run's delivery: sent from this run
    await receiver.until(() => receiver.requests.length > from, 'the previous run\'s delivery offered again')
    storeDown = true // a blip: the delivery is answered 200 meanwhile, its HDEL fails; a sweep fails too
    receiver.release()
    await eventually(() => self.stats.delivered === 1, WAIT_MS, 'delivered')
    const at = sweeps
    await waiters.until(() => sweeps > at + 1, WAIT_MS, 'a sweep during the blip', () => `sweeps ${sweeps}`)
    storeDown = false
    const after = sweeps
    await waiters.until(() => sweeps > after + 2, WAIT_MS, 'sweeps after the blip', () => `sweeps ${sweeps}`)
    await eventually(() => self.stats.inFlight === 0 && self.stats.waiting === 0, WAIT_MS, 'nothing left to send')
    const sent = receiver.requests.slice(from).filter((r) => r.res.statusCode === 200 && !r.cutOff).length
    assert.equal(sent, 1, `the previous run's delivery reached the receiver ${sent} times in this run (recovered ${self.stats.recovered})`)
  })
})
