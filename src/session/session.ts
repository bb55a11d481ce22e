/**
 * One session: the coordinator of its CLI process, its event log, the
 * clients attached to it and its control plane.
 *
 * Everything the CLI prints (but keep_alives) is given the next seq, stored,
 * and then relayed to every client. At most one client holds the session:
 * only it may write to the CLI, and it alone receives CLI control requests
 * in full (others get a `request_pending` notice with the same seq).
 * Everything about control requests either way (pending, answers, policy,
 * timeouts, the CLI's initialize) is decided by the ControlPlane
 * (src/control/), whose effects are carried out here.
 *
 * No fastify or ws here: clients are `ClientPort`s, the CLI a `CliHandle`.
 */
import type { Logger } from 'pino'
import type { CliExit, CliHandle, CliSpawnSpec } from '../cli/cli-handle.js'
import { type ErrorCode, GatewayError, errorTable } from '../errors.js'
import type { AnswerInput, AnswerResult, ControlEffect } from '../control/control-effects.js'
import { controlErrorFrame } from '../control/control-error.js'
import { ControlPlane } from '../control/control-plane.js'
import type { PendingRequest } from '../control/pending-requests.js'
import { RecentIds } from '../control/recent-ids.js'
import { type MetricsSink, noopMetrics } from '../metrics/sink.js'
import type { ClientFrame, ControlRequestFrame } from '../protocol/client-frames.js'
import { FencedError, type Lease, type SessionRecord, type SessionStatus, type StoredEvent, isFinal } from '../store/store.js'
import { EventLog, type SeqRange } from './event-log.js'
import { Audience, type ClientPort, type Role } from './audience.js'
import { exitInfo, spawnFailure } from './exit-info.js'
import { IdleTimer } from './idle-timer.js'
import { type ResumeVerdict, replay, resumePoint } from './replay.js'
import { CliProblems } from './cli-problems.js'
import { type SessionEvents, type SessionRef, noSessionEvents } from './session-events.js'
import type { SessionDeps as BaseDeps } from './session-deps.js'
import { sessionView } from './session-view.js'
import { isRecord } from '../protocol/is-record.js'
import { errorFrame, gatewayFrame, pendingNotice, withSeq } from './frames.js'
import { askedUuid, isInit, observerFrameOf, statusOf } from './followed-frames.js'

export type { ClientPort, EndReason, Role } from './audience.js'
export type { AnswerInput, AnswerResult } from '../control/control-effects.js'
export type { SessionLimits } from './session-deps.js'

export type SessionDeps = BaseDeps<Session>

const UUID_MEMORY = 1000
/** Events read from the start of a log to find the CLI's init when a taken-over record does not say resumable. */
const INIT_SCAN = 100
/** What an `unavailable` hello suggests waiting before the same resume is tried again. */
const RETRY_AFTER_MS = 2000
/**
 * How often a frame that needs the CLI tries the lease again after it was
 * refused and then nobody held it (its holder released it in between): each
 * try follows a store round trip that showed the lease move, so a few suffice.
 */
const OWN_RETRIES = 3

/** The hello's fields that detail its resume verdict. */
function verdictFields (resume: ResumeVerdict, missing: SeqRange[]): Record<string, unknown> {
  if (resume === 'unavailable') return { retry_after_ms: RETRY_AFTER_MS }
  if (resume !== 'gap') return {}
  return { missing_from: (missing[0] as SeqRange)[0], missing_to: (missing[missing.length - 1] as SeqRange)[1], missing }
}

export class Session {
  readonly id: string
  readonly #deps: SessionDeps
  readonly #log: Logger
  readonly #record: SessionRecord
  readonly #events: EventLog
  readonly #control: ControlPlane<ClientPort>
  readonly #audience: Audience
  readonly #metrics: MetricsSink
  readonly #seenUuids = new RecentIds(UUID_MEMORY)
  readonly #problems = new CliProblems()
  /** Who hears of prompts, turns and ends (webhooks); called only where the CLI runs, so once per event. */
  readonly #notify: SessionEvents
  readonly #ref: SessionRef
  #cli: CliHandle | null = null
  #stopping = false
  #turnsPending = 0
  /** A `disown` in progress (close waits for its release to reach the store before the store closes). */
  #disowning: Promise<void> | null = null
  /** Settles once the running CLI's exit has been recorded (its status frame and record queued). */
  #exitHandled: Promise<void> = Promise.resolve()
  #exitDone: () => void = () => {}
  /** Woken whenever no turn is running any more (drain). */
  #turnWaiters: Array<() => void> = []
  readonly #idle: IdleTimer
  #recordWrite: Promise<void> = Promise.resolve()
  /** This node's lease on the session: while set, it may run the CLI and write the log and record. */
  #lease: Lease | null
  /** An acquisition in flight (`own`), shared by concurrent callers. */
  #owning: Promise<boolean> | null = null
  /** Client frames that wait for `own` to settle, in arrival order. */
  #waiting: Array<{ port: ClientPort, frame: ClientFrame }> | null = null
  /** How often each frame was tried here again after its owner turned out to be nobody (`#toOwner`). */
  readonly #ownRetries = new WeakMap<ClientFrame, number>()
  /** Set once fenced: another node owns the session; this object is dropped. */
  #gone = false
  /** A conversation save running, and whether another is wanted after it (turns end faster than saves). */
  #conversationSave: Promise<void> | null = null
  #conversationAgain = false
  /** Stops following the session's log in the store (while another node owns it and clients are attached here). */
  #unfollow: (() => void) | null = null

  /** `lease`: this node's lease when it owns the session (created or taken here), else null. */
  constructor (record: SessionRecord, deps: SessionDeps, lease: Lease | null = null) {
    this.#lease = lease
    this.id = record.id
    this.#record = record
    this.#deps = deps
    this.#log = deps.logger.child({ session: record.id })
    this.#metrics = deps.metrics ?? noopMetrics
    this.#notify = deps.events ?? noSessionEvents
    this.#ref = { sessionId: record.id, tenant: record.tenant }
    this.#audience = new Audience(this.#metrics)
    this.#idle = new IdleTimer(deps.limits.idleTimeoutMs, () => { void this.stop('idle') })
    this.#events = new EventLog({
      sessionId: record.id,
      store: deps.store,
      lastSeq: record.last_seq,
      maxUnsaved: deps.limits.storeQueueMax,
      lostRanges: record.lost_ranges,
      logger: deps.logger,
      onCommit: (events) => this.#audience.broadcast(events),
      onDegraded: (degraded, lost) => {
        this.#metrics.storeDegradedChanged()
        const totals = lost === null ? {} : { missing_from: lost.from, missing_to: lost.to, dropped: lost.dropped }
        this.#audience.sendAll(gatewayFrame('store', { state: degraded ? 'degraded' : 'ok', ...totals }))
        // The store may have lost the record meanwhile (e.g. Redis restarted without persistence),
        // and it must learn the ranges dropped: save it again.
        if (!degraded) this.#persist()
      },
      onOverflow: (episode) => this.#audience.sendAll(errorFrame('store_overflow', errorTable.store_overflow.message, {
        missing_from: episode.from, missing_to: episode.to, dropped: episode.dropped
      })),
      lease: () => this.#lease,
      onFenced: () => this.fence(),
      reclaim: async (lease) => await deps.ownership.reclaim(lease)
    })
    this.#control = new ControlPlane<ClientPort>({
      ...deps.limits,
      policy: deps.policy,
      policyScope: deps.policyScope,
      initialize: record.initialize,
      cliState: () => this.#cli === null ? 'stopped' : this.#stopping ? 'stopping' : 'running',
      startCli: (opening) => this.start(opening),
      effects: (effect) => this.#apply(effect),
      logger: this.#log,
      metrics: this.#metrics
    })
  }

  get tenant (): string { return this.#record.tenant }
  get status (): SessionStatus { return this.#record.status }
  get running (): boolean { return this.#cli !== null }
  get degraded (): boolean { return this.#events.degraded }
  get clientCount (): number { return this.#audience.size }
  /** Attached clients by their role now (the holder controls); read by the metrics. */
  get clientRoles (): { controller: number, observer: number } { return this.#audience.roles }
  get pendingRequests (): PendingRequest[] { return this.#control.list() }
  get events (): EventLog { return this.#events }
  /** True while this node holds the session's lease. */
  get owned (): boolean { return this.#lease !== null }
  /** True while this node follows the session's log as another node appends it. */
  get following (): boolean { return this.#unfollow !== null }

  /**
   * Brings a session this node does not own up to date with the store: its
   * record as its owner last saved it, and the events appended since (to
   * attached clients, as they would have had them live).
   */
  async refresh (): Promise<void> {
    if (this.#lease !== null || this.#gone) return
    const fresh = await this.#deps.store.getSession(this.id)
    if (fresh !== null) this.#adopt(fresh)
    await this.statusFromLog()
    await this.#events.catchUp((e) => this.#learn(e))
  }

  /**
   * The owner saves the record after the frame that changed the status, so
   * a record read just after a stop may still say `stopping`: the log's last
   * frame, when it is a status frame, says where the session really is.
   */
  async statusFromLog (): Promise<void> {
    const last = this.#events.lastSeq
    if (this.#lease !== null || last < 1) return
    const [event] = await this.#deps.store.read(this.id, last - 1, 1)
    if (event !== undefined && statusOf(event) !== null) this.#learn(event)
  }

  /** Follows the log from the store while another node owns the session and clients are attached here. */
  #follow (): void {
    if (this.#lease !== null || this.#gone || this.#unfollow !== null) return
    this.#unfollow = this.#deps.store.feed.follow(this.id, this.#events.committedSeq,
      (events) => { this.#ingest(events) },
      (err) => this.#log.warn({ err: err.message }, 'following the session in the store failed'))
  }

  #stopFollowing (): void {
    this.#unfollow?.()
    this.#unfollow = null
  }

  /**
   * What a frame another node appended tells this one about the session:
   * status changes, and that the CLI stored the conversation (its `init`; the
   * owner's record may lag, or never be saved if it died). Returns the
   * frame's observer rendering.
   */
  #learn (e: StoredEvent): string | undefined {
    const status = statusOf(e)
    if (status !== null) {
      if (typeof status.status === 'string') this.#record.status = status.status as SessionStatus
      if (isRecord(status.exit)) this.#record.exit = status.exit as unknown as SessionRecord['exit']
    }
    if (isInit(e)) this.#record.resumable = true
    // A message the last owner wrote to the CLI: its copy a client resends (or that the owner
    // never confirmed before it died) reaches the CLI no second time when handled here.
    const uuid = askedUuid(e)
    if (uuid !== null) this.#seenUuids.seen(uuid)
    return observerFrameOf(e)
  }

  /** Makes a client here a client of the node that runs the CLI, if another node does. */
  async #routeClient (port: ClientPort, role: Role): Promise<void> {
    const route = this.#deps.route
    if (route === undefined) return
    let owner: string | null
    try {
      owner = await route.owner(this.id)
    } catch (err) {
      this.#log.warn({ err: (err as Error).message }, 'could not look up the session\'s owner')
      return
    }
    if (owner === null || owner === route.node || !this.#audience.has(port) || this.#lease !== null) return
    route.attach(owner, this.id, port, role)
  }

  /** Events another node appended: relayed to clients here as if appended here (status frames update the record as seen here). */
  #ingest (events: StoredEvent[]): void {
    if (this.#lease !== null) return // owned here since: the log is written here
    this.#events.ingest(events.map((e) => ({ ...e, observerFrame: this.#learn(e) })))
    // The CLI stopped on its node: clients here are nobody's remote clients any more, and
    // one that asked for control may start it here next.
    if (isFinal(this.#record.status)) {
      const unconfirmed = this.#unroute()
      this.#promoteHolder()
      this.#handleAgain(unconfirmed)
    }
  }

  /** Stops routing every client here; returns what each had sent that its owner did not confirm. */
  #unroute (): Array<{ port: ClientPort, frames: ClientFrame[] }> {
    const route = this.#deps.route
    if (route === undefined) return []
    return this.#audience.ports.map((port) => ({ port, frames: route.unroute(port) })).filter((u) => u.frames.length > 0)
  }

  /** Frames routed to an owner that stopped before confirming them: handled here, in order. */
  #handleAgain (unconfirmed: Array<{ port: ClientPort, frames: ClientFrame[] }>): void {
    for (const { port, frames } of unconfirmed) for (const frame of frames) if (this.#audience.has(port)) this.handleFrame(port, frame)
  }

  /** This node stopped owning the session: clients of other nodes attach wherever it runs next. */
  #dropRemotes (): void {
    for (const port of this.#audience.remotes) this.#audience.remove(port)
    this.#deps.route?.dropRemote(this.id)
  }

  #promoteHolder (): void {
    const next = this.#audience.promote()
    if (next === null) return
    this.#audience.announceHolder()
    if (next.backlog === null) this.#control.holderChanged(next.port, this.#events.committedSeq)
  }

  /**
   * Takes the session's lease for this node, if no other live node holds
   * it. Before it says yes, the session is brought up to date with the store
   * (record, and events another node appended meanwhile, which attached
   * clients receive), and an end the previous owner never recorded (it died)
   * is recorded as `lost`. Concurrent calls share one acquisition.
   */
  async own (): Promise<boolean> {
    if (this.#lease !== null) return true
    if (this.#gone) return false
    this.#owning ??= this.#acquire().then(
      (owned) => { this.#owning = null; this.#settleWaiting(owned); return owned },
      (err: unknown) => { this.#owning = null; this.#settleWaiting(false); throw err })
    return await this.#owning
  }

  /**
   * Frames held while the lease was being taken, in arrival order: handled
   * here when this node got it, else sent to the node that holds it.
   */
  #settleWaiting (owned: boolean): void {
    const waiting = this.#waiting
    this.#waiting = null
    for (const { port, frame } of waiting ?? []) {
      if (owned || !startsCli(frame)) this.handleFrame(port, frame)
      else void this.#toOwner(port, frame)
    }
  }

  /**
   * A frame that needs the CLI, which another node runs: the client becomes
   * a client of that node's session (src/cluster/router.ts) and the frame
   * goes there. With nobody holding the lease any more, the node that held
   * it released it after it refused this one (typically the node that just
   * recorded the session `lost`): the frame is handled here again, so the
   * CLI resumes here (or it goes to whoever took the lease meanwhile). Without
   * other nodes, or after OWN_RETRIES such turns, it is refused (`session_elsewhere`).
   */
  async #toOwner (port: ClientPort, frame: ClientFrame): Promise<void> {
    const route = this.#deps.route
    const att = this.#audience.attachment(port)
    let owner: string | null = null
    try {
      owner = route === undefined || att === undefined ? null : await route.owner(this.id)
    } catch (err) {
      this.#log.warn({ err: (err as Error).message }, 'could not look up the session\'s owner')
    }
    if (route === undefined || att === undefined || !this.#audience.has(port)) {
      this.#refuseElsewhere(port, frame)
      return
    }
    if (owner === null || owner === route.node) {
      const tries = this.#ownRetries.get(frame) ?? 0
      if (tries >= OWN_RETRIES || this.#gone) {
        if (!this.#gone) this.#log.warn({ tries }, 'the session lease was refused again and again while no other node held it; frame refused')
        this.#refuseElsewhere(port, frame)
        return
      }
      this.#ownRetries.set(frame, tries + 1)
      // As if it had just arrived: behind any frame that came meanwhile, and along the same
      // route if one of those was sent to a node that took the lease in between.
      this.handleFrame(port, frame)
      return
    }
    route.attach(owner, this.id, port, att.requested)
    route.frame(port, frame)
  }

  /**
   * On the owner: a client of another node attaches (it got its hello and
   * replay there, and its node relays recorded frames). It takes part in the
   * holder rules like any client here; repeated attaches are heartbeats.
   */
  attachRemote (port: ClientPort, role: Role): void {
    if (this.#audience.attachment(port) !== undefined) return
    const att = this.#audience.add(port, role)
    att.backlog = null
    att.greeted = true
    this.#idle.disarm()
    if (role !== 'controller') return
    this.#audience.hold(att)
    this.#audience.announceHolder()
    this.#control.holderChanged(port, this.#events.committedSeq)
  }

  /** On a client's node: its owner says whether it holds the session now (what recorded control requests it is shown in full). */
  remoteHolder (port: ClientPort, holds: boolean): void {
    const att = this.#audience.attachment(port)
    if (att === undefined) return
    if (holds) this.#audience.hold(att)
    else this.#audience.unhold(att)
  }

  /**
   * On a client's node: the node its frames went to does not own the
   * session (any more), or did not confirm them; `frames` are handled anew,
   * in order, once the session is brought up to date.
   */
  ownerMoved (port: ClientPort, frames: ClientFrame[]): void {
    void this.refresh().catch(() => {}).then(() => {
      for (const frame of frames) if (this.#audience.has(port)) this.handleFrame(port, frame)
    })
  }

  async #acquire (): Promise<boolean> {
    const lease = await this.#deps.ownership.acquire(this.id, () => this.fence())
    if (lease === null) return false
    try {
      const fresh = await this.#deps.store.getSession(this.id)
      if (fresh !== null) this.#adopt(fresh)
      await this.#events.catchUp((e) => this.#learn(e))
      // A record saved late (or never: its node died) may not say yet that the CLI stored the
      // conversation; the log's first turn does. Trimmed logs hold a long past: resumable too.
      if (!this.#record.resumable && this.#events.lastSeq > 0) {
        const head = await this.#deps.store.read(this.id, 0, INIT_SCAN)
        if (head.some(isInit) || (head[0]?.seq ?? 1) > 1) this.#record.resumable = true
      }
      // The CLI resumes from its own file: bring the copy another node saved, if this one's is older.
      if (this.#record.resumable) await this.#deps.conversation?.restore()
    } catch (err) {
      this.#deps.ownership.forget(lease)
      void this.#deps.ownership.release(lease).catch(() => {})
      throw err
    }
    this.#events.unfence()
    this.#lease = lease
    this.#stopFollowing()
    // Owned here now: no client here is another node's any more (frames the old owner did
    // not confirm are handled here, after the lease is taken: settleWaiting runs them).
    for (const { port, frames } of this.#unroute()) {
      this.#waiting ??= []
      for (const frame of frames) this.#waiting.push({ port, frame })
    }
    if (!isFinal(this.#record.status) && this.#cli === null) await this.markLost()
    this.#promoteHolder()
    return true
  }

  /** Takes what another owner saved since this object was loaded. */
  #adopt (fresh: SessionRecord): void {
    const r = this.#record
    r.status = fresh.status
    r.updated_at = fresh.updated_at
    // Never back: a conversation the log shows stored stays resumable, whatever a lagging record says.
    r.resumable = r.resumable || fresh.resumable
    r.exit = fresh.exit
    r.metadata = fresh.metadata
    if (fresh.initialize !== undefined) r.initialize = fresh.initialize
    if (fresh.lost_ranges !== undefined) r.lost_ranges = fresh.lost_ranges
    r.last_seq = Math.max(r.last_seq, fresh.last_seq)
  }

  /**
   * Gives the lease up once the CLI has stopped and everything is stored,
   * so that any node may start the session next. Kept if a CLI started again meanwhile.
   */
  async disown (): Promise<void> {
    const running = this.#giveUp()
    this.#disowning = running
    try {
      await running
    } finally {
      if (this.#disowning === running) this.#disowning = null
    }
  }

  async #giveUp (): Promise<void> {
    await this.#settleWrites(5000)
    await this.#saveConversation()
    const lease = this.#lease
    if (lease === null || this.#cli !== null || this.#owning !== null || this.#waiting !== null) return
    this.#lease = null
    this.#dropRemotes()
    // Another node may run it next: clients here follow it through the store.
    if (this.#audience.size > 0) this.#follow()
    try {
      await this.#deps.ownership.release(lease)
    } catch (err) {
      // It lapses by itself within SESSION_LEASE_MS.
      this.#log.warn({ err: (err as Error).message }, 'could not release the session lease')
    }
  }

  /**
   * The store refused a write, or a renewal found the lease taken: another
   * node owns the session now. The CLI is ended (its output can no longer be
   * stored), clients are told to reconnect, and the manager forgets this object.
   */
  fence (): void {
    if (this.#gone) return
    this.#gone = true
    const lease = this.#lease
    this.#lease = null
    if (lease !== null) this.#deps.ownership.forget(lease)
    this.#log.warn({ epoch: lease?.epoch }, 'session fenced: another node owns it now; its CLI here is stopped')
    this.#idle.disarm()
    const cli = this.#cli
    this.#stopping = true
    if (cli !== null) void cli.stop()
    this.#stopFollowing()
    this.#dropRemotes()
    this.#audience.endAll('session_moved', 'the session moved to another gateway node: reconnect with ?after=<last seq>')
    for (const { port, frame } of this.#waiting ?? []) this.#refuseElsewhere(port, frame)
    this.#waiting = null
    this.#deps.onFenced(this)
  }

  /** What REST callers see. */
  snapshot (): Record<string, unknown> {
    return sessionView(this.#record, {
      last_seq: this.#events.lastSeq,
      clients: this.#audience.size,
      holder: this.#audience.holder?.port.id ?? null,
      pid: this.#cli?.pid ?? null,
      turn_running: this.#turnsPending > 0,
      pending_requests: this.#control.pendingCount,
      store: this.#events.degraded ? 'degraded' : 'ok'
    })
  }

  /** Starts the CLI (`--resume` once the conversation is stored); `opening` is the holder's initialize that starts it. */
  start (opening?: ControlRequestFrame): GatewayError | null {
    if (this.#cli !== null) return null
    if (this.#lease === null) return new GatewayError('session_elsewhere')
    const refused = this.#deps.admit()
    if (refused !== null) return refused
    this.#stopping = false
    this.#turnsPending = 0
    let cli: CliHandle
    try {
      const spec: CliSpawnSpec = this.#deps.spawnSpec(this.#record.resumable)
      // spawn itself throws for some failures (E2BIG: arguments or environment too large).
      cli = this.#deps.launch(spec, {
        onLine: (line) => { if (this.#cli === cli) this.#onLine(line) },
        onOversize: (bytes) => this.#rejectLine('too_large', bytes, ''),
        onExit: (exit) => { if (this.#cli === cli) this.#onExit(exit) }
      })
    } catch (err) {
      return this.#startFailed(err)
    }
    this.#cli = cli
    this.#exitHandled = new Promise((resolve) => { this.#exitDone = resolve })
    this.#setStatus('starting')
    this.#control.cliStarted(opening)
    this.#armIdle()
    return null
  }

  /** Ends the CLI: stdin closed, SIGTERM, SIGKILL. History and record stay. */
  async stop (why: string): Promise<void> {
    this.#idle.disarm()
    const cli = this.#cli
    if (cli === null) return
    this.#log.info({ why }, 'stopping session')
    this.#stopping = true
    this.#setStatus('stopping')
    await cli.stop()
  }

  /**
   * Waits (until `deadline`, ms since the epoch) for the turns running now,
   * and those that start meanwhile, to finish: a node that drains lets its
   * turns end before it stops their CLIs (SHUTDOWN_GRACE_MS).
   */
  async drain (deadline: number): Promise<void> {
    while (this.#cli !== null && this.#turnsPending > 0 && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, deadline - Date.now())
        this.#turnWaiters.push(() => { clearTimeout(timer); resolve() })
      })
    }
  }

  /** Saves the CLI's conversation file to the store (coalesced: one save runs, one more follows if asked meanwhile). */
  async #saveConversation (): Promise<void> {
    const carry = this.#deps.conversation
    if (carry === undefined) return
    if (this.#conversationSave !== null) {
      this.#conversationAgain = true
      await this.#conversationSave
      return
    }
    this.#conversationSave = (async () => {
      do {
        this.#conversationAgain = false
        const lease = this.#lease
        if (lease === null) return
        try {
          await carry.save(lease)
        } catch (err) {
          if (err instanceof FencedError) { this.fence(); return }
          this.#log.warn({ err: (err as Error).message }, 'could not save the conversation to the store')
        }
      } while (this.#conversationAgain)
    })().finally(() => { this.#conversationSave = null })
    await this.#conversationSave
  }

  #wakeTurnWaiters (): void {
    const waiters = this.#turnWaiters
    this.#turnWaiters = []
    for (const wake of waiters) wake()
  }

  /** Stops the CLI and waits until every event is stored (gateway shutdown). */
  async close (deadlineMs: number): Promise<void> {
    this.#stopFollowing()
    await this.stop('shutdown')
    // The CLI's end is recorded by its exit handler, which may run after stop() returned:
    // released before that, the lease would be gone when the 'stopped' record is written.
    await this.#exitHandled
    await this.#settleWrites(deadlineMs)
    await this.#saveConversation()
    await this.#disowning
    // Any node may take the session at once (the next message resumes it there).
    const lease = this.#lease
    if (lease !== null && !this.#gone) {
      this.#lease = null
      try { await this.#deps.ownership.release(lease) } catch { /* it lapses by itself */ }
    }
    this.#events.close()
  }

  /**
   * For a session whose record says a CLI runs although none does (its
   * gateway process crashed): records it as stopped, `exit.reason: "lost"`,
   * with a status frame in its own log, so history readers, event streams
   * and resuming clients learn it like any other end. Resolves once the
   * frame and the record are stored (or the store did not answer).
   */
  async markLost (): Promise<void> {
    if (this.#lease === null || this.#cli !== null || this.#record.status === 'stopped' || this.#record.status === 'exited') return
    const info = { code: null, signal: null, stderr_tail: [], reason: 'lost' as const, at: new Date().toISOString() }
    this.#record.exit = info
    this.#setStatus('stopped', { exit: info })
    await this.#events.flush(1000)
    await this.#recordWrite
  }

  /**
   * Saves the record again as it is. For a store that answers again after
   * losing its data (Redis restarted without persistence): the session must
   * not wait for its next status change to be listed and loadable again.
   */
  async persistRecord (): Promise<void> {
    this.#persist()
    await this.#recordWrite
  }

  // ---- clients ----

  /**
   * Attaches a client. With `after`, it first gets every frame after that seq
   * (from the store), then live ones: no gap, no duplicate. `hello` comes first;
   * `onHello` runs right after it is sent, before the replay.
   */
  async attach (port: ClientPort, options: { role: Role, after?: number | undefined, onHello?: () => void }): Promise<void> {
    const att = this.#audience.add(port, options.role)
    this.#idle.disarm()
    this.#follow()
    const upTo = this.#events.committedSeq
    const wait = { waitMs: this.#deps.limits.resumeWaitMs, gone: () => !this.#audience.has(port) }
    const { from, resume, oldest, missing } = await resumePoint(this.#events, options.after, upTo, wait)
    if (!this.#audience.has(port)) return
    // A client about to be ended (no replay possible yet) never takes the session from its holder;
    // nor does one here while another node runs the CLI (its frames could not reach it).
    const elsewhere = this.#lease === null && !isFinal(this.#record.status)
    if (options.role === 'controller' && resume !== 'unavailable' && !elsewhere) this.#audience.hold(att)
    const holder = this.#audience.holder
    this.#audience.send(port, gatewayFrame('hello', {
      session_id: this.id,
      client_id: port.id,
      role: holder === att ? 'controller' : 'observer',
      holder: holder?.port.id ?? null,
      status: this.#record.status,
      last_seq: upTo,
      resume,
      oldest_seq: oldest,
      ...verdictFields(resume, missing),
      store: this.#events.degraded ? 'degraded' : 'ok',
      pending_requests: this.#control.list().map((p) => p.requestId)
    }))
    if (resume === 'unavailable') {
      att.backlog = null
      port.end?.('store_unavailable', `event store unavailable: reconnect with ?after=${options.after ?? 0} in ${RETRY_AFTER_MS} ms`)
      return
    }
    att.greeted = true
    if (options.role === 'controller' && !elsewhere) this.#audience.announceHolder(att)
    // Running on another node: this client joins that node's session (its frames go there, the holder rules are its).
    if (elsewhere) void this.#routeClient(port, options.role)
    options.onHello?.()
    const noticedUpTo = await replay(att, from, upTo, { events: this.#events, audience: this.#audience, log: this.#log, wait })
    if (noticedUpTo !== null && this.#audience.holder === att) this.#control.holderChanged(att.port, noticedUpTo)
  }

  detach (port: ClientPort): void {
    this.#deps.route?.detach(port)
    const next = this.#audience.remove(port)
    if (this.#audience.size === 0) this.#stopFollowing()
    if (next !== undefined) {
      this.#audience.announceHolder()
      // Only what it was sent as notices: later frames reach it live as the holder's. A client
      // still being replayed to gets its pending requests when its attach ends.
      if (next !== null && next.backlog === null) this.#control.holderChanged(next.port, this.#events.committedSeq)
    }
    this.#armIdle()
  }

  /**
   * Handles a validated client frame. Problems go back to that client: a
   * refused control_request as a control_response error with its request_id,
   * anything else as an error frame.
   */
  handleFrame (port: ClientPort, frame: ClientFrame): void {
    if (frame.type === 'keep_alive') return
    if (this.#waiting !== null) { this.#waiting.push({ port, frame }); return }
    // While the lease is being taken, frames wait for it (own() hands them on, in order).
    if (this.#owning !== null) { this.#waiting = [{ port, frame }]; return }
    if (this.#lease === null && this.#cli === null) {
      // A client routed to the node that runs the CLI: everything it sends goes there.
      if (this.#deps.route?.frame(port, frame) === true) return
      if (startsCli(frame)) {
        // The CLI may start only on the node that holds the lease: take it first, holding
        // this and every later frame (any client's) in order until that is settled.
        this.#waiting = [{ port, frame }]
        this.own().catch((err: unknown) => {
          this.#log.warn({ err: (err as Error).message }, 'could not take the session lease')
        })
        return
      }
    }
    if (frame.type === 'control_request') { this.#control.clientRequest(port, frame, this.#audience.isHolder(port)); return }
    const fail = (code: ErrorCode, message?: string, extra: Record<string, unknown> = {}): void =>
      this.#audience.send(port, errorFrame(code, message ?? errorTable[code].message, extra))
    if (!this.#audience.isHolder(port)) {
      const requestId = frame.type === 'control_response' ? frame.response.request_id : frame.type === 'control_cancel_request' ? frame.request_id : undefined
      fail('not_holder', undefined, requestId === undefined ? {} : { request_id: requestId })
      return
    }
    if (frame.type === 'other_type' || frame.type === 'control_cancel_request') {
      const refused = frame.type === 'other_type' ? this.#control.checkOtherType(frame.value) : null
      if (refused !== null) { fail(refused.code, refused.message); return }
      // The CLI decides what they mean (it ignores types it does not know): as sent, once it runs.
      if (this.#cli === null || this.#stopping) return
      this.#control.toCli(frame.type === 'other_type' ? frame.value : frame)
      return
    }
    if (frame.type === 'user') {
      // A message resent after a reconnect (same uuid) reaches the CLI once.
      if (frame.uuid !== undefined && this.#seenUuids.seen(frame.uuid)) return
      if (this.#cli === null) {
        const refused = this.start()
        if (refused !== null) { fail(refused.code, refused.message); return }
      } else if (this.#stopping) {
        fail('session_not_running', 'The session is stopping; send again once it has stopped')
        return
      }
      this.#idle.disarm()
      this.#turnsPending++
      const parent = frame.parent_tool_use_id ?? null
      // History holds the conversation: what was asked, by whom, before the CLI's answer to it.
      this.#events.push((s) => gatewayFrame('user_message', {
        client_id: port.id,
        ...(frame.uuid === undefined ? {} : { uuid: frame.uuid }),
        message: frame.message,
        parent_tool_use_id: parent
      }, s))
      this.#control.toCli({ ...frame, session_id: this.id, parent_tool_use_id: parent })
      return
    }
    const result = this.answer(frame.response.request_id, frame.response, port.id)
    if (!result.ok) fail(result.code, result.message, { request_id: frame.response.request_id })
  }

  /** A frame that needs the CLI while another node runs it (or the lease could not be taken). */
  #refuseElsewhere (port: ClientPort, frame: ClientFrame): void {
    const { message } = errorTable.session_elsewhere
    this.#audience.send(port, frame.type === 'control_request'
      ? controlErrorFrame(frame.request_id, 'session_elsewhere', message)
      : errorFrame('session_elsewhere', message))
  }

  /** On the owner: what an HTTP request made on another node asks (src/cluster/router.ts). */
  async call (op: 'answer' | 'stop' | 'pending' | 'snapshot', args: unknown[]): Promise<unknown> {
    switch (op) {
      case 'snapshot': return this.snapshot()
      case 'answer': return this.answer(String(args[0]), args[1] as AnswerInput, String(args[2]))
      case 'stop': await this.stop(String(args[0])); return null
      case 'pending': return this.pendingRequests
    }
  }

  /** `answer`, done by whichever node runs the CLI (HTTP answers reach any node). */
  async answerAnywhere (requestId: string, input: AnswerInput, by: string): Promise<AnswerResult> {
    return await this.#onOwner('answer', [requestId, input, by], () => this.answer(requestId, input, by)) as AnswerResult
  }

  /** `stop`, done by whichever node runs the CLI. */
  async stopAnywhere (why: string): Promise<void> {
    await this.#onOwner('stop', [why], async () => { await this.stop(why) })
  }

  /**
   * `snapshot` as the node running the CLI has it (its pid, holder, pending
   * prompts, turn); this node's own when it runs it or nobody does. The
   * owner's count of clients includes clients of other nodes.
   */
  async snapshotAnywhere (): Promise<Record<string, unknown>> {
    if (this.#lease !== null || this.#deps.route === undefined || isFinal(this.#record.status)) return this.snapshot()
    return await this.#onOwner('snapshot', [], () => this.snapshot()) as Record<string, unknown>
  }

  /** The pending CLI control requests, as the node running the CLI knows them. */
  async pendingAnywhere (): Promise<PendingRequest[]> {
    return await this.#onOwner('pending', [], () => this.pendingRequests) as PendingRequest[]
  }

  /**
   * Runs `local` when this node owns the session or nobody else does; else
   * asks the owner. An owner that turns out not to own it (it just stopped)
   * means the session is brought up to date and `local` runs here.
   */
  async #onOwner (op: 'answer' | 'stop' | 'pending' | 'snapshot', args: unknown[], local: () => unknown): Promise<unknown> {
    const route = this.#deps.route
    if (this.#lease !== null || route === undefined) return await local()
    const owner = await route.owner(this.id)
    if (owner === null || owner === route.node) return await local()
    try {
      return await route.call(owner, this.id, op, args)
    } catch (err) {
      if (!(err instanceof Error) || err.name !== 'NotOwner') {
        this.#log.warn({ owner, op, err: (err as Error).message }, 'the node running the session did not answer')
        throw new GatewayError('node_unavailable')
      }
      await this.refresh()
      return await local()
    }
  }

  /** Answers a pending CLI control request (WebSocket holder or HTTP). First valid answer wins. */
  answer (requestId: string, input: AnswerInput, by: string): AnswerResult {
    return this.#control.answer(requestId, input, by)
  }

  // ---- CLI ----

  #onLine (line: string): void {
    this.#metrics.cliLine()
    let parsed: unknown
    try {
      parsed = JSON.parse(line)
    } catch {
      this.#rejectLine('invalid_json', Buffer.byteLength(line), line)
      return
    }
    if (!isRecord(parsed)) { this.#rejectLine('not_an_object', Buffer.byteLength(line), line); return }
    const msg = parsed
    // Live only, as printed: it says the CLI is alive now (the SDK times its `startup_mark` on arrival); replayed it would lie.
    if (msg.type === 'keep_alive') { this.#audience.sendAll(line); return }
    if (this.#record.status === 'starting') this.#setStatus('running')
    const problem = this.#problems.observe(msg)
    switch (msg.type) {
      case 'control_request': {
        const requestId = String(msg.request_id)
        const request = isRecord(msg.request) ? msg.request : {}
        let frame = ''
        const seq = this.#events.push((s) => (frame = withSeq(line, msg, s)), (s) => pendingNotice(s, requestId, request))
        this.#control.cliRequest(requestId, request, seq, frame)
        this.#idle.disarm()
        if (request.subtype === 'can_use_tool') {
          this.#notify.permissionRequested(this.#ref, {
            requestId,
            toolName: String(request.tool_name),
            input: isRecord(request.input) ? request.input : {},
            seq
          })
        }
        return
      }
      case 'control_cancel_request':
        this.#events.push((s) => withSeq(line, msg, s))
        this.#control.cliCancel(String(msg.request_id))
        this.#armIdle()
        return
      case 'control_response':
        this.#events.push((s) => withSeq(line, msg, s))
        this.#control.cliResponse(isRecord(msg.response) ? String(msg.response.request_id) : '')
        return
      case 'system':
        if (msg.subtype === 'init' && !this.#record.resumable) {
          this.#record.resumable = true
          this.#persist()
        }
        break
      case 'result': {
        this.#turnsPending = Math.max(0, this.#turnsPending - 1)
        if (this.#turnsPending === 0) this.#wakeTurnWaiters()
        void this.#saveConversation()
        const seq = this.#events.push((s) => withSeq(line, msg, s))
        this.#armIdle()
        this.#notify.turnFinished(this.#ref, {
          subtype: String(msg.subtype),
          isError: msg.is_error === true,
          durationMs: typeof msg.duration_ms === 'number' ? msg.duration_ms : null,
          totalCostUsd: typeof msg.total_cost_usd === 'number' ? msg.total_cost_usd : null,
          result: typeof msg.result === 'string' ? msg.result : null,
          seq
        })
        return
      }
    }
    this.#events.push((s) => withSeq(line, msg, s))
    // After the line that shows it, so history reads in the order things happened.
    if (problem !== null) this.#events.push((s) => gatewayFrame('cli_problem', { ...problem }, s))
  }

  #rejectLine (reason: string, bytes: number, line: string): void {
    this.#log.warn({ reason, bytes, preview: line.slice(0, 200) }, 'CLI printed a line that cannot be relayed')
    this.#events.push((s) => gatewayFrame('cli_output_rejected', { reason, bytes, preview: line.slice(0, 200) }, s))
  }

  /**
   * A start that failed before any process ran: the session says so (exited,
   * `exit.reason: spawn_failed`), in memory and in the store, instead of
   * staying "starting" with no CLI behind it.
   */
  #startFailed (err: unknown): GatewayError {
    this.#log.error({ err }, 'CLI could not be started')
    const { info, error } = spawnFailure(err)
    this.#record.exit = info
    this.#setStatus('exited', { exit: info })
    return error
  }

  #onExit (exit: CliExit): void {
    this.#metrics.cliExited(exit.code, exit.signal)
    this.#cli = null
    this.#idle.disarm()
    const stopped = this.#stopping
    this.#stopping = false
    this.#turnsPending = 0
    this.#wakeTurnWaiters()
    this.#control.cliExited()
    if (this.#gone) { this.#exitDone(); return }
    const info = exitInfo(exit, stopped)
    this.#record.exit = info
    this.#setStatus(stopped ? 'stopped' : 'exited', { exit: info })
    this.#exitDone()
    void this.disown()
  }

  /** Until every event and record write queued so far (and any queued meanwhile) is done. */
  async #settleWrites (deadlineMs: number): Promise<void> {
    for (;;) {
      await this.#events.flush(deadlineMs)
      const write = this.#recordWrite
      await write
      if (write === this.#recordWrite) return
    }
  }

  /** Carries out what the control plane decided, in the order it decided it. */
  #apply (effect: ControlEffect<ClientPort>): void {
    switch (effect.kind) {
      case 'write_cli':
        this.#writeCli(effect.message)
        return
      case 'send':
        this.#audience.send(effect.to, effect.frame, effect.seq)
        return
      case 'record': {
        const seq = this.#events.push((s) => gatewayFrame(effect.subtype, effect.fields, s))
        this.#armIdle()
        if (effect.subtype === 'permission_resolved') {
          const f = effect.fields
          this.#notify.permissionResolved(this.#ref, { requestId: String(f.request_id), decision: String(f.decision), by: typeof f.by === 'string' ? f.by : null, seq })
        }
        return
      }
      case 'keep_initialize':
        // Kept with the session: a restarted or resumed CLI gets it again.
        this.#record.initialize = effect.request
        this.#persist()
    }
  }

  // ---- state ----

  #setStatus (status: SessionStatus, extra: Record<string, unknown> = {}): void {
    this.#record.status = status
    this.#record.updated_at = new Date().toISOString()
    const seq = this.#events.push((s) => gatewayFrame('status', { status, pid: this.#cli?.pid ?? null, ...extra }, s))
    this.#persist()
    this.#deps.onStatus(this)
    if (status === 'stopped' || status === 'exited') {
      const exit = this.#record.exit
      this.#notify.sessionEnded(this.#ref, { status, reason: exit?.reason ?? status, code: exit?.code ?? null, signal: exit?.signal ?? null, seq })
    }
  }

  /** Saves the record; writes are chained so they land in order. */
  #persist (): void {
    const lease = this.#lease
    // Only the owner writes the record (a node following a session elsewhere never does).
    if (lease === null) return
    this.#record.last_seq = this.#events.lastSeq
    const lost = this.#events.lostRanges
    if (lost.length > 0) this.#record.lost_ranges = lost
    const copy = structuredClone(this.#record)
    this.#recordWrite = this.#recordWrite
      .then(async () => {
        try {
          await this.#deps.store.putSession(copy, lease)
        } catch (err) {
          // As for appends: a lease that merely lapsed is taken back and the write tried once more.
          if (!(err instanceof FencedError) || !(await this.#deps.ownership.reclaim(lease))) throw err
          await this.#deps.store.putSession(copy, lease)
        }
      })
      .catch((err: unknown) => {
        if (err instanceof FencedError && this.#lease === lease) this.fence()
        else if (err instanceof FencedError) this.#log.warn('a record write landed after the session lease was given up; dropped')
        else this.#log.warn({ err }, 'saving session record failed')
      })
  }

  #writeCli (message: Record<string, unknown>): void {
    if (this.#cli === null || !this.#cli.write(JSON.stringify(message))) {
      this.#log.warn({ type: message.type }, 'CLI stdin unavailable; message dropped')
    }
  }

  #armIdle (): void {
    const busy = this.#cli === null || this.#stopping || this.#audience.size > 0 || this.#turnsPending > 0 || this.#control.pendingCount > 0
    this.#idle.arm(busy)
  }
}

/** Client frames that start a stopped CLI (a user message, the holder's initialize). */
function startsCli (frame: ClientFrame): boolean {
  return frame.type === 'user' || (frame.type === 'control_request' && isRecord(frame.request) && frame.request.subtype === 'initialize')
}
