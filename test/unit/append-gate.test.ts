/**
 * AppendGate (src/store/append-gate.ts): appends of different sessions are
 * clocked by the one in flight, and the ones that waited are written together
 * while the connection is corked.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { AppendGate, type CorkableStream } from '../../src/store/append-gate.js'

/** A stream that records cork, uncork and the writes issued between them. */
function recordingStream (): CorkableStream & { log: string[] } {
  const log: string[] = []
  return { log, cork: () => { log.push('cork') }, uncork: () => { log.push('uncork') } }
}

/** A write whose answer the test gives; `issued` says the command went out. */
function deferredWrite (log: string[], name: string): { write: () => Promise<string>, answer: () => void, fail: (err: Error) => void } {
  let answer!: () => void
  let fail!: (err: Error) => void
  const answered = new Promise<string>((resolve, reject) => { answer = () => { resolve(name) }; fail = reject })
  return { write: async () => { log.push(`write ${name}`); return await answered }, answer, fail }
}

describe('AppendGate', () => {
  it('writes at once when nothing is in flight', async () => {
    const stream = recordingStream()
    const gate = new AppendGate(() => stream)
    const a = deferredWrite(stream.log, 'a')
    const done = gate.run(a.write)
    assert.deepEqual(stream.log, ['write a'])
    a.answer()
    assert.equal(await done, 'a')
    assert.deepEqual(stream.log, ['write a'])
  })

  it('holds appends while one is in flight, then writes them all inside one cork', async () => {
    const stream = recordingStream()
    const gate = new AppendGate(() => stream)
    const a = deferredWrite(stream.log, 'a')
    const b = deferredWrite(stream.log, 'b')
    const c = deferredWrite(stream.log, 'c')
    const pa = gate.run(a.write)
    const pb = gate.run(b.write)
    const pc = gate.run(c.write)
    await new Promise((resolve) => setImmediate(resolve))
    assert.deepEqual(stream.log, ['write a'], 'b and c wait for a')
    assert.equal(gate.waiting, 2)
    a.answer()
    assert.equal(await pa, 'a')
    await new Promise((resolve) => setImmediate(resolve))
    assert.deepEqual(stream.log, ['write a', 'cork', 'write b', 'write c', 'uncork'], 'in arrival order, in one corked write')
    // While b and c are in flight, a new append waits for both.
    const d = deferredWrite(stream.log, 'd')
    const pd = gate.run(d.write)
    b.answer()
    assert.equal(await pb, 'b')
    await new Promise((resolve) => setImmediate(resolve))
    assert.equal(stream.log.includes('write d'), false, 'd waits until c is answered too')
    c.answer()
    assert.equal(await pc, 'c')
    await new Promise((resolve) => setImmediate(resolve))
    assert.deepEqual(stream.log.slice(5), ['cork', 'write d', 'uncork'])
    d.answer()
    assert.equal(await pd, 'd')
  })

  it('a failed append releases the waiting ones and its error reaches only its caller', async () => {
    const stream = recordingStream()
    const gate = new AppendGate(() => stream)
    const a = deferredWrite(stream.log, 'a')
    const b = deferredWrite(stream.log, 'b')
    const pa = gate.run(a.write)
    const pb = gate.run(b.write)
    a.fail(new Error('redis timed out'))
    await assert.rejects(pa, /redis timed out/)
    await new Promise((resolve) => setImmediate(resolve))
    assert.deepEqual(stream.log, ['write a', 'cork', 'write b', 'uncork'])
    b.answer()
    assert.equal(await pb, 'b')
    assert.equal(gate.waiting, 0)
  })

  it('without a connection to cork, the waiting appends are still released together', async () => {
    const log: string[] = []
    const gate = new AppendGate(() => null)
    const a = deferredWrite(log, 'a')
    const b = deferredWrite(log, 'b')
    const c = deferredWrite(log, 'c')
    const pa = gate.run(a.write)
    const pb = gate.run(b.write)
    const pc = gate.run(c.write)
    a.answer()
    await pa
    await new Promise((resolve) => setImmediate(resolve))
    assert.deepEqual(log, ['write a', 'write b', 'write c'])
    b.answer()
    c.answer()
    assert.deepEqual(await Promise.all([pb, pc]), ['b', 'c'])
  })
})
