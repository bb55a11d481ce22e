/**
 * A node taking up its own kept deliveries again (after a sweep failed: the
 * store blipped) reads them while some are still being sent. One that is
 * delivered, and whose removal the store answers, before that read's answer
 * reaches the notifier (the read's reply and the removal's come in one
 * packet, or the read takes several round trips) was queued again: the
 * receiver got the same event twice from one node. Over the memory outbox
 * and a real HTTP receiver, with the read and the removal in that order.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { MemoryOutbox } from '../../src/store/memory-outbox.js'
import { eventually } from '../support/gateway.js'
import { Receiver } from '../support/webhook-receiver.js'
import { keptBy, testNotifier, turnFinished } from '../support/webhook-notifier.js'

const WAIT_MS = 10_000

describe('webhook outbox, a node taking up its own deliveries while it sends them', () => {
  it('a delivery that ended after the takeover read it, and before its answer, is not sent again', async (t) => {
    const receiver = await Receiver.start(t)
    const outbox = new MemoryOutbox()
    receiver.hang = true
    const self = testNotifier(t, receiver, outbox, 'self')
    turnFinished(self, 1)
    await receiver.until(() => receiver.requests[0], 'the attempt')

    // The sweep's takeover of its own name reads what the store keeps: the delivery in flight among it.
    const read = await keptBy(outbox, 'self')
    assert.equal(read.length, 1)
    // The receiver answers; the removal is answered before the takeover's reply is handled.
    receiver.release()
    await eventually(() => self.stats.delivered === 1, WAIT_MS, 'delivered')
    await eventually(async () => (await keptBy(outbox, 'self')).length === 0, WAIT_MS, 'its removal answered')
    self.adopt(read, 'self') // the takeover's answer, handled now

    await eventually(async () => self.stats.inFlight === 0 && self.stats.waiting === 0 && (await keptBy(outbox, 'self')).length === 0, WAIT_MS, 'nothing left to send')
    assert.equal(receiver.requests.length, 1, `the event reached the receiver ${receiver.requests.length} times (recovered ${self.stats.recovered})`)
  })
})
