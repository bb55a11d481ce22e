/**
 * One session: the coordinator of its CLI process, its event log, the
 * clients attached to it and its control plane.
 *
 * Everything the CLI prints (but keep_alives) is given the next seq, stored,
 * and then relayed to every client (src/session/cli-output.ts). At most one
 * client holds the session: only it may write to the CLI, and it alone
 * receives CLI control requests in full (others get a `request_pending`
 * notice with the same seq). Everything about control requests either way
 * (pending, answers, policy, timeouts, the CLI's initialize) is decided by
 * the ControlPlane (src/control/), whose effects are carried out here.
 *
 * Across nodes, the session's lease says where its CLI may run
 * (session-lease.ts); a node that does not hold it follows the log
 * (session-follower.ts), and HTTP requests are done where the CLI runs
 * (owner-calls.ts).
 *
 * No fastify or ws here: clients are `ClientPort`s, the CLI a `CliHandle`.
 */
import type { Logger } from 'pino'
import type { CliExit, CliHandle, CliSpawnSpec } from '../cli/cli-handle.js'
import { GatewayError, errorTable } from '../errors.js'
import type { AnswerInput, AnswerResult, CliState, ControlEffect } from '../control/control-effects.js'
import { ControlPlane } from '../control/control-plane.js'
import type { PendingRequest } from '../control/pending-requests.js'
import { RecentIds } from '../control/recent-ids.js'
import { type MetricsSink, noopMetrics } from '../metrics/sink.js'
import type { ClientFrame, ControlRequestFrame } from '../protocol/client-frames.js'
import { type EventStore, type Lease, type SessionRecord, type SessionStatus, isFinal } from '../store/store.js'
import { EventLog, type EventLogOptions, type LogEvent, type OverflowEpisode, type SeqRange } from './event-log.js'
import { Audience, type ClientPort, type Role } from './audience.js'
import { CliOutput, type CliOutputHost } from './cli-output.js'
import { ClientInput, type ClientInputHost } from './client-input.js'
import { ConversationSaves, type ConversationSavesOptions } from './conversation-saves.js'
import { RETRY_AFTER_MS, helloFrame } from './hello-frame.js'
import { IdleTimer } from './idle-timer.js'
import { type OwnerOp, OwnerCalls, type OwnerCallsHost } from './owner-calls.js'
import { RecordWriter, type RecordWriterOptions } from './record-writer.js'
import { replay, resumePoint } from './replay.js'
import { type SessionEvents, type SessionRef, noSessionEvents } from './session-events.js'
import type { SessionDeps as BaseDeps, SessionOwnership, SessionRoute } from './session-deps.js'
import { type FollowerHost, SessionFollower } from './session-follower.js'
import { type LeaseHost, SessionLease } from './session-lease.js'
import { type StatusHost, StatusRecorder } from './status-recorder.js'
import { unresolvedRequests } from './unresolved-requests.js'
import { sessionView } from './session-view.js'
import { errorFrame, gatewayFrame } from './frames.js'
import { Turns } from './turns.js'
import { Waiters } from './waiters.js'

export type { ClientPort, EndReason, Role } from './audience.js'
export type { AnswerInput, AnswerResult } from '../control/control-effects.js'
export type { SessionLimits } from './session-deps.js'

export type SessionDeps = BaseDeps<Session>

/** Everything the event log and the collaborators are given (each sees only its own interface of it). */
type SessionHost = EventLogOptions & LeaseHost & FollowerHost & StatusHost & CliOutputHost & OwnerCallsHost & ClientInputHost & RecordWriterOptions & ConversationSavesOptions

const UUID_MEMORY = 1000

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
  /** Who hears of prompts, turns and ends (webhooks); called only where the CLI runs, so once per event. */
  readonly #notify: SessionEvents
  readonly #ref: SessionRef
  readonly #idle: IdleTimer
  readonly #turns = new Turns()
  readonly #lease: SessionLease
  readonly #follower: SessionFollower
  readonly #writes: RecordWriter
  readonly #saves: ConversationSaves
  readonly #output: CliOutput
  readonly #calls: OwnerCalls
  readonly #input: ClientInput
  readonly #status: StatusRecorder
  #cli: CliHandle | null = null
  #stopping = false
  /** True from a CLI's start until its exit has been recorded (its status frame and record queued). */
  #exitPending = false
  /** Who waits for that (close); a promise is made only for them, not per CLI (issue 14). */
  #exitWaiters: Waiters<void> | null = null
  /** While the spawn helper starts the CLI (CliHandle.pending): who waits to learn whether it runs. */
  #startWaiters: Waiters<GatewayError | null> | null = null
  #starting = false

  /**
   * What the event log and every collaborator are given (each sees its own interface of it):
   * one small object per session, whose members live on one shared prototype. A closure per
   * callback and a `{ ...shared, extra }` copy per collaborator (each with a hidden class of
   * its own) cost about 7 KiB per idle session (issue 14). Declared in Session's body so it
   * reaches the session's private state.
   */
  static readonly #Host = class implements SessionHost {
    readonly #s: Session
    constructor (session: Session) { this.#s = session }

    get id (): string { return this.#s.id }
    get record (): SessionRecord { return this.#s.#record }
    get events (): EventLog { return this.#s.#events }
    get audience (): Audience { return this.#s.#audience }
    get control (): ControlPlane<ClientPort> { return this.#s.#control }
    get log (): Logger { return this.#s.#log }
    get store (): EventStore { return this.#s.#deps.store }
    get route (): SessionRoute | undefined { return this.#s.#deps.route }
    get ownership (): SessionOwnership { return this.#s.#deps.ownership }
    get seenUuids (): RecentIds { return this.#s.#seenUuids }
    get metrics (): MetricsSink { return this.#s.#metrics }
    get notify (): SessionEvents { return this.#s.#notify }
    get ref (): SessionRef { return this.#s.#ref }
    get conversation (): SessionDeps['conversation'] { return this.#s.#deps.conversation }
    get follower (): SessionFollower { return this.#s.#follower }
    get writes (): RecordWriter { return this.#s.#writes }
    get saves (): ConversationSaves { return this.#s.#saves }

    lease (): Lease | null { return this.#s.#lease.lease }
    owned (): boolean { return this.#s.#lease.owned }
    gone (): boolean { return this.#s.#lease.gone }
    onFenced (): void { this.#s.fence() }
    fenced (): void { this.#s.#deps.onFenced(this.#s) }
    promoteHolder (): void { this.#s.#promoteHolder() }
    handleFrame (port: ClientPort, frame: ClientFrame): void { this.#s.handleFrame(port, frame) }
    answer (requestId: string, input: AnswerInput, by: string): AnswerResult { return this.#s.answer(requestId, input, by) }
    persist (): void { this.#s.#writes.persist() }
    changed (): void { this.#s.#deps.onStatus(this.#s) }
    pid (): number | null { return this.#s.#cli?.pid ?? null }
    cliRunning (): boolean { return this.#s.#cli !== null }
    cliState (): CliState { return this.#s.#cliState() }
    markLost (): Promise<void> { return this.#s.markLost() }
    endCli (): void {
      const s = this.#s
      s.#idle.disarm()
      const cli = s.#cli
      s.#stopping = true
      if (cli !== null) void cli.stop()
    }

    setStatus (status: SessionStatus): void { this.#s.#status.set(status) }
    turnEnded (): void { this.#s.#turns.end(); void this.#s.#saves.save() }
    turnState (state: unknown): void { this.#s.#turns.cliState(state); this.#s.#armIdle() }
    stepped (): void { this.#s.#saves.stepped() }
    busy (): void { this.#s.#idle.disarm() }
    armIdle (): void { this.#s.#armIdle() }
    ended (): boolean { return isFinal(this.#s.#record.status) }
    refresh (): Promise<void> { return this.#s.refresh() }
    snapshot (): Record<string, unknown> { return this.#s.snapshot() }
    stop (why: string): Promise<void> { return this.#s.stop(why) }
    pending (): PendingRequest[] { return this.#s.pendingRequests }
    start (): GatewayError | null { return this.#s.start() }
    turnStarted (): void { this.#s.#idle.disarm(); this.#s.#turns.begin() }

    // The event log's (EventLogOptions); sessionId, lastSeq and lostRanges are read when it is made.
    get sessionId (): string { return this.#s.id }
    get lastSeq (): number { return this.#s.#record.last_seq }
    get lostRanges (): SeqRange[] | undefined { return this.#s.#record.lost_ranges }
    get maxUnsaved (): number { return this.#s.#deps.limits.storeQueueMax }
    get logger (): Logger { return this.#s.#deps.logger }
    onCommit (committed: LogEvent[]): void { this.#s.#audience.broadcast(committed) }
    onDegraded (degraded: boolean, lost: OverflowEpisode | null): void {
      const s = this.#s
      s.#metrics.storeDegradedChanged()
      const totals = lost === null ? {} : { missing_from: lost.from, missing_to: lost.to, dropped: lost.dropped }
      s.#audience.sendAll(gatewayFrame('store', { state: degraded ? 'degraded' : 'ok', ...totals }))
      // The store may have lost the record meanwhile (e.g. Redis restarted without persistence),
      // and it must learn the ranges dropped: save it again.
      if (!degraded) s.#writes.persist()
    }

    onOverflow (episode: OverflowEpisode): void {
      this.#s.#audience.sendAll(errorFrame('store_overflow', errorTable.store_overflow.message, {
        missing_from: episode.from, missing_to: episode.to, dropped: episode.dropped
      }))
    }

    async reclaim (lease: Lease): Promise<boolean> { return await this.#s.#deps.ownership.reclaim(lease) }
    onBacklog (full: boolean): void {
      const cli = this.#s.#cli
      if (full) cli?.pauseOutput?.()
      else cli?.resumeOutput?.()
    }
  }

  /** `lease`: this node's lease when it owns the session (created or taken here), else null. */
  constructor (record: SessionRecord, deps: SessionDeps, lease: Lease | null = null) {
    this.id = record.id
    this.#record = record
    this.#deps = deps
    const log = this.#log = deps.logger.child({ session: record.id })
    this.#metrics = deps.metrics ?? noopMetrics
    this.#notify = deps.events ?? noSessionEvents
    this.#ref = { sessionId: record.id, tenant: record.tenant }
    this.#audience = new Audience(this.#metrics)
    this.#idle = new IdleTimer(deps.limits.idleTimeoutMs, () => { void this.stop('idle') })
    const host = new Session.#Host(this)
    this.#events = new EventLog(host)
    const limits = deps.limits
    // Listed, not spread: a spread copy gets a hidden class of its own per session.
    this.#control = new ControlPlane<ClientPort>({
      permissionTimeoutMs: limits.permissionTimeoutMs,
      controlRequestTimeoutMs: limits.controlRequestTimeoutMs,
      clientRequestTimeoutMs: limits.clientRequestTimeoutMs,
      initializeHoldMs: limits.initializeHoldMs,
      policy: deps.policy,
      policyScope: deps.policyScope,
      initialize: record.initialize,
      cliState: () => this.#cliState(),
      startCli: (opening) => this.start(opening),
      effects: (effect) => this.#apply(effect),
      logger: log,
      metrics: this.#metrics
    })
    this.#writes = new RecordWriter(host)
    this.#status = new StatusRecorder(host)
    this.#saves = new ConversationSaves(host)
    this.#follower = new SessionFollower(host)
    this.#lease = new SessionLease(host, lease)
    this.#output = new CliOutput(host)
    this.#calls = new OwnerCalls(host)
    this.#input = new ClientInput(host)
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
  get owned (): boolean { return this.#lease.owned }
  /** True while this node follows the session's log as another node appends it. */
  get following (): boolean { return this.#follower.following }

  /** See SessionFollower.refresh: brings a session this node does not own up to date with the store. */
  refresh (): Promise<void> { return this.#follower.refresh() }
  /** See SessionFollower.statusFromLog: the log's last frame may know the status better than the record. */
  statusFromLog (): Promise<void> { return this.#follower.statusFromLog() }
  /** See SessionLease.own: takes the session's lease for this node, if no other live node holds it. */
  own (): Promise<boolean> { return this.#lease.own() }
  /** See SessionLease.disown: gives the lease up once the CLI has stopped and everything is stored. */
  disown (): Promise<void> { return this.#lease.disown() }
  /** See SessionLease.fence: another node owns the session now. */
  fence (): void { this.#lease.fence() }

  #promoteHolder (): void {
    const next = this.#audience.promote()
    if (next === null) return
    this.#audience.announceHolder()
    if (next.backlog === null) this.#control.holderChanged(next.port, this.#events.committedSeq)
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
  remoteHolder (port: ClientPort, holds: boolean, upTo?: number): void { this.#follower.remoteHolder(port, holds, upTo) }
  /** On a client's node: a frame its owner sent it alone (`seq` when recorded; see SessionFollower.fromOwner). */
  fromOwner (port: ClientPort, frame: string, seq?: number): void { this.#follower.fromOwner(port, frame, seq) }
  /** On a client's node: the node its frames went to does not own the session (any more) or did not confirm `frames` (see SessionFollower.ownerMoved). */
  ownerMoved (port: ClientPort, frames: ClientFrame[]): void { this.#follower.ownerMoved(port, frames) }

  /** What REST callers see. */
  snapshot (): Record<string, unknown> {
    return sessionView(this.#record, {
      last_seq: this.#events.lastSeq,
      clients: this.#audience.size,
      holder: this.#audience.holder?.port.id ?? null,
      pid: this.#cli?.pid ?? null,
      turn_running: this.#turns.pending > 0,
      pending_requests: this.#control.pendingCount,
      store: this.#events.degraded ? 'degraded' : 'ok'
    })
  }

  /** Starts the CLI (`--resume` once the conversation is stored); `opening` is the holder's initialize that starts it. */
  start (opening?: ControlRequestFrame): GatewayError | null {
    if (this.#cli !== null) return null
    if (!this.#lease.owned) return new GatewayError('session_elsewhere')
    const refused = this.#deps.admit()
    if (refused !== null) return refused
    this.#stopping = false
    this.#turns.clear()
    let cli: CliHandle
    try {
      const spec: CliSpawnSpec = this.#deps.spawnSpec(this.#record.resumable)
      // spawn itself throws for some failures (E2BIG: arguments or environment too large).
      cli = this.#deps.launch(spec, {
        onLine: (line) => { if (this.#cli === cli) this.#output.line(line) },
        onOversize: (bytes) => this.#output.reject('too_large', bytes, ''),
        onExit: (exit) => { if (this.#cli === cli) this.#onExit(exit) },
        onStart: () => { if (this.#cli === cli) this.#began() },
        onStartFailed: (err) => { if (this.#cli === cli) this.#startFailed(err) }
      })
    } catch (err) {
      return this.#status.spawnFailed(err)
    }
    this.#cli = cli
    // Started (again) while the lines of the CLI before it still wait behind the store's append:
    // the pause asked of that one holds for this one, until onBacklog(false).
    if (this.#events.backlogged) cli.pauseOutput?.()
    this.#exitPending = true
    // Started by the spawn helper: `starting` (with the pid) once it says the CLI runs. Counted
    // as running from now, so a start admitted meanwhile sees this one (MAX_SESSIONS).
    if (cli.pending === true) {
      this.#starting = true
      this.#deps.onStatus(this)
    } else this.#status.set('starting')
    this.#control.cliStarted(opening)
    this.#armIdle()
    return null
  }

  /**
   * Settles once the CLI start() began is known to run (at once when it
   * started synchronously), with the error when starting it failed after all
   * (what start() returns for a spawn that throws at once).
   */
  started (): Promise<GatewayError | null> {
    if (!this.#starting) return Promise.resolve(null)
    return (this.#startWaiters ??= new Waiters()).wait()
  }

  #began (): void {
    this.#starting = false
    if (!this.#stopping) this.#status.set('starting')
    this.#startWaiters?.wakeAll(null)
  }

  /** The spawn helper could not start the CLI: as when spawn() throws in start(), but later. */
  #startFailed (err: Error): void {
    this.#starting = false
    this.#cli = null
    this.#stopping = false
    this.#idle.disarm()
    this.#control.cliExited()
    const error = this.#status.spawnFailed(err)
    this.#exitDone()
    this.#startWaiters?.wakeAll(error)
  }

  /** Ends the CLI: stdin closed, SIGTERM, SIGKILL. History and record stay. */
  async stop (why: string): Promise<void> {
    this.#idle.disarm()
    const cli = this.#cli
    if (cli === null) return
    this.#log.info({ why }, 'stopping session')
    this.#stopping = true
    this.#status.set('stopping')
    await cli.stop()
  }

  /**
   * Waits (until `deadline`, ms since the epoch) for the turns running now,
   * and those that start meanwhile, to finish: a node that drains lets its
   * turns end before it stops their CLIs (SHUTDOWN_GRACE_MS).
   */
  drain (deadline: number): Promise<void> { return this.#turns.drain(deadline, () => this.#cli !== null) }

  /** Stops the CLI and waits until every event is stored (gateway shutdown). */
  async close (deadlineMs: number): Promise<void> {
    this.#follower.stop()
    await this.stop('shutdown')
    // The CLI's end is recorded by its exit handler, which may run after stop() returned:
    // released before that, the lease would be gone when the 'stopped' record is written.
    await this.#exitHandled()
    await this.#writes.settle(deadlineMs)
    await this.#saves.save()
    await this.#lease.disowning
    // Any node may take the session at once (the next message resumes it there).
    const lease = this.#lease.surrender()
    if (lease !== null) {
      try { await this.#deps.ownership.release(lease) } catch { /* it lapses by itself */ }
    }
    this.#events.close()
  }

  /**
   * For a session whose record says a CLI runs although none does (its
   * gateway process crashed): records it as stopped, `exit.reason: "lost"`,
   * with a status frame in its own log, so history readers, event streams
   * and resuming clients learn it like any other end; the requests its CLI
   * had asked and nobody ended are recorded ended (`cancelled`) first, as
   * a CLI's exit ends them. Resolves once the frames and the record are
   * stored (or the store did not answer).
   */
  async markLost (): Promise<void> {
    const lost = (): boolean => this.#lease.owned && this.#cli === null && !isFinal(this.#record.status)
    if (!lost()) return
    // Its prompts died with the process that held them: they end here, cancelled, before the status.
    const open = await unresolvedRequests(this.#deps.store, this.id).catch((err: unknown) => {
      this.#log.warn({ err: (err as Error).message }, 'could not read which requests the lost CLI left open; they are not marked ended')
      return []
    })
    if (!lost()) return
    for (const { requestId, subtype } of open) {
      this.#apply({ kind: 'record', subtype: subtype === 'can_use_tool' ? 'permission_resolved' : 'request_resolved', fields: { request_id: requestId, request_subtype: subtype, decision: 'cancelled', by: null } })
    }
    this.#status.lost()
    await this.#events.flush(1000)
    await this.#writes.written
  }

  /**
   * Saves the record again as it is. For a store that answers again after
   * losing its data (Redis restarted without persistence): the session must
   * not wait for its next status change to be listed and loadable again.
   */
  async persistRecord (): Promise<void> {
    this.#writes.persist()
    await this.#writes.written
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
    this.#follower.follow()
    // Where another node runs the CLI, the prompts pending are those the followed log leaves open
    // (this node's control plane has none): known before upTo is taken, and read with it.
    const followed = !this.#lease.owned && this.#deps.route !== undefined
    if (followed) {
      await this.#follower.knowOpen()
      if (!this.#audience.has(port)) return
    }
    const upTo = this.#events.committedSeq
    const openThere = followed && !this.#lease.owned ? this.#follower.openIds : null
    const wait = { waitMs: this.#deps.limits.resumeWaitMs, gone: () => !this.#audience.has(port) }
    const { from, resume, oldest, missing } = await resumePoint(this.#events, options.after, upTo, wait)
    if (!this.#audience.has(port)) return
    // A client about to be ended (no replay possible yet) never takes the session from its holder;
    // nor does one here while another node runs the CLI (its frames could not reach it).
    const elsewhere = !this.#lease.owned && !isFinal(this.#record.status)
    if (options.role === 'controller' && resume !== 'unavailable' && !elsewhere) this.#audience.hold(att)
    const holder = this.#audience.holder
    this.#audience.send(port, helloFrame({
      sessionId: this.id,
      clientId: port.id,
      role: holder === att ? 'controller' : 'observer',
      holder: holder?.port.id ?? null,
      status: this.#record.status,
      lastSeq: upTo,
      point: { resume, oldest, missing },
      degraded: this.#events.degraded,
      pending: openThere ?? this.#control.list().map((p) => p.requestId)
    }))
    if (resume === 'unavailable') {
      att.backlog = null
      port.end?.('store_unavailable', `event store unavailable: reconnect with ?after=${options.after ?? 0} in ${RETRY_AFTER_MS} ms`)
      return
    }
    att.greeted = true
    if (options.role === 'controller' && !elsewhere) this.#audience.announceHolder(att)
    // Running on another node: this client joins that node's session (its frames go there, the holder rules are its).
    if (elsewhere) void this.#follower.routeClient(port, options.role)
    options.onHello?.()
    const noticedUpTo = await replay(att, from, upTo, { events: this.#events, audience: this.#audience, log: this.#log, wait, pending: () => this.#control.list() })
    if (noticedUpTo !== null && this.#audience.holder === att) this.#control.holderChanged(att.port, noticedUpTo)
  }

  detach (port: ClientPort): void {
    this.#deps.route?.detach(port)
    // Where another node runs the CLI, that node picks the next holder (SessionFollower.leaving).
    this.#follower.leaving(port)
    const next = this.#audience.remove(port)
    if (this.#audience.size === 0) this.#follower.stop()
    if (next !== undefined) {
      this.#audience.announceHolder()
      // Only what it was sent as notices: later frames reach it live as the holder's. A client
      // still being replayed to gets its pending requests when its attach ends.
      if (next !== null && next.backlog === null) this.#control.holderChanged(next.port, this.#events.committedSeq)
    }
    this.#armIdle()
  }

  /**
   * Handles a validated client frame (src/session/client-input.ts). Problems
   * go back to that client: a refused control_request as a control_response
   * error with its request_id, anything else as an error frame.
   */
  handleFrame (port: ClientPort, frame: ClientFrame): void {
    if (frame.type === 'keep_alive') return
    // Held while the lease is being taken, or sent to the node that runs the CLI (SessionLease.intercept).
    if (this.#lease.intercept(port, frame)) return
    this.#input.handle(port, frame)
  }

  /** On the owner: what an HTTP request made on another node asks (src/cluster/router.ts). */
  call (op: OwnerOp, args: unknown[]): Promise<unknown> { return this.#calls.call(op, args) }
  /** `answer`, done by whichever node runs the CLI (HTTP answers reach any node). */
  answerAnywhere (requestId: string, input: AnswerInput, by: string): Promise<AnswerResult> { return this.#calls.answer(requestId, input, by) }
  /** `stop`, done by whichever node runs the CLI. */
  stopAnywhere (why: string): Promise<void> { return this.#calls.stop(why) }
  /** `snapshot` as the node running the CLI has it (see OwnerCalls.snapshot). */
  snapshotAnywhere (): Promise<Record<string, unknown>> { return this.#calls.snapshot() }
  /** The pending CLI control requests, as the node running the CLI knows them. */
  pendingAnywhere (): Promise<PendingRequest[]> { return this.#calls.pending() }

  /** Answers a pending CLI control request (WebSocket holder or HTTP). First valid answer wins. */
  answer (requestId: string, input: AnswerInput, by: string): AnswerResult {
    return this.#control.answer(requestId, input, by)
  }

  // ---- CLI ----

  #onExit (exit: CliExit): void {
    this.#metrics.cliExited(exit.code, exit.signal, exit.oomKills)
    this.#cli = null
    this.#saves.unwatch()
    this.#idle.disarm()
    const stopped = this.#stopping
    this.#stopping = false
    this.#turns.exited()
    this.#control.cliExited()
    if (this.#lease.gone) { this.#exitDone(); return }
    this.#status.exited(exit, stopped)
    this.#exitDone()
    void this.disown()
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
        this.#writes.persist()
    }
  }

  // ---- state ----

  #writeCli (message: Record<string, unknown>): void {
    if (this.#cli === null || !this.#cli.write(JSON.stringify(message))) {
      this.#log.warn({ type: message.type }, 'CLI stdin unavailable; message dropped')
    }
  }

  #cliState (): CliState {
    return this.#cli === null ? 'stopped' : this.#stopping ? 'stopping' : 'running'
  }

  /** Settles once the running CLI's exit has been recorded (at once when none runs). */
  #exitHandled (): Promise<void> {
    if (!this.#exitPending) return Promise.resolve()
    return (this.#exitWaiters ??= new Waiters()).wait()
  }

  #exitDone (): void {
    this.#exitPending = false
    this.#exitWaiters?.wakeAll()
  }

  #armIdle (): void {
    const busy = this.#cli === null || this.#stopping || this.#audience.size > 0 || this.#turns.pending > 0 || this.#control.pendingCount > 0
    this.#idle.arm(busy)
  }
}
