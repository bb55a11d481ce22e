/**
 * Clients of node B routed again to node A, where the session's CLI runs or
 * its lease is held: they did not just attach, so a controller among them
 * must not take the session from the newer controller holding it on A (the
 * newest controller wins only on a fresh attach, PROTOCOL.md "Holding a
 * session"), and must join A's session whenever A runs the CLI again. Two
 * nodes' Session objects on one MemoryStore, under their own node names,
 * each with a real ClusterRouter on the store's in-process bus; stub CLIs.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { afterEach, describe, it } from 'node:test'
import { pino } from 'pino'
import type { CliCallbacks, CliHandle, CliSpawnSpec } from '../../src/cli/cli-handle.js'
import { ClusterRouter } from '../../src/cluster/router.js'
import { routerRoute } from '../../src/cluster/router-route.js'
import { Session, type SessionDeps } from '../../src/session/session.js'
import { MemoryFeed } from '../../src/store/memory-feed.js'
import { MemoryStore } from '../../src/store/memory.js'
import type { EventStore, Lease, SessionRecord } from '../../src/store/store.js'
import { type Frame, isResult, isStatus } from '../support/frames.js'
import { TestPort, sessionDeps, stubCliHandle } from '../support/session-stubs.js'
import { eventually } from '../support/waiters.js'

const TTL_MS = 60_000
const isHolderFrame = (f: Frame): boolean => f.type === 'gateway' && f.subtype === 'holder'
const logger = pino({ level: 'silent' })

/** A stub CLI: each user message gets a result. */
function launch (_spec: CliSpawnSpec, callbacks: CliCallbacks): CliHandle {
  return stubCliHandle(callbacks, (line) => {
    const msg = JSON.parse(line) as Frame
    if (msg.type === 'user') queueMicrotask(() => { callbacks.onLine(JSON.stringify({ type: 'result', subtype: 'success', is_error: false, result: 'ok' })) })
  })
}

/** One node: its Session object for the session and its router (`route` is wired as app.ts does). */
interface Node { session: Session, router: ClusterRouter }

async function node (name: string, store: MemoryStore, view: EventStore, record: SessionRecord, lease: Lease | null, extra: Partial<SessionDeps> = {}): Promise<Node> {
  const loaded: { session?: Session } = {}
  // Heartbeats far apart: what the test shows is never a heartbeat's doing.
  const router = new ClusterRouter({ bus: store.bus, node: name, logger, find: () => loaded.session, heartbeatMs: 60_000, owner: async (id) => (await store.leases.holder(id))?.node ?? null })
  await router.start()
  const session = new Session({ ...record }, sessionDeps(record.id, {
    store: view,
    launch,
    ownership: {
      acquire: async (id) => await store.leases.acquire(id, name, TTL_MS),
      release: async (l) => { await store.leases.release(l) },
      forget: () => {},
      reclaim: async () => false
    },
    route: routerRoute(router, store.leases, name),
    ...extra
  }), lease)
  loaded.session = session
  return { session, router }
}

/** A session record no CLI has run yet, and node A's lease on it. */
async function stored (store: MemoryStore): Promise<{ record: SessionRecord, lease: Lease }> {
  const id = randomUUID()
  const now = new Date().toISOString()
  const record: SessionRecord = { id, tenant: 'tenant-a', status: 'stopped', created_at: now, updated_at: now, options: {}, metadata: null, last_seq: 0, resumable: false, exit: null }
  await store.putSession(record)
  return { record, lease: await store.leases.acquire(id, 'node-a', TTL_MS) as Lease }
}

/** X attaches on B (routed to A, where the CLI runs), then Y on A: Y, the newest controller, holds. */
async function xThenY (a: Node, b: Node): Promise<{ x: TestPort, y: TestPort }> {
  const x = new TestPort()
  await b.session.attach(x, { role: 'controller', after: 0 })
  await x.waitFor((f) => isHolderFrame(f) && f.holder === x.id)
  const y = new TestPort()
  await a.session.attach(y, { role: 'controller', after: 0 })
  assert.equal(a.session.snapshot().holder, y.id)
  await x.waitFor((f) => isHolderFrame(f) && f.holder === y.id && f.role === 'observer')
  return { x, y }
}

describe('clients of another node routed again to the session\'s node', () => {
  const nodes: Node[] = []
  const cleanups: Array<() => void> = []
  afterEach(async () => {
    for (const c of cleanups.splice(0)) c()
    for (const n of nodes.splice(0)) { await n.session.close(1000); await n.router.close() }
  })

  it('a message on B while A, its CLI stopped, still holds the lease: its client rejoins A, and the newer controller there keeps the session', async () => {
    const store = new MemoryStore({ retention: { maxEventsPerSession: 10_000, ttlSecondsAfterEnd: 0 } })
    const { record, lease } = await stored(store)
    // A's conversation save after the CLI's end waits for the test: A keeps the lease meanwhile.
    let saving: Promise<void> | null = null
    let endSave = (): void => {}
    cleanups.push(() => { endSave() })
    const conversation = { save: async () => { if (saving !== null) await saving }, restore: async () => {}, watch: () => null }
    const a = await node('node-a', store, store, record, lease, { conversation })
    const b = await node('node-b', store, store, record, null)
    nodes.push(a, b)
    assert.equal(a.session.start(), null)
    const { x, y } = await xThenY(a, b)

    saving = new Promise((resolve) => { endSave = resolve })
    const fromY = y.frames.length
    await a.session.stop('test')
    const stopped = await x.waitFor(isStatus('stopped'))
    // B runs nothing: X, its controller, holds the session there again.
    await x.waitFor((f) => isHolderFrame(f) && f.holder === x.id, 5000, x.frames.indexOf(stopped))
    assert.equal((await store.leases.holder(record.id))?.node, 'node-a', 'A still holds the lease')

    // X's message: B's acquire is refused (A holds the lease), so X is routed to A with it.
    const fromX = x.frames.length
    b.session.handleFrame(x, { type: 'user', message: { role: 'user', content: 'from X' } })
    const told = await x.waitFor((f) => isHolderFrame(f) && f.holder !== null, 5000, fromX)

    assert.deepEqual({ holder: told.holder, role: told.role }, { holder: y.id, role: 'observer' }, 'A tells X that Y holds')
    assert.equal(a.session.snapshot().holder, y.id, 'Y still holds the session')
    assert.deepEqual(y.frames.slice(fromY).filter(isHolderFrame), [], 'Y was never made an observer')
  })

  it('B catching up at once on a stop and a restart on A (its feed missed both): its client joins A\'s new session', async () => {
    const store = new MemoryStore({ retention: { maxEventsPerSession: 10_000, ttlSecondsAfterEnd: 0 } })
    const { record, lease } = await stored(store)
    // B's own feed, as a Redis node's subscription: it hears every append until the test cuts
    // it off, and reads the log again on resync (as after a lost subscriber connection).
    const bFeed = new MemoryFeed({ read: async (id, after, limit) => await store.read(id, after, limit) })
    let heard = true
    const publish = store.feed.publish.bind(store.feed)
    store.feed.publish = (id, events) => { publish(id, events); if (heard) bFeed.publish(id, events) }
    const bView = new Proxy(store, { get: (t, p) => { if (p === 'feed') return bFeed; const v = Reflect.get(t, p) as unknown; return typeof v === 'function' ? v.bind(t) : v } })
    const a = await node('node-a', store, store, record, lease)
    const b = await node('node-b', store, bView, record, null)
    nodes.push(a, b)
    assert.equal(a.session.start(), null)
    const { x, y } = await xThenY(a, b)

    // B hears nothing while the CLI stops on A (A gives the lease up) and Y's message starts it there again.
    heard = false
    await a.session.stop('test')
    await eventually(async () => await store.leases.holder(record.id) === null, 5000, 'A to give the lease up')
    const fromY = y.frames.length
    a.session.handleFrame(y, { type: 'user', message: { role: 'user', content: 'from Y' } })
    await y.waitFor(isResult, 5000, fromY)
    assert.equal(a.session.owned, true)

    const fromX = x.frames.length
    heard = true
    bFeed.resync(record.id)
    await x.waitFor(isResult, 5000, fromX)
    // X is a client of A's session again: A says who holds, and once Y leaves, X (a controller) holds.
    const told = await x.waitFor((f) => isHolderFrame(f) && f.holder !== null, 5000, fromX)
    assert.deepEqual({ holder: told.holder, role: told.role }, { holder: y.id, role: 'observer' })
    assert.equal(a.session.snapshot().clients, 2, 'A counts X among its clients')
    a.session.detach(y)
    assert.equal(a.session.snapshot().holder, x.id, 'X holds once Y left')
  })
})
