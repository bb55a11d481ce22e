/**
 * A close must not reorder a session's deliveries. A delivery that failed
 * lately (backing off, or failing while the queue closes) is abandoned at
 * close and stays kept in the outbox for another node; its session's later
 * deliveries must stay with it, not be sent during the close's deadline
 * ahead of it: the receiver would get them first, and the held-back one
 * later from the node that takes the outbox over. Real receiver, memory
 * outbox; waits are on requests and stats, never sleeps.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { MemoryOutbox } from '../../src/store/memory-outbox.js'
import { eventually } from '../support/gateway.js'
import { Receiver } from '../support/webhook-receiver.js'
import { keptBy, testNotifier, turnFinished } from '../support/webhook-notifier.js'

const WAIT_MS = 10_000

describe('webhook close keeps a session\'s order', () => {
  for (const when of ['backing off', 'failing while closing'] as const) {
    it(`a delivery ${when} at close holds back its session's later ones: kept together, sent in order by the taker`, async (t) => {
      const receiver = await Receiver.start(t)
      const outbox = new MemoryOutbox()
      // A long backoff: the first attempt's failure leaves it waiting well past the close.
      const left = testNotifier(t, receiver, outbox, 'left', { retryBaseMs: 60_000, retryMaxMs: 60_000 })
      if (when === 'backing off') receiver.status = 503
      else receiver.hang = true
      turnFinished(left, 1)
      await receiver.until(() => receiver.requests[0], 'the first attempt')
      receiver.hang = false
      turnFinished(left, 2) // behind 1 in its session's lane
      if (when === 'backing off') await eventually(() => left.stats.inFlight === 0, WAIT_MS, 'the first backing off')
      // The receiver is fine again (its 503 was a blip); the held answer fails as the close cuts it.
      receiver.status = 200
      const closed = left.close(500)
      if (when === 'failing while closing') receiver.requests[0]?.res.writeHead(503).end()
      await closed
      assert.deepEqual(receiver.requests.map((r) => r.json.data.seq), [1], 'nothing of the session sent past its failing head')
      assert.equal((await keptBy(outbox, 'left')).length, 2, 'both kept for another node')

      const from = receiver.requests.length
      const taker = testNotifier(t, receiver, outbox, 'taker')
      taker.adopt(await outbox.takeOver('left', 'taker'), 'left')
      await receiver.until(() => receiver.requests.length >= from + 2, 'both sent by the taker')
      assert.deepEqual(receiver.requests.slice(from).map((r) => r.json.data.seq), [1, 2], 'sent in order')
    })
  }
})
