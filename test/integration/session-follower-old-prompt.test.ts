/**
 * A prompt asked long before the end of the log (more than LOST_SCAN_EVENTS
 * events before it: a session whose prompt stays open while output goes on,
 * e.g. a subagent's) is still pending for a client on a node that does not
 * run the CLI. That node knows the prompts open before it followed the log
 * from a scan of the log's last LOST_SCAN_EVENTS events only: the hello there
 * left the prompt out, so a client resuming past it never learned of it, and
 * the typed client replaying over it took it for one that ended unseen
 * (decision `unknown`). Two Session objects on one MemoryStore: node-a runs
 * the stub CLI, node-b follows.
 */
import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import type { Session } from '../../src/session/session.js'
import { LOST_SCAN_EVENTS } from '../../src/session/unresolved-requests.js'
import { type Frame, isHello } from '../support/frames.js'
import { TestPort, followingSession, ownedSession } from '../support/session-stubs.js'

const isRequest = (id: string) => (f: Frame): boolean => f.type === 'control_request' && f.request_id === id
const isNotice = (id: string) => (f: Frame): boolean => f.type === 'gateway' && f.subtype === 'request_pending' && f.request_id === id
const isResolved = (id: string) => (f: Frame): boolean => f.type === 'gateway' && f.subtype === 'permission_resolved' && f.request_id === id

describe('a prompt older than the last LOST_SCAN_EVENTS events, on a node that does not run the CLI', () => {
  const sessions: Session[] = []
  after(async () => { await Promise.all(sessions.map(async (s) => { await s.close(1000) })) })

  it('is listed in the hello there, and ends there when it is answered', async () => {
    const { session: owner, store, cli } = await ownedSession()
    sessions.push(owner)
    const holder = new TestPort()
    await owner.attach(holder, { role: 'controller', after: 0 })
    cli.print({ type: 'control_request', request_id: 'old', request: { subtype: 'can_use_tool', tool_name: 'Bash', input: { command: 'ls' } } })
    await holder.waitFor(isRequest('old'))
    for (let i = 0; i < LOST_SCAN_EVENTS + 100; i++) cli.print({ type: 'assistant', message: { content: [{ type: 'text', text: `line ${i}` }] }, parent_tool_use_id: 'task-1' })
    await owner.events.flush(5000)
    const last = owner.events.committedSeq
    assert.equal(await store.lastSeq(owner.id), last)

    const follower = await followingSession(store, owner)
    sessions.push(follower)
    // Resuming past the prompt: the hello alone says it is open.
    const resumed = new TestPort()
    await follower.attach(resumed, { role: 'observer', after: last })
    const hello = await resumed.waitFor(isHello)
    assert.equal(hello.last_seq, last)
    assert.deepEqual(hello.pending_requests, ['old'], 'the prompt still open')

    // Replaying over it: its notice, and the hello saying it is still open.
    const replayed = new TestPort()
    await follower.attach(replayed, { role: 'observer', after: 0 })
    assert.deepEqual((await replayed.waitFor(isHello)).pending_requests, ['old'])
    await replayed.waitFor(isNotice('old'))

    holder.frames.length = 0
    owner.handleFrame(holder, { type: 'control_response', response: { subtype: 'success', request_id: 'old', response: { behavior: 'allow', updatedInput: {} } } })
    await resumed.waitFor(isResolved('old'))
    // Ended there: a hello now lists nothing.
    const later = new TestPort()
    await follower.attach(later, { role: 'observer', after: 0 })
    assert.deepEqual((await later.waitFor(isHello)).pending_requests, [])
  })
})
