/**
 * AnswerOutcomes (src/client/answer-outcomes.ts): how a holder's permission
 * answer ended, from the frames that say so in either order.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { AnswerOutcomes } from '../../src/client/answer-outcomes.js'

describe('client AnswerOutcomes', () => {
  it('permission_resolved by this connection (an earlier client id too) is answered', async () => {
    const o = new AnswerOutcomes()
    o.attachedAs('c1')
    o.attachedAs('c2')
    const p = o.wait('r1')
    o.ended('r1', 'c1')
    assert.deepEqual(await p, { requestId: 'r1', outcome: 'answered' })
  })

  it('another client first: already_resolved, and the refusal that follows is absorbed once', async () => {
    const o = new AnswerOutcomes()
    o.attachedAs('c1')
    const p = o.wait('r1')
    o.ended('r1', 'http:tenant-a')
    assert.deepEqual(await p, { requestId: 'r1', outcome: 'already_resolved' })
    assert.equal(o.refused('r1', 'already_resolved'), true)
    assert.equal(o.refused('r1', 'already_resolved'), false, 'only the one expected')
  })

  it('other refusals settle refused with their code and are reported; close settles connection_closed', async () => {
    const o = new AnswerOutcomes()
    const p = o.wait('r1')
    assert.equal(o.refused('r1', 'bypass_not_allowed'), false)
    assert.deepEqual(await p, { requestId: 'r1', outcome: 'refused', code: 'bypass_not_allowed' })
    const q = o.wait('r2')
    o.settleAll('connection_closed')
    assert.deepEqual(await q, { requestId: 'r2', outcome: 'refused', code: 'connection_closed' })
  })
})
