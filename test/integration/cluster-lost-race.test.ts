/**
 * A message sent right after a dead node's session was recorded `lost`
 * (issue 15, "a dead node loses nothing"): two nodes' Session objects over
 * one MemoryStore (the store they share), each taking leases under its own
 * node name, so the store's lease rules (one holder, epochs, a node taking
 * its own lease over) are the real ones. The recording node's lease release
 * is held open by the test, which picks the moment it lands: between another
 * node's refused acquire and that node's owner lookup, the window in which
 * such a message used to be refused with `session_elsewhere`. The CLI is a
 * stub that answers each user message with a result. The same scenario with
 * real gateway processes and their timing is in cluster-nodes-failover.test.ts.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, describe, it } from 'node:test'
import type { CliCallbacks, CliHandle, CliSpawnSpec } from '../../src/cli/cli-handle.js'
import type { ClientFrame } from '../../src/protocol/client-frames.js'
import type { SessionOwnership, SessionRoute } from '../../src/session/session-deps.js'
import { Session } from '../../src/session/session.js'
import { MemoryStore } from '../../src/store/memory.js'
import type { Lease, SessionRecord } from '../../src/store/store.js'
import { type Frame, isError, isResult, isStatus } from '../support/frames.js'
import { TestPort, sessionDeps, stubCliHandle } from '../support/session-stubs.js'

const isLost = (f: Frame): boolean => isStatus('stopped')(f) && f.exit?.reason === 'lost'
const isHolder = (f: Frame): boolean => f.type === 'gateway' && f.subtype === 'holder' && f.role === 'controller'
const TTL_MS = 60_000

function deferred<T = void> (): { promise: Promise<T>, resolve: (value: T) => void } {
  let resolve!: (value: T) => void
  const promise = new Promise<T>((r) => { resolve = r })
  return { promise, resolve }
}

/** Every CLI started, on any node: where, whether with --resume, and what it was written. */
interface Launch { node: string, resume: boolean, written: Frame[] }

/** One gateway node: its name, its view of the leases and of the other nodes, and its CLI launcher. */
class Node {
  readonly name: string
  readonly store: MemoryStore
  readonly launches: Launch[]
  /** Called with each acquisition's answer before the session gets it (the test interleaves other nodes there). */
  afterAcquire: (lease: Lease | null) => Promise<void> = async () => {}
  /** Called when a release starts, before it reaches the store. */
  beforeRelease: (lease: Lease) => Promise<void> = async () => {}
  acquires = 0
  /** Every acquisition answered "held by another node", whatever the store holds. */
  refusing = false
  /** Frames this node sent to another node's session (src/cluster/router.ts does that in the gateway). */
  readonly routed: Array<{ owner: string, frame: ClientFrame }> = []
  readonly #attached = new Map<string, string>()
  readonly sessions: Session[] = []

  constructor (name: string, store: MemoryStore, launches: Launch[]) {
    this.name = name
    this.store = store
    this.launches = launches
  }

  ownership (): SessionOwnership {
    return {
      acquire: async (id) => {
        this.acquires++
        const lease = this.refusing ? null : await this.store.leases.acquire(id, this.name, TTL_MS)
        await this.afterAcquire(lease)
        return lease
      },
      release: async (lease) => {
        await this.beforeRelease(lease)
        await this.store.leases.release(lease)
      },
      forget: () => {},
      reclaim: async () => false
    }
  }

  route (): SessionRoute {
    return {
      node: this.name,
      owner: async (id) => (await this.store.leases.holder(id))?.node ?? null,
      attach: (owner, _id, port) => { this.#attached.set(port.id, owner) },
      frame: (port, frame) => {
        const owner = this.#attached.get(port.id)
        if (owner === undefined) return false
        this.routed.push({ owner, frame })
        return true
      },
      detach: (port) => { this.#attached.delete(port.id) },
      unroute: (port) => { this.#attached.delete(port.id); return [] },
      dropRemote: () => {},
      call: async () => { throw new Error('no calls between nodes in this test') }
    }
  }

  /** This node's object for a stored session (as SessionManager loads it: not owned). */
  async load (id: string): Promise<Session> {
    const record = await this.store.getSession(id) as SessionRecord
    record.last_seq = Math.max(record.last_seq, await this.store.lastSeq(id) ?? 0)
    const session = new Session(record, sessionDeps(id, {
      store: this.store,
      launch: (spec, callbacks) => this.#launch(spec, callbacks),
      spawnSpec: (resume): CliSpawnSpec => ({ command: 'claude', args: resume ? ['--resume', id] : ['--session-id', id], cwd: process.cwd(), env: {}, sessionId: id }),
      ownership: this.ownership(),
      route: this.route()
    }))
    this.sessions.push(session)
    return session
  }

  /** A stub CLI: each user message gets a result echoing it. */
  #launch (spec: CliSpawnSpec, callbacks: CliCallbacks): CliHandle {
    const launch: Launch = { node: this.name, resume: spec.args.includes('--resume'), written: [] }
    this.launches.push(launch)
    return stubCliHandle(callbacks, (line) => {
      const msg = JSON.parse(line) as Frame
      launch.written.push(msg)
      if (msg.type === 'user') {
        queueMicrotask(() => callbacks.onLine(JSON.stringify({ type: 'result', subtype: 'success', is_error: false, result: `Echo: ${String(msg.message.content)}`, session_id: spec.sessionId })))
      }
    })
  }
}

/** Two nodes on one store, and a session whose node (node-a) died mid-turn: its record says running, its lease lapsed. */
async function cluster (): Promise<{ id: string, b: Node, c: Node, launches: Launch[], store: MemoryStore }> {
  const store = new MemoryStore({ retention: { maxEventsPerSession: 10_000, ttlSecondsAfterEnd: 0 } })
  const launches: Launch[] = []
  const id = randomUUID()
  const now = new Date().toISOString()
  await store.append(id, [
    { seq: 1, frame: JSON.stringify({ type: 'gateway', subtype: 'status', status: 'starting', pid: 4141, seq: 1 }) },
    { seq: 2, frame: JSON.stringify({ type: 'system', subtype: 'init', session_id: id, seq: 2 }) },
    { seq: 3, frame: JSON.stringify({ type: 'gateway', subtype: 'status', status: 'running', pid: 4141, seq: 3 }) }
  ])
  await store.putSession({ id, tenant: 'tenant-a', status: 'running', created_at: now, updated_at: now, options: {}, metadata: null, last_seq: 3, resumable: true, exit: null })
  return { id, b: new Node('node-b', store, launches), c: new Node('node-c', store, launches), launches, store }
}

const user = (content: string): ClientFrame => ({ type: 'user', message: { role: 'user', content } })

/** The user_message frames the store holds for the session (one per message handed to a CLI). */
/**
 * Starts `session`'s disown on `node` and holds its lease release before it
 * reaches the store: resolves once the release is waiting (the session already
 * owns nothing), with `land` to let it through and `disowned` for the end.
 */
async function holdRelease (node: Node, session: Session): Promise<{ land: () => void, disowned: Promise<void> }> {
  const releasing = deferred()
  const landRelease = deferred()
  node.beforeRelease = async () => { releasing.resolve(); await landRelease.promise }
  const disowned = session.disown()
  await releasing.promise
  return { land: () => { landRelease.resolve() }, disowned }
}

async function askedInLog (store: MemoryStore, id: string): Promise<string[]> {
  return (await store.read(id, 0, 1000)).map((e) => JSON.parse(e.frame) as Frame)
    .filter((f) => f.type === 'gateway' && f.subtype === 'user_message').map((f) => String(f.message.content))
}

describe('a message right after a dead node\'s session was recorded lost', () => {
  const sessions: Session[] = []
  after(async () => { await Promise.all(sessions.map(async (s) => { await s.close(1000) })) })

  it('reaching another node as the recorder\'s release lands (refused acquire, then no owner) resumes the CLI there, once', async () => {
    const { id, b, c, launches, store } = await cluster()
    const onB = await b.load(id)
    const onC = await c.load(id)
    sessions.push(onB, onC)
    const client = new TestPort()
    await onB.attach(client, { role: 'controller', after: 0 })

    // Node C takes the lapsed lease and records the end (B's client sees it through the store)...
    assert.equal(await onC.own(), true)
    await client.waitFor(isLost)
    await client.waitFor(isHolder)
    // ...then gives the lease up; its release is held before it reaches the store.
    const release = await holdRelease(c, onC)
    assert.equal(onC.owned, false)
    assert.equal((await store.leases.holder(id))?.node, 'node-c', 'the store still says node C')

    // B's acquire is refused (C still holds), and C's release lands before B asks who owns it.
    b.afterAcquire = async (lease) => {
      if (lease !== null) return
      release.land()
      await release.disowned
    }
    const from = client.frames.length
    onB.handleFrame(client, user('echo after the loss'))
    const answer = await client.waitFor((f) => isResult(f) || f.subtype === 'error', 5000, from)
    assert.equal(answer.type, 'result', `answered, not refused: ${JSON.stringify(answer)}`)
    assert.equal(answer.result, 'Echo: echo after the loss')

    assert.equal(client.frames.slice(from).filter((f) => f.subtype === 'error').length, 0, 'no error frame at all')
    assert.deepEqual(launches.map((l) => ({ node: l.node, resume: l.resume })), [{ node: 'node-b', resume: true }], 'one CLI, on B, resuming')
    assert.deepEqual(launches[0]?.written.filter((m) => m.type === 'user').map((m) => m.message.content), ['echo after the loss'], 'the CLI got it once')
    assert.deepEqual(await askedInLog(store, id), ['echo after the loss'])
    assert.deepEqual(b.routed, [], 'nothing was sent to another node')
    assert.equal((await store.leases.holder(id))?.node, 'node-b')
    assert.equal(onB.owned, true)
  })

  it('reaching the recorder itself while its release is in flight resumes the CLI there, and the late release does not undo it', async () => {
    const { id, c, launches, store } = await cluster()
    const onC = await c.load(id)
    sessions.push(onC)
    const client = new TestPort()
    await onC.attach(client, { role: 'controller', after: 0 })
    assert.equal(await onC.own(), true)
    await client.waitFor(isLost)
    const recorded = await store.leases.holder(id)

    const release = await holdRelease(c, onC)
    assert.equal(onC.owned, false)

    const from = client.frames.length
    onC.handleFrame(client, user('echo on the recorder'))
    const answer = await client.waitFor((f) => isResult(f) || f.subtype === 'error', 5000, from)
    assert.equal(answer.type, 'result', `answered, not refused: ${JSON.stringify(answer)}`)
    const retaken = await store.leases.holder(id)
    assert.equal(retaken?.node, 'node-c')
    assert.ok((retaken?.epoch ?? 0) > (recorded?.epoch ?? 0), 'taken again under a new epoch')

    // The old epoch's release lands now: it must not free the lease the running CLI holds.
    release.land()
    await release.disowned
    assert.deepEqual(await store.leases.holder(id).then((h) => h === null ? null : { node: h.node, epoch: h.epoch }), { node: 'node-c', epoch: retaken?.epoch })
    assert.equal(onC.owned, true)
    assert.equal(onC.running, true)
    assert.deepEqual(launches.map((l) => ({ node: l.node, resume: l.resume })), [{ node: 'node-c', resume: true }])
    assert.deepEqual(await askedInLog(store, id), ['echo on the recorder'])
  })

  it('gives up after a few attempts when the store keeps saying the lease is taken and then that nobody holds it', async () => {
    const { id, b, launches } = await cluster()
    const onB = await b.load(id)
    sessions.push(onB)
    const client = new TestPort()
    await onB.attach(client, { role: 'controller', after: 0 })
    // A store that contradicts itself on every round trip (as one failing over might):
    // acquisitions refused, owner lookups finding nobody.
    b.refusing = true
    const from = client.frames.length
    onB.handleFrame(client, user('echo never'))
    await client.waitFor(isError('session_elsewhere'), 5000, from)
    assert.ok(b.acquires >= 2 && b.acquires <= 5, `tried again a bounded number of times (${b.acquires} acquisitions)`)
    assert.deepEqual(launches, [])
    assert.equal(client.frames.slice(from).filter(isError('session_elsewhere')).length, 1, 'refused once')
  })
})
