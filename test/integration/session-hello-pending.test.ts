/**
 * A hello's `pending_requests` are the prompts open as of its `last_seq`
 * (docs/PROTOCOL.md), on the node that runs the CLI: one Session over a
 * MemoryStore whose appends the test holds, so a prompt's answer (or the
 * prompt itself) is recorded but not yet committed when a client attaches.
 * Read at hello time instead, a prompt the replay shows open (its request at
 * or before last_seq, its answer after) was missing from the hello, and the
 * typed client took it for one that ended unseen (`permissionResolved`,
 * decision `unknown`) before its real answer arrived.
 */
import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import type { Session } from '../../src/session/session.js'
import { type Frame, isHello } from '../support/frames.js'
import { TestPort, ownedSession } from '../support/session-stubs.js'

const ask = (id: string): Record<string, unknown> => ({ type: 'control_request', request_id: id, request: { subtype: 'can_use_tool', tool_name: 'Bash', input: { command: 'ls' } } })
const isRequest = (id: string) => (f: Frame): boolean => f.type === 'control_request' && f.request_id === id
const isNotice = (id: string) => (f: Frame): boolean => f.type === 'gateway' && f.subtype === 'request_pending' && f.request_id === id
const isResolved = (id: string) => (f: Frame): boolean => f.type === 'gateway' && f.subtype === 'permission_resolved' && f.request_id === id

describe('a hello\'s pending_requests, where the CLI runs', () => {
  const sessions: Session[] = []
  after(async () => { await Promise.all(sessions.map(async (s) => { await s.close(1000) })) })

  it('lists a prompt answered after its last_seq (the answer recorded, not yet stored)', async () => {
    const { session, store, cli } = await ownedSession()
    sessions.push(session)
    const holder = new TestPort()
    await session.attach(holder, { role: 'controller', after: 0 })
    cli.print(ask('p1'))
    const prompt = await holder.waitFor(isRequest('p1'))

    store.hold()
    session.handleFrame(holder, { type: 'control_response', response: { subtype: 'success', request_id: 'p1', response: { behavior: 'allow', updatedInput: {} } } })
    await store.appendWaiting()

    const late = new TestPort()
    const attached = session.attach(late, { role: 'observer', after: 0 })
    const hello = await late.waitFor(isHello)
    store.release()
    await attached
    assert.ok(Number(hello.last_seq) >= Number(prompt.seq), `last_seq ${String(hello.last_seq)} covers the prompt at seq ${String(prompt.seq)}`)
    assert.deepEqual(hello.pending_requests, ['p1'], 'open as of last_seq: its answer comes after it')
    await late.waitFor(isNotice('p1'))
    const answer = await late.waitFor(isResolved('p1'))
    assert.ok(Number(answer.seq) > Number(hello.last_seq))
  })

  it('does not list a prompt asked after its last_seq (asked, not yet stored); the client gets it live', async () => {
    const { session, store, cli } = await ownedSession()
    sessions.push(session)
    const holder = new TestPort()
    await session.attach(holder, { role: 'controller', after: 0 })
    cli.print({ type: 'system', subtype: 'init', session_id: session.id })
    await holder.waitFor((f) => f.type === 'system')

    store.hold()
    cli.print(ask('p2'))
    await store.appendWaiting()
    const late = new TestPort()
    const attached = session.attach(late, { role: 'observer', after: 0 })
    const hello = await late.waitFor(isHello)
    store.release()
    await attached
    const notice = await late.waitFor(isNotice('p2'))
    assert.ok(Number(notice.seq) > Number(hello.last_seq), 'asked after last_seq')
    assert.deepEqual(hello.pending_requests, [], 'not open as of last_seq')
  })
})
