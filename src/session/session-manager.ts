/**
 * Creates, finds and stops sessions. Sessions are loaded from the store on
 * demand, so after a gateway restart every stored session can be listed,
 * read, attached to and resumed; those whose CLI died with the old process
 * are marked stopped (`exit.reason: "lost"`) when first loaded, with a status
 * frame in their own log so every reader and follower learns it.
 *
 * The boundary between routes and the store: a store call that fails here
 * becomes `store_unavailable` (503), while sessions already loaded keep
 * answering from memory. When the store answers again after a lost
 * connection, every loaded session's record is written again (the store
 * may have lost it). Finding the sessions a gone node left running is in
 * lost-sessions.ts; how sessions hold their leases, in lease-ownership.ts;
 * what the session limits count, in session-admission.ts; storing a new
 * session and starting its CLI, in session-creation.ts.
 */
import { randomUUID } from 'node:crypto'
import { rmdirSync } from 'node:fs'
import type { CliLauncher } from '../cli/cli-handle.js'
import type { ControlPolicy } from '../control/control-policy.js'
import type { PendingRequest } from '../control/pending-requests.js'
import { GatewayError } from '../errors.js'
import { type MetricsSink, noopMetrics } from '../metrics/sink.js'
import type { SessionOptions } from '../protocol/session-options.js'
import type { LeaseKeeper } from '../cluster/lease-keeper.js'
import { type Lease, type SessionPage, type SessionRecord, isFinal } from '../store/store.js'
import type { SessionOwnership, SessionRoute } from './session-deps.js'
import { Session, type SessionLimits } from './session.js'
import { CliPlan, type CliPlanOptions } from './cli-plan.js'
import { sessionViews } from './session-listing.js'
import type { SessionEvents } from './session-events.js'
import { LostSessions } from './lost-sessions.js'
import { leaseOwnership } from './lease-ownership.js'
import { type ClusterTenants, SessionAdmission } from './session-admission.js'
import { createReserved } from './session-creation.js'
import { pendingPrompts } from './pending-prompts.js'
import { storeCall } from './store-call.js'

/** How long a listing waits for another node to describe a session it runs (then: as stored). */
const LIST_OWNER_TIMEOUT_MS = 2000

/** The CLI plan's options (command, folders, environment, store, logger), and: */
export interface SessionManagerOptions extends CliPlanOptions {
  launch: CliLauncher
  maxSessions: number
  maxSessionsPerTenant: number
  /** Other nodes' CLIs per tenant (src/cluster/placement.ts): MAX_SESSIONS_PER_TENANT counts them too. Default: this node's only. */
  tenants?: ClusterTenants
  /** What clients may ask of the CLI: control requests, permission answers, granting session options. */
  policy: ControlPolicy
  limits: SessionLimits
  /** What sessions count for /metrics (default: nothing). */
  metrics?: MetricsSink
  /** Who is told of prompts, finished turns and ended sessions (webhooks; default: nobody). */
  events?: SessionEvents
  /** This node's session leases (NODE_ID, SESSION_LEASE_MS) in the shared store. */
  keeper: LeaseKeeper
  /**
   * True when a lease holder named `node` is known to be dead (a NODE_ID of
   * this host whose process is gone): its sessions are taken over at once
   * instead of after SESSION_LEASE_MS. Default: never.
   */
  isDeadNode?: (node: string) => boolean
  /**
   * Carry each CLI's conversation file through the store, so that a node whose
   * config dirs are on local disk can resume a session another node ran
   * (src/session/conversation-file.ts). Default false (one node).
   */
  carryConversations?: boolean
  /** Other gateway nodes, for clients here of sessions owned elsewhere (src/cluster/router.ts). */
  route?: SessionRoute
}

export class SessionManager {
  readonly #o: SessionManagerOptions
  readonly #sessions = new Map<string, Session>()
  readonly #loading = new Map<string, Promise<Session | null>>()
  /** The CLIs running and the creates reserved, against MAX_SESSIONS and MAX_SESSIONS_PER_TENANT. */
  readonly #admission: SessionAdmission
  #closing = false
  /** Given to every session; routes count what only they see (client frames) on it too. */
  readonly metrics: MetricsSink
  readonly #ownership: SessionOwnership
  /** Records as lost the sessions a gone node left running (at start, and by sweeping lapsed leases). */
  readonly #lost: LostSessions
  /** How each session's CLI is started (folders, command, environment, conversation carry). */
  readonly #plan: CliPlan

  constructor (options: SessionManagerOptions) {
    this.#o = options
    this.metrics = options.metrics ?? noopMetrics
    this.#admission = new SessionAdmission(options)
    this.#plan = new CliPlan(options)
    this.#ownership = leaseOwnership(options.keeper, options.store.leases, options.isDeadNode)
    this.#lost = new LostSessions({
      store: options.store,
      logger: options.logger,
      loaded: (id) => this.#sessions.get(id),
      loading: (id) => this.#loading.has(id),
      get: async (id, tenant) => await this.get(id, tenant),
      closing: () => this.#closing,
      listLive: async () => await this.#stored('list live sessions', () => this.#o.store.listLive())
    })
    options.store.onReconnect?.(() => { void this.#saveRecordsAgain() })
  }

  /** A session loaded on this node (owned here or followed), without touching the store. */
  loadedSession (id: string): Session | undefined {
    return this.#sessions.get(id)
  }

  /** How full this node is: CLIs running and creates reserved, against MAX_SESSIONS, and per tenant. */
  get load (): { running: number, max: number, tenants: Record<string, number> } {
    return this.#admission.load
  }

  /** Sessions whose CLI is running (what MAX_SESSIONS limits). */
  get runningCount (): number { return this.#admission.runningCount }
  get loaded (): Iterable<Session> { return this.#sessions.values() }
  get degraded (): boolean {
    for (const s of this.#sessions.values()) if (s.degraded) return true
    return false
  }

  async create (tenant: string, options: SessionOptions): Promise<Session> {
    if (this.#closing) throw new GatewayError('shutting_down')
    const granted = this.#o.policy.checkSessionOptions(options) // permission_mode bypass, allowed_tools ["Bash"]
    if (granted !== null) throw new GatewayError(granted.code, granted.message)
    // The tenant's sessions on other nodes as they are now, not as of the last report.
    await this.#o.tenants?.refresh()
    if (this.#closing) throw new GatewayError('shutting_down')
    const refused = this.#admission.admit(tenant)
    if (refused !== null) throw refused
    const id = randomUUID()
    const place = this.#plan.workspace(tenant, id, options.cwd) // validates cwd before anything is stored
    // The slot is held from here, across the store write: concurrent creates see it and
    // are refused above, before they store a record they could not start.
    this.#admission.reserve(id, tenant)
    try {
      const session = await createReserved(id, tenant, options, {
        store: this.#o.store,
        keeper: this.#o.keeper,
        logger: this.#o.logger,
        admission: this.#admission,
        loaded: (sid) => this.#sessions.get(sid),
        instantiate: (record, lease) => this.#instantiate(record, lease),
        unload: (sid) => { this.#sessions.delete(sid) }
      })
      // Counted on every node before the client hears of it: a create it makes next, anywhere, sees this one.
      await this.#o.tenants?.changed()
      return session
    } catch (err) {
      // Nothing was stored: no folder named after a session that does not exist is left either.
      if (err instanceof GatewayError && err.code === 'store_unavailable' && options.cwd === undefined && place.sandbox === undefined) {
        try { rmdirSync(place.cwd) } catch { /* not empty, or gone: leave it */ }
      }
      throw err
    } finally {
      this.#admission.unreserve(id)
    }
  }

  /** The session if it exists and belongs to `tenant`; otherwise null (callers answer 404). */
  async get (id: string, tenant: string): Promise<Session | null> {
    let session: Session | null | undefined = this.#sessions.get(id)
    if (session !== undefined && !session.owned && !session.following && session.tenant === tenant) {
      // Another node may have run it since it was loaded here: what it saved wins.
      const stale = session
      await this.#stored('read a session record', () => stale.refresh())
    }
    if (session === undefined) {
      let loading = this.#loading.get(id)
      if (loading === undefined) {
        loading = this.#load(id).finally(() => this.#loading.delete(id))
        this.#loading.set(id, loading)
      }
      session = await loading
    }
    return session !== null && session.tenant === tenant ? session : null
  }

  async list (tenant: string, limit: number, cursor?: string): Promise<SessionPage> {
    return await this.#stored('list sessions', () => this.#o.store.listSessions(tenant, { limit, cursor }))
  }

  /** A page of the tenant's sessions as clients see them: each as the node running its CLI has it (session-listing.ts). */
  async listViews (tenant: string, limit: number, cursor?: string): Promise<{ sessions: Array<Record<string, unknown>>, next_cursor: string | null }> {
    const page = await this.list(tenant, limit, cursor)
    const sessions = await sessionViews(page.sessions, { loaded: (id) => this.#sessions.get(id), route: this.#o.route, timeoutMs: LIST_OWNER_TIMEOUT_MS })
    return { sessions, next_cursor: page.next_cursor }
  }

  /**
   * Every pending CLI control request of the tenant's live sessions, asked of
   * the node running each CLI; oldest first (pending-prompts.ts). A session
   * whose node does not answer is left out and counted in `unreachable`.
   */
  async pendingPrompts (tenant: string): Promise<{ prompts: Array<{ sessionId: string, request: PendingRequest }>, unreachable: number }> {
    return await pendingPrompts(tenant, {
      list: async (of, limit, cursor) => await this.list(of, limit, cursor),
      get: async (id, of) => await this.get(id, of)
    })
  }

  /**
   * Marks sessions whose node is gone as stopped (`exit.reason: "lost"`):
   * those left running at start (lost-sessions.ts). Returns how many were marked.
   */
  async recover (): Promise<number> {
    return await this.#lost.recover()
  }

  /** Every `everyMs`, records as lost the live sessions whose lease lapsed (lost-sessions.ts). */
  startSweeping (everyMs: number): void {
    this.#lost.startSweeping(everyMs)
  }

  /**
   * Drains this node (gateway shutdown): no new sessions; turns running now
   * get until `graceMs` to finish (clients of other nodes still reach them);
   * then every CLI is stopped, every log flushed and every lease given up,
   * so the next message, on any node, resumes each session there.
   */
  async shutdown (graceMs: number): Promise<void> {
    this.#closing = true
    this.#lost.stop()
    const deadline = Date.now() + graceMs
    await Promise.all([...this.#sessions.values()].map(async (s) => {
      await s.drain(deadline)
      // The store gets at least a moment to take the last frames, whatever the turns took.
      await s.close(Math.max(1000, deadline - Date.now()))
    }))
    this.#o.keeper.close()
  }

  async #load (id: string): Promise<Session | null> {
    const record = await this.#stored('read a session record', () => this.#o.store.getSession(id))
    if (record === null) return null
    // app.ts wraps every store in SignedStore (MAC, schema, bypass gate). The policy runs again
    // here, as at create, so a record written under looser settings (bypass allowed, a wider
    // PERMISSION_BROAD_RULE_TOOLS) never starts a CLI the operator now forbids.
    const refused = this.#o.policy.checkSessionOptions(record.options as SessionOptions)
    if (refused !== null) {
      this.#o.logger.error({ session: id, reason: refused.message }, 'stored session options break the current policy; treated as absent')
      return null
    }
    const existing = this.#sessions.get(id)
    if (existing !== undefined) return existing
    // Events written after the record's last save are in the store: continue after them
    // (never below the record's own last_seq: the store may have lost or trimmed its log).
    const stored = await this.#stored('read a session log', () => this.#o.store.lastSeq(id))
    record.last_seq = Math.max(record.last_seq, stored ?? 0)
    const session = this.#instantiate(record, null)
    if (!isFinal(record.status)) await this.#stored('read a session log', () => session.statusFromLog())
    // Running by its record: on a live node (its lease is held), or on one that is gone. Then
    // taking the lease records it as ended (a status frame in its log, then the record), so
    // followers and resuming clients learn it, and gives the lease up again.
    if (!isFinal(session.status) && await session.own()) {
      this.#o.logger.warn({ session: id }, 'session left running by a gateway node that is gone: recorded as lost')
      await session.disown()
    }
    return session
  }

  /** A store call whose failure is answered 503 `store_unavailable` (logged here, without a stack). */
  async #stored<T> (what: string, call: () => Promise<T>): Promise<T> {
    return await storeCall(this.#o.logger, what, call)
  }

  /** The store answers again after a lost connection and may have lost every record (Redis without persistence). */
  async #saveRecordsAgain (): Promise<void> {
    const sessions = [...this.#sessions.values()].filter((s) => s.owned)
    if (sessions.length === 0) return
    this.#o.logger.info({ sessions: sessions.length }, 'event store reconnected: saving loaded session records again')
    await Promise.all(sessions.map(async (session) => {
      try {
        await session.persistRecord()
      } catch (err) {
        this.#o.logger.warn({ session: session.id, err: (err as Error).message }, 'saving a session record again failed')
      }
    }))
  }

  #instantiate (record: SessionRecord, lease: Lease | null): Session {
    const options = record.options as SessionOptions
    const session = new Session(record, {
      store: this.#o.store,
      launch: this.#o.launch,
      logger: this.#o.logger,
      limits: this.#o.limits,
      admit: () => this.#closing ? new GatewayError('shutting_down') : this.#admission.admit(record.tenant, record.id),
      onStatus: (s) => { this.#admission.statusChanged(s) },
      spawnSpec: (resume) => this.#plan.spawnSpec(record, options, resume),
      policy: this.#o.policy,
      policyScope: () => this.#plan.policyScope(record, options),
      metrics: this.metrics,
      ...(this.#o.events === undefined ? {} : { events: this.#o.events }),
      ownership: this.#ownership,
      ...(this.#o.route === undefined ? {} : { route: this.#o.route }),
      ...(this.#o.carryConversations === true ? { conversation: this.#plan.conversationCarry(record) } : {}),
      onFenced: (s) => {
        this.#admission.fenced(s)
        if (this.#sessions.get(s.id) === s) this.#sessions.delete(s.id)
      }
    }, lease)
    this.#sessions.set(record.id, session)
    return session
  }
}
