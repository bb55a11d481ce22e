/**
 * A prompt still pending whose request history trimmed (EVENTS_MAX_PER_SESSION:
 * output went on while it waited) reaches a client resuming over it: the
 * hello lists its id (`resume: "gap"`), and the replay, which starts at the
 * oldest seq kept, gives an observer its `request_pending` notice (the
 * holder gets it in full right after the replay). Before, an observer got
 * the id alone: what was asked, and of which tool, it never learned. On the
 * node running the CLI and on one following it (two Session objects on one
 * MemoryStore, the stub CLI).
 */
import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import type { Session } from '../../src/session/session.js'
import { type Frame, isHello } from '../support/frames.js'
import { HeldStore, TestPort, followingSession, ownedSession } from '../support/session-stubs.js'

const isRequest = (id: string) => (f: Frame): boolean => f.type === 'control_request' && f.request_id === id
const isNotice = (id: string) => (f: Frame): boolean => f.type === 'gateway' && f.subtype === 'request_pending' && f.request_id === id
const recorded = (port: TestPort): number[] => port.frames.filter((f) => typeof f.seq === 'number').map((f) => f.seq as number)

describe('a pending prompt whose request history trimmed', () => {
  const sessions: Session[] = []
  after(async () => { await Promise.all(sessions.map(async (s) => { await s.close(1000) })) })

  async function trimmed (): Promise<{ owner: Session, store: HeldStore, holder: TestPort, prompt: Frame }> {
    const { session: owner, store, cli } = await ownedSession(new HeldStore(100))
    sessions.push(owner)
    const holder = new TestPort()
    await owner.attach(holder, { role: 'controller', after: 0 })
    cli.print({ type: 'control_request', request_id: 'trimmed', request: { subtype: 'can_use_tool', tool_name: 'Bash', input: { command: 'rm -rf build' } } })
    const prompt = await holder.waitFor(isRequest('trimmed'))
    for (let i = 0; i < 300; i++) cli.print({ type: 'assistant', message: { content: [{ type: 'text', text: `line ${i}` }] }, parent_tool_use_id: 'task-1' })
    await owner.events.flush(5000)
    const first = await store.firstSeq(owner.id)
    assert.ok(first !== null && first > Number(prompt.seq), `history trimmed past the prompt (oldest ${String(first)})`)
    return { owner, store, holder, prompt }
  }

  async function observe (session: Session, prompt: Frame): Promise<TestPort> {
    const observer = new TestPort()
    // Resolves once the replay is sent.
    await session.attach(observer, { role: 'observer', after: 0 })
    const hello = await observer.waitFor(isHello)
    assert.equal(hello.resume, 'gap')
    assert.deepEqual(hello.pending_requests, ['trimmed'])
    const notice = observer.frames.find(isNotice('trimmed'))
    assert.ok(notice !== undefined, `a request_pending notice for the prompt; got seqs ${JSON.stringify(recorded(observer).slice(0, 5))}…`)
    assert.equal(notice.seq, prompt.seq)
    assert.equal(notice.tool_name, 'Bash')
    const seqs = recorded(observer)
    assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b), 'in seq order')
    return observer
  }

  it('on the node running the CLI: an observer gets its notice, a new holder the request once', async () => {
    const { owner, prompt } = await trimmed()
    await observe(owner, prompt)
    const next = new TestPort()
    await owner.attach(next, { role: 'controller', after: 0 })
    assert.equal(next.frames.filter(isRequest('trimmed')).length, 1, 'the request in full, once')
  })

  it('on a node following it: an observer gets its notice', async () => {
    const { owner, store, prompt } = await trimmed()
    const follower = await followingSession(store, owner)
    sessions.push(follower)
    await observe(follower, prompt)
  })
})
