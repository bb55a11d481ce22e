/**
 * A CLI that prints faster than the store writes is paused, not buffered
 * without bound: once BACKLOG_CHARS of its lines wait behind the append in
 * flight, the session asks the CLI handle to stop its output, and to go on
 * once they leave for the store; every line still reaches the client, in
 * order. A CLI started again while its predecessor's lines still wait starts
 * paused. Over a real WebSocket, with a store whose appends the test holds
 * and in-process CLI handles that record what they are asked.
 */
import assert from 'node:assert/strict'
import { type TestContext, describe, it } from 'node:test'
import type { CliExit, CliLauncher } from '../../src/cli/cli-handle.js'
import { BACKLOG_CHARS } from '../../src/session/event-log.js'
import { MemoryStore } from '../../src/store/memory.js'
import type { Lease, StoredEvent } from '../../src/store/store.js'
import type { TestClient } from '../support/gateway.js'
import { client, gateway } from '../support/sessions.js'

/** A MemoryStore whose appends wait, while held, until the test releases them. */
class HeldStore extends MemoryStore {
  #gate: Promise<void> | null = null
  #open = (): void => {}
  /** Resolves when an append starts waiting on the gate. */
  #waiting: (() => void) | null = null

  hold (): Promise<void> {
    this.#gate = new Promise((resolve) => { this.#open = resolve })
    return new Promise((resolve) => { this.#waiting = resolve })
  }

  release (): void { this.#gate = null; this.#open() }

  override async append (sessionId: string, events: StoredEvent[], lease?: Lease): Promise<void> {
    const gate = this.#gate
    if (gate !== null) {
      this.#waiting?.()
      this.#waiting = null
      await gate
    }
    await super.append(sessionId, events, lease)
  }
}

/** A gateway over `store` whose CLIs `launch` makes, a session, and a client holding it; `from`: how many frames it had before the test's own. */
async function holding (t: TestContext, launch: CliLauncher, store: HeldStore): Promise<{ id: string, holder: TestClient, from: number }> {
  const gw = await gateway(t, { parts: { launch, store } })
  const id = (await gw.createSession()).id
  const holder = await client(gw, t, id)
  return { id, holder, from: holder.frames.length }
}

/** The holder's assistant frames after `from`, once there are `count` of them. */
async function assistantFrames (holder: TestClient, from: number, count: number): Promise<any[]> {
  return await holder.until(() => {
    const got = holder.frames.slice(from).filter((f) => f.type === 'assistant')
    return got.length === count ? got : undefined
  }, 10_000, `${count} assistant frames`)
}

/** The line numbers (`line(i)`) the frames carry, in the order received. */
const numbers = (frames: any[]): number[] => frames.map((f) => Number(/^#(\d+) /.exec(f.message.content[0].text)?.[1]))

const LINES = 2000
/** An assistant line of about 1 KB: 2 MB in all, several times BACKLOG_CHARS. */
const line = (i: number): string => JSON.stringify({ type: 'assistant', message: { role: 'assistant', content: [{ type: 'text', text: `#${i} ${'x'.repeat(1000)}` }] } })

describe('a CLI printing faster than the store writes', () => {
  it('is paused once BACKLOG_CHARS wait behind the append in flight, resumed when they leave, and every line reaches the client in order', { timeout: 30_000 }, async (t) => {
    const store = new HeldStore({ retention: { maxEventsPerSession: 100_000, ttlSecondsAfterEnd: 0 } })
    const asked: string[] = []
    let printed = 0
    let pausedAt = -1
    let allPrinted: () => void = () => {}
    const printedAll = new Promise<void>((resolve) => { allPrinted = resolve })
    const launch: CliLauncher = (_spec, callbacks) => {
      const exit: CliExit = { code: 0, signal: null, stderrTail: [] }
      let ended = false
      return {
        pid: undefined,
        write: (text) => {
          if (!text.includes('"type":"user"')) return true
          // One line first, so that its append is in flight (held), then the rest at once.
          void (async () => {
            const held = store.hold()
            callbacks.onLine(line(printed++))
            await held
            while (printed < LINES) callbacks.onLine(line(printed++))
            allPrinted()
          })()
          return true
        },
        stop: async () => {
          if (!ended) { ended = true; callbacks.onExit(exit) }
          return exit
        },
        pauseOutput: () => { asked.push('pause'); pausedAt = printed },
        resumeOutput: () => { asked.push('resume') }
      }
    }
    const { id, holder, from } = await holding(t, launch, store)
    holder.sendUser('print a lot')

    // The lines after the first wait behind its append; the pause comes when they reach the mark, not at the end.
    await printedAll
    assert.deepEqual(asked, ['pause'], 'paused while the store holds the append in flight')
    const frameChars = line(LINES - 1).length
    assert.ok((pausedAt - 1) * frameChars >= BACKLOG_CHARS * 0.9 && (pausedAt - 2) * line(0).length < BACKLOG_CHARS,
      `paused at line ${pausedAt}, when about ${BACKLOG_CHARS} characters waited`)
    assert.equal(holder.frames.slice(from).filter((f) => f.type === 'assistant').length, 0, 'nothing relayed before it is stored')

    store.release()
    const texts = await assistantFrames(holder, from, LINES)
    assert.deepEqual(asked, ['pause', 'resume'], 'resumed once the waiting lines left for the store')
    assert.deepEqual(numbers(texts), Array.from({ length: LINES }, (_v, i) => i))
    const seqs = texts.map((f) => f.seq as number)
    assert.ok(seqs.every((s, i) => i === 0 || s === (seqs[i - 1] as number) + 1), 'seqs ascend without a gap')
    assert.equal((await store.read(id, 0, LINES + 100)).filter((e) => e.frame.includes('"type":"assistant"')).length, LINES, 'every line stored')
  })

  it('a CLI started again while the lines of the one before still wait behind the store starts paused, and is resumed when they leave', { timeout: 30_000 }, async (t) => {
    const store = new HeldStore({ retention: { maxEventsPerSession: 100_000, ttlSecondsAfterEnd: 0 } })
    const FIRST = 400
    const SECOND = 5
    const asked: string[][] = []
    /** What the second CLI had been asked when it received its first user line. */
    let askedAtFirstWrite: string[] | null = null
    let firstGone: () => void = () => {}
    const firstExited = new Promise<void>((resolve) => { firstGone = resolve })
    let secondPrinted: () => void = () => {}
    const secondDone = new Promise<void>((resolve) => { secondPrinted = resolve })
    const launch: CliLauncher = (_spec, callbacks) => {
      const k = asked.length
      const mine: string[] = []
      asked.push(mine)
      const exit: CliExit = { code: 0, signal: null, stderrTail: [] }
      let ended = false
      const end = (): void => { if (!ended) { ended = true; callbacks.onExit(exit) } }
      return {
        pid: undefined,
        write: (text) => {
          if (!text.includes('"type":"user"')) return true
          if (k === 0) {
            // Past the mark behind a held append, then gone, its lines still waiting.
            void (async () => {
              const held = store.hold()
              callbacks.onLine(line(0))
              await held
              for (let i = 1; i < FIRST; i++) callbacks.onLine(line(i))
              end()
              firstGone()
            })()
          } else {
            askedAtFirstWrite ??= [...mine]
            for (let i = 0; i < SECOND; i++) callbacks.onLine(line(FIRST + i))
            secondPrinted()
          }
          return true
        },
        stop: async () => { end(); return exit },
        pauseOutput: () => { mine.push('pause') },
        resumeOutput: () => { mine.push('resume') }
      }
    }
    const { holder, from } = await holding(t, launch, store)
    holder.sendUser('print a lot, then exit')
    await firstExited
    assert.deepEqual(asked, [['pause']], 'the first CLI paused at the mark, then exited')

    holder.sendUser('go on')
    await secondDone
    assert.equal(asked.length, 2, 'a second CLI started for the second message')
    assert.deepEqual(askedAtFirstWrite, ['pause'], 'paused from its start, before it printed')

    store.release()
    const texts = await assistantFrames(holder, from, FIRST + SECOND)
    assert.deepEqual(asked[1], ['pause', 'resume'], 'resumed once the waiting lines left for the store')
    assert.deepEqual(numbers(texts), Array.from({ length: FIRST + SECOND }, (_v, i) => i), 'both CLIs\' lines, in order')
  })
})
