/**
 * WebSocket resume with `?after=<seq>` on the embedded (memory) store: the
 * client gets exactly the frames after that seq, then live ones, with no gap
 * and no duplicate — also when it dropped mid-burst, when five clients do it
 * at once, and when the CLI has exited meanwhile. redis-resume.test.ts runs
 * the same scenarios on the Redis store.
 */
import assert from 'node:assert/strict'
import { before, describe, it } from 'node:test'
import { isHello } from '../support/frames.js'
import { type TestGateway, gateway, suiteScope } from '../support/gateway.js'
import { assertSameAsHistory, readHistory, resumeScenarios, turn } from './resume-helpers.js'

describe('WebSocket resume (memory store)', () => {
  const scope = suiteScope()
  let gw: TestGateway

  before(async () => {
    gw = await gateway(scope)
  })

  it('hello says resume "ok"; the client gets exactly the frames after the seq, then live ones', async () => {
    const { id } = await gw.createSession()
    const controller = await gw.connect(id, 'after=0')
    const end = await turn(gw, id, controller, 'burst 50')
    const history = await readHistory(gw, id)

    const observer = await gw.connect(id, 'after=20&role=observer')
    const hello = await observer.waitFor(isHello)
    assert.equal(observer.frames[0], hello, 'hello comes first')
    assert.equal(hello.resume, 'ok')
    assert.equal(hello.oldest_seq, 1)
    assert.equal(hello.last_seq, end)
    await observer.until(() => observer.seqFrames.some((f) => f.seq === end))
    assert.deepEqual(observer.seqFrames, history.filter((f) => f.seq > 20))

    const next = await turn(gw, id, controller, 'echo live')
    await observer.until(() => observer.seqFrames.some((f) => f.seq === next))
    assertSameAsHistory([...history.filter((f) => f.seq <= 20), ...observer.seqFrames], await readHistory(gw, id))

    // Without after: live frames only, and hello says so.
    const plain = await gw.connect(id, 'role=observer')
    const plainHello = await plain.waitFor(isHello)
    assert.equal(plainHello.resume, 'none')
    // A seq from the future (e.g. a stale client of a wiped store) is treated as "up to date".
    const ahead = await gw.connect(id, `after=${next + 1000}&role=observer`)
    const aheadHello = await ahead.waitFor(isHello)
    assert.equal(aheadHello.resume, 'ok')
    const last = await turn(gw, id, controller, 'echo again')
    await ahead.until(() => ahead.seqFrames.some((f) => f.seq === last))
    assert.deepEqual(ahead.seqFrames, (await readHistory(gw, id)).filter((f) => f.seq > next))
    assert.deepEqual(plain.seqFrames, ahead.seqFrames)
  })

  resumeScenarios(() => gw)
})
