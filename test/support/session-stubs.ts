/**
 * Session objects without a gateway around them, for tests that need to
 * pick the moment things happen: a MemoryStore whose appends the test can
 * hold, a client port that keeps what it is sent, a stub CLI whose lines the
 * test prints, the session deps those tests share, and a session on a node
 * that runs it (owner) or on another
 * node that follows it from the store (its route reaches the owner's
 * Session object directly, as src/cluster/router.ts would over the bus).
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { pino } from 'pino'
import type { CliCallbacks, CliHandle, CliSpawnSpec } from '../../src/cli/cli-handle.js'
import { ControlPolicy } from '../../src/control/control-policy.js'
import type { ClientPort } from '../../src/session/audience.js'
import type { SessionRoute } from '../../src/session/session-deps.js'
import { Session, type SessionDeps } from '../../src/session/session.js'
import { MemoryStore } from '../../src/store/memory.js'
import type { Lease, SessionRecord, StoredEvent } from '../../src/store/store.js'
import type { Frame } from './frames.js'
import { Waiters } from './waiters.js'

const TTL_MS = 60_000

/** A MemoryStore whose appends wait from `hold()` until `release()`. */
export class HeldStore extends MemoryStore {
  #gate: Promise<void> | null = null
  #open: (() => void) | null = null
  readonly #waiters = new Waiters()
  /** Appends waiting at the gate now. */
  waiting = 0

  /** `maxEvents`: history keeps about this many events per session (EVENTS_MAX_PER_SESSION). */
  constructor (maxEvents = 100_000) {
    super({ retention: { maxEventsPerSession: maxEvents, ttlSecondsAfterEnd: 0 } })
  }

  hold (): void { this.#gate = new Promise((resolve) => { this.#open = resolve }) }
  release (): void { this.#open?.(); this.#gate = null; this.#open = null }
  /** Resolves once an append waits at the gate. */
  async appendWaiting (): Promise<void> { await this.#waiters.until(() => this.waiting > 0, 5000, 'an append held', () => 'none waiting') }

  override async append (sessionId: string, events: StoredEvent[], lease?: Lease): Promise<void> {
    const gate = this.#gate
    if (gate !== null) {
      this.waiting++
      this.#waiters.wake()
      await gate
      this.waiting--
    }
    await super.append(sessionId, events, lease)
  }
}

/** A client as the session sees it: every frame it is sent, parsed. */
export class TestPort implements ClientPort {
  readonly id = randomUUID()
  readonly frames: Frame[] = []
  readonly #waiters = new Waiters()

  send (data: string | Buffer): void {
    this.frames.push(JSON.parse(data.toString()) as Frame)
    this.#waiters.wake()
  }

  /** Resolves with the first frame (from index `from`) matching `predicate`. */
  async waitFor (predicate: (f: Frame) => boolean, timeoutMs = 5000, from = 0): Promise<Frame> {
    return await this.#waiters.until(() => this.frames.slice(from).find(predicate), timeoutMs, predicate.toString(),
      () => `frames: ${JSON.stringify(this.frames.slice(-5))}`)
  }
}

/** A stub CLI whose lines the test prints. */
export interface StubCli { print: (msg: Record<string, unknown>) => void }

/**
 * What every stub session shares: a spawn spec for `id`, no admission
 * limits, timeouts far beyond any test, a silent logger, the default
 * control policy. `parts` gives the store, the CLI, the ownership and
 * anything else the test picks (a route, a resume-aware spawn spec).
 */
export function sessionDeps (id: string, parts: Pick<SessionDeps, 'store' | 'launch' | 'ownership'> & Partial<SessionDeps>): SessionDeps {
  return {
    spawnSpec: (): CliSpawnSpec => ({ command: 'claude', args: [], cwd: process.cwd(), env: {}, sessionId: id }),
    admit: () => null,
    onStatus: () => {},
    limits: { permissionTimeoutMs: 60_000, controlRequestTimeoutMs: 60_000, clientRequestTimeoutMs: 60_000, idleTimeoutMs: 600_000, storeQueueMax: 1000, initializeHoldMs: 0, resumeWaitMs: 1000 },
    logger: pino({ level: 'silent' }),
    policy: new ControlPolicy({ clientControlAllow: [], mcpServerTypes: [], permissionUpdateDestinations: [], broadRuleTools: [], allowBypassPermissions: false }),
    policyScope: () => ({ roots: [process.cwd()], cwd: process.cwd() }),
    onFenced: () => {},
    ...parts
  }
}

/**
 * A stub CLI process: `onWrite` sees each stdin line written while it runs
 * (it may answer through `callbacks.onLine`); `stop` ends it once, exit 0.
 */
export function stubCliHandle (callbacks: CliCallbacks, onWrite: (line: string) => void = () => {}): CliHandle {
  let alive = true
  return {
    pid: 4242,
    write: (line) => {
      if (!alive) return false
      onWrite(line)
      return true
    },
    stop: async () => {
      const exit = { code: 0, signal: null, stderrTail: [] }
      if (alive) { alive = false; callbacks.onExit(exit) }
      return exit
    }
  }
}

function deps (store: MemoryStore, id: string, lease: Lease | null, launch: SessionDeps['launch'], route?: SessionRoute): SessionDeps {
  return sessionDeps(id, {
    store,
    launch,
    ownership: {
      acquire: async () => lease,
      release: async (l) => { await store.leases.release(l) },
      forget: () => {},
      reclaim: async () => false
    },
    ...(route === undefined ? {} : { route })
  })
}

/** A new session owned by node-a, its stub CLI started. */
export async function ownedSession (store: HeldStore = new HeldStore()): Promise<{ session: Session, store: HeldStore, cli: StubCli }> {
  const id = randomUUID()
  const now = new Date().toISOString()
  const record: SessionRecord = { id, tenant: 'tenant-a', status: 'stopped', created_at: now, updated_at: now, options: {}, metadata: null, last_seq: 0, resumable: false, exit: null }
  await store.putSession(record)
  const lease = await store.leases.acquire(id, 'node-a', TTL_MS)
  let callbacks: CliCallbacks | null = null
  const launch = (_spec: CliSpawnSpec, cb: CliCallbacks): CliHandle => {
    callbacks = cb
    return stubCliHandle(cb)
  }
  const session = new Session(record, deps(store, id, lease, launch), lease)
  assert.equal(session.start(), null)
  const cli: StubCli = { print: (msg) => { (callbacks as CliCallbacks | null)?.onLine(JSON.stringify(msg)) } }
  return { session, store, cli }
}

/**
 * The same session as node-b loads it (not owned): it follows the log and
 * reaches `owner` through its route (node-a). Clients attached to it are
 * made owner's remote clients in name only (frames are not forwarded).
 */
export async function followingSession (store: HeldStore, owner: Session): Promise<Session> {
  const record = await store.getSession(owner.id) as SessionRecord
  record.last_seq = Math.max(record.last_seq, await store.lastSeq(owner.id) ?? 0)
  const route: SessionRoute = {
    node: 'node-b',
    owner: async (id) => (await store.leases.holder(id))?.node ?? null,
    attach: () => {},
    frame: () => true,
    detach: () => {},
    unroute: () => [],
    dropRemote: () => {},
    call: async (_node, _id, op, args) => await owner.call(op, args)
  }
  return new Session(record, deps(store, owner.id, null, () => { throw new Error('no CLI on node-b') }, route))
}
