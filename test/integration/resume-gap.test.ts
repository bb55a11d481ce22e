/**
 * Resuming from a seq the store no longer holds (EVENTS_MAX_PER_SESSION
 * trimmed it): hello says `resume: "gap"` with the oldest seq still held, and
 * the replay starts exactly there, then continues live.
 */
import assert from 'node:assert/strict'
import { before, describe, it } from 'node:test'
import { isHello } from '../support/frames.js'
import { type TestGateway, gateway, suiteScope } from '../support/gateway.js'
import { readHistory, turn } from './resume-helpers.js'

describe('WebSocket resume across trimmed history', () => {
  const scope = suiteScope()
  let gw: TestGateway

  before(async () => {
    gw = await gateway(scope, { env: { EVENTS_MAX_PER_SESSION: '100' } })
  })

  it('says "gap" with oldest_seq and replays from there', async () => {
    const { id } = await gw.createSession()
    const controller = await gw.connect(id)
    const end = await turn(gw, id, controller, 'burst 300')
    const history = await readHistory(gw, id)
    const oldest = history[0].seq as number
    assert.ok(oldest > 2, `history was trimmed (oldest ${oldest})`)
    assert.ok(history.length >= 100 && history.length <= 110, `kept ${history.length}`)
    assert.deepEqual(history.map((f) => f.seq), Array.from({ length: end - oldest + 1 }, (_, i) => oldest + i), 'what is kept is contiguous up to the end')

    const client = await gw.connect(id, 'after=1&role=observer')
    const hello = await client.waitFor(isHello)
    assert.equal(hello.resume, 'gap')
    assert.equal(hello.oldest_seq, oldest)
    assert.equal(hello.last_seq, end)
    await client.until(() => client.seqFrames.some((f) => f.seq === end))
    assert.deepEqual(client.seqFrames, history, 'replay starts at oldest_seq: everything still held, once, in order')

    // Live frames follow the replay with no gap.
    const next = await turn(gw, id, controller, 'echo after the gap')
    await client.until(() => client.seqFrames.some((f) => f.seq === next))
    const seqs = client.seqFrames.map((f) => f.seq)
    assert.deepEqual(seqs, Array.from({ length: next - oldest + 1 }, (_, i) => oldest + i))

    // A seq just before the oldest held one is no gap: nothing is missing.
    const current = (await readHistory(gw, id))[0].seq as number
    const exact = await gw.connect(id, `after=${current - 1}&role=observer`)
    const exactHello = await exact.waitFor(isHello)
    assert.equal(exactHello.resume, 'ok')
    await exact.until(() => exact.seqFrames.some((f) => f.seq === next))
    assert.equal(exact.seqFrames[0].seq, current)

    // The events API starts at the oldest held seq too.
    const page = await gw.request('GET', `/v1/sessions/${id}/events?after=0&limit=5`)
    assert.equal(page.body.events[0].seq, current)
  })
})
