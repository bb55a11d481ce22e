/**
 * AppendGate (src/store/append-gate.ts): appends of different sessions made
 * in one event-loop turn leave together at its end, and later ones are
 * clocked by the wave in flight; the ones that waited leave together as one
 * merged command (split only past the size limits), written while the
 * connection is corked, and each caller gets its own job's answer.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { AppendGate, type CorkableStream } from '../../src/store/append-gate.js'

/** A stream that records cork, uncork and the commands issued between them. */
function recordingStream (): CorkableStream & { log: string[] } {
  const log: string[] = []
  return { log, cork: () => { log.push('cork') }, uncork: () => { log.push('uncork') } }
}

interface Job { name: string, size: number }

/**
 * A gate whose commands the test answers: each merged command is logged as
 * `write a+b` and answered (per job: `ok <name>`, or the answer the test
 * gives) or failed when the test says.
 */
function harness (stream: CorkableStream & { log: string[] } | null, limits = { maxWeight: 100, maxJobs: 10 }): {
  gate: AppendGate<Job, string>
  log: string[]
  commands: Array<{ answer: (per?: Record<string, string>) => void, fail: (err: Error) => void }>
} {
  const log = stream?.log ?? []
  const commands: Array<{ answer: (per?: Record<string, string>) => void, fail: (err: Error) => void }> = []
  const gate = new AppendGate<Job, string>({
    stream: () => stream,
    writeMany: async (jobs) => {
      log.push(`write ${jobs.map((j) => j.name).join('+')}`)
      return await new Promise<string[]>((resolve, reject) => {
        commands.push({ answer: (per = {}) => { resolve(jobs.map((j) => per[j.name] ?? `ok ${j.name}`)) }, fail: reject })
      })
    },
    weight: (job) => job.size,
    ...limits
  })
  return { gate, log, commands }
}

const turn = async (): Promise<void> => { await new Promise((resolve) => setImmediate(resolve)) }

describe('AppendGate', () => {
  it('with nothing in flight, writes at the end of the turn: alone and uncorked, or the turn\'s appends merged', async () => {
    const stream = recordingStream()
    const { gate, log, commands } = harness(stream)
    const done = gate.submit({ name: 'a', size: 1 })
    assert.deepEqual(log, [], 'not before the turn\'s other I/O callbacks')
    await turn()
    assert.deepEqual(log, ['write a'])
    commands[0]?.answer()
    assert.equal(await done, 'ok a')
    assert.deepEqual(log, ['write a'])

    const both = [gate.submit({ name: 'b', size: 1 }), gate.submit({ name: 'c', size: 1 })]
    await turn()
    assert.deepEqual(log.slice(1), ['cork', 'write b+c', 'uncork'], 'appends of one turn share a command')
    commands[1]?.answer()
    assert.deepEqual(await Promise.all(both), ['ok b', 'ok c'])
  })

  it('holds appends while one is in flight, then sends them as one merged command inside one cork', async () => {
    const stream = recordingStream()
    const { gate, log, commands } = harness(stream)
    const pa = gate.submit({ name: 'a', size: 1 })
    await turn()
    const pb = gate.submit({ name: 'b', size: 1 })
    const pc = gate.submit({ name: 'c', size: 1 })
    await turn()
    assert.deepEqual(log, ['write a'], 'b and c wait for a')
    assert.equal(gate.waiting, 2)
    commands[0]?.answer()
    assert.equal(await pa, 'ok a')
    assert.deepEqual(log, ['write a', 'cork', 'write b+c', 'uncork'], 'in arrival order, one command')
    // While b+c is in flight, a new append waits for it.
    const pd = gate.submit({ name: 'd', size: 1 })
    await turn()
    assert.equal(log.includes('write d'), false, 'd waits until b+c is answered')
    commands[1]?.answer({ c: 'FENCED lease epoch 3 is not current' })
    assert.equal(await pb, 'ok b')
    assert.equal(await pc, 'FENCED lease epoch 3 is not current', 'each caller gets its own job\'s answer')
    assert.deepEqual(log.slice(4), ['write d'])
    commands[2]?.answer()
    assert.equal(await pd, 'ok d')
  })

  it('splits a wave past the weight and job limits, in order, all inside one cork', async () => {
    const stream = recordingStream()
    const { gate, log, commands } = harness(stream, { maxWeight: 10, maxJobs: 3 })
    const first = gate.submit({ name: 'a', size: 1 })
    await turn()
    const rest = [
      gate.submit({ name: 'b', size: 6 }), gate.submit({ name: 'c', size: 6 }), // c does not fit beside b
      gate.submit({ name: 'd', size: 1 }), gate.submit({ name: 'e', size: 1 }), gate.submit({ name: 'f', size: 1 }), // 3 jobs at most
      gate.submit({ name: 'g', size: 30 }) // larger than the limit: alone
    ]
    commands[0]?.answer()
    await first
    assert.deepEqual(log, ['write a', 'cork', 'write b', 'write c+d+e', 'write f', 'write g', 'uncork'])
    for (const c of commands.slice(1)) c.answer()
    assert.deepEqual(await Promise.all(rest), ['ok b', 'ok c', 'ok d', 'ok e', 'ok f', 'ok g'])
    assert.equal(gate.waiting, 0)
  })

  it('a failed command releases the waiting appends and its error reaches only the jobs it carried', async () => {
    const stream = recordingStream()
    const { gate, log, commands } = harness(stream)
    const pa = gate.submit({ name: 'a', size: 1 })
    await turn()
    const pb = gate.submit({ name: 'b', size: 1 })
    commands[0]?.fail(new Error('redis timed out'))
    await assert.rejects(pa, /redis timed out/)
    assert.deepEqual(log, ['write a', 'write b'])
    commands[1]?.answer()
    assert.equal(await pb, 'ok b')
    assert.equal(gate.waiting, 0)
  })

  it('an append that cannot be merged (run) goes in the next wave beside the merged command', async () => {
    const stream = recordingStream()
    const { gate, log, commands } = harness(stream)
    const pa = gate.submit({ name: 'a', size: 1 })
    await turn()
    let answerBig!: () => void
    const big = gate.run(async () => {
      log.push('write big')
      return await new Promise<string>((resolve) => { answerBig = () => { resolve('big done') } })
    })
    const pb = gate.submit({ name: 'b', size: 1 })
    await turn()
    assert.deepEqual(log, ['write a'])
    commands[0]?.answer()
    await pa
    assert.deepEqual(log, ['write a', 'cork', 'write b', 'write big', 'uncork'])
    // The next wave waits for both the merged command and the large write.
    const pc = gate.submit({ name: 'c', size: 1 })
    commands[1]?.answer()
    assert.equal(await pb, 'ok b')
    await turn()
    assert.equal(log.includes('write c'), false, 'c waits for the large write too')
    answerBig()
    assert.equal(await big, 'big done')
    assert.equal(log.at(-1), 'write c')
    commands[2]?.answer()
    assert.equal(await pc, 'ok c')
  })

  it('without a connection to cork, the waiting appends still leave together', async () => {
    const { gate, log, commands } = harness(null)
    const pa = gate.submit({ name: 'a', size: 1 })
    await turn()
    const pb = gate.submit({ name: 'b', size: 1 })
    const pc = gate.submit({ name: 'c', size: 1 })
    commands[0]?.answer()
    await pa
    assert.deepEqual(log, ['write a', 'write b+c'])
    commands[1]?.answer()
    assert.deepEqual(await Promise.all([pb, pc]), ['ok b', 'ok c'])
  })
})
