/**
 * The parts of one session (its event log, control plane, clients, lease,
 * CLI and the collaborators that act on them) and the one object every part
 * is given to reach the others: each sees only its own interface of it.
 *
 * One small object per session, whose members live on one shared prototype:
 * a closure per callback and a `{ ...shared, extra }` copy per collaborator
 * (each with a hidden class of its own) cost about 7 KiB per idle session
 * (issue 14). The Session (session.ts) is the public face; these are its
 * insides.
 */
import type { Logger } from 'pino'
import type { CliCallbacks, CliHandle, CliSpawnSpec } from '../cli/cli-handle.js'
import { type GatewayError, errorTable } from '../errors.js'
import type { AnswerInput, AnswerResult, CliState, ControlEffect } from '../control/control-effects.js'
import { ControlPlane } from '../control/control-plane.js'
import type { PendingRequest } from '../control/pending-requests.js'
import { RecentIds } from '../control/recent-ids.js'
import { type MetricsSink, noopMetrics } from '../metrics/sink.js'
import type { ClientFrame } from '../protocol/client-frames.js'
import { type EventStore, type Lease, type SessionRecord, type SessionStatus, isFinal } from '../store/store.js'
import { Audience, type ClientPort } from './audience.js'
import { CliOutput, type CliOutputHost } from './cli-output.js'
import { ClientInput, type ClientInputHost } from './client-input.js'
import { ConversationSaves, type ConversationSavesOptions } from './conversation-saves.js'
import { EventLog, type EventLogOptions, type LogEvent, type OverflowEpisode, type SeqRange } from './event-log.js'
import { errorFrame, gatewayFrame } from './frames.js'
import { IdleTimer } from './idle-timer.js'
import { OwnerCalls, type OwnerCallsHost } from './owner-calls.js'
import { RecordWriter, type RecordWriterOptions } from './record-writer.js'
import { SessionCli, type SessionCliHost } from './session-cli.js'
import type { SessionOwnership, SessionRoute } from './session-deps.js'
import type { Session, SessionDeps } from './session.js'
import { type SessionEvents, type SessionRef, noSessionEvents } from './session-events.js'
import { type FollowerHost, SessionFollower } from './session-follower.js'
import { type LeaseHost, SessionLease } from './session-lease.js'
import { type StatusHost, StatusRecorder } from './status-recorder.js'
import { Turns } from './turns.js'
import { UnstoredPrompts } from './unstored-prompts.js'

/** Everything the event log and the collaborators are given (each sees only its own interface of it). */
type SessionHost = EventLogOptions & LeaseHost & FollowerHost & StatusHost & CliOutputHost & OwnerCallsHost & ClientInputHost & RecordWriterOptions & ConversationSavesOptions & SessionCliHost

const UUID_MEMORY = 1000

export class SessionParts implements SessionHost {
  /** The session these are the parts of: what they call back on it goes through its public methods. */
  readonly session: Session
  readonly deps: SessionDeps
  readonly id: string
  readonly record: SessionRecord
  readonly log: Logger
  readonly metrics: MetricsSink
  /** Who hears of prompts, turns and ends (webhooks); called only where the CLI runs, so once per event. */
  readonly notify: SessionEvents
  readonly ref: SessionRef
  readonly audience: Audience
  readonly idle: IdleTimer
  readonly turns = new Turns()
  readonly seenUuids = new RecentIds(UUID_MEMORY)
  /** Prompts asked or ended and not yet stored: a hello's pending prompts are those as of its last_seq. */
  readonly unstored = new UnstoredPrompts()
  readonly events: EventLog
  readonly control: ControlPlane<ClientPort>
  readonly writes: RecordWriter
  readonly statusRecorder: StatusRecorder
  readonly saves: ConversationSaves
  readonly follower: SessionFollower
  readonly sessionLease: SessionLease
  readonly cliOutput: CliOutput
  readonly ownerCalls: OwnerCalls
  readonly clientInput: ClientInput
  readonly cli: SessionCli

  /** `lease`: this node's lease when it owns the session (created or taken here), else null. */
  constructor (session: Session, record: SessionRecord, deps: SessionDeps, lease: Lease | null) {
    this.session = session
    this.deps = deps
    this.id = record.id
    this.record = record
    const log = this.log = deps.logger.child({ session: record.id })
    this.metrics = deps.metrics ?? noopMetrics
    this.notify = deps.events ?? noSessionEvents
    this.ref = { sessionId: record.id, tenant: record.tenant }
    this.audience = new Audience(this.metrics)
    this.idle = new IdleTimer(deps.limits.idleTimeoutMs, () => { void session.stop('idle') })
    // Before anything may ask whether a CLI runs.
    this.cli = new SessionCli(this)
    this.events = new EventLog(this)
    const limits = deps.limits
    // Listed, not spread: a spread copy gets a hidden class of its own per session.
    this.control = new ControlPlane<ClientPort>({
      permissionTimeoutMs: limits.permissionTimeoutMs,
      controlRequestTimeoutMs: limits.controlRequestTimeoutMs,
      clientRequestTimeoutMs: limits.clientRequestTimeoutMs,
      initializeHoldMs: limits.initializeHoldMs,
      policy: deps.policy,
      policyScope: deps.policyScope,
      initialize: record.initialize,
      cliState: () => this.cliState(),
      startCli: (opening) => this.cli.start(opening),
      effects: (effect) => { this.apply(effect) },
      logger: log,
      metrics: this.metrics
    })
    this.writes = new RecordWriter(this)
    this.statusRecorder = new StatusRecorder(this)
    this.saves = new ConversationSaves(this)
    this.follower = new SessionFollower(this)
    this.sessionLease = new SessionLease(this, lease)
    this.cliOutput = new CliOutput(this)
    this.ownerCalls = new OwnerCalls(this)
    this.clientInput = new ClientInput(this)
  }

  get store (): EventStore { return this.deps.store }
  get route (): SessionRoute | undefined { return this.deps.route }
  get ownership (): SessionOwnership { return this.deps.ownership }
  get conversation (): SessionDeps['conversation'] { return this.deps.conversation }

  lease (): Lease | null { return this.sessionLease.lease }
  owned (): boolean { return this.sessionLease.owned }
  ownedNow (): Promise<boolean> { return this.sessionLease.confirmed() }
  gone (): boolean { return this.sessionLease.gone }
  onFenced (): void { this.session.fence() }
  fenced (): void { this.deps.onFenced(this.session) }
  handleFrame (port: ClientPort, frame: ClientFrame): void { this.session.handleFrame(port, frame) }
  answer (requestId: string, input: AnswerInput, by: string): AnswerResult { return this.session.answer(requestId, input, by) }
  persist (): void { this.writes.persist() }
  changed (): void { this.deps.onStatus(this.session) }
  pid (): number | null { return this.cli.pid }
  cliRunning (): boolean { return this.cli.running }
  cliState (): CliState { return this.cli.state }
  markLost (): Promise<void> { return this.session.markLost() }
  endCli (): void { this.cli.end() }
  admit (): GatewayError | null { return this.deps.admit() }
  spawnSpec (): CliSpawnSpec { return this.deps.spawnSpec(this.record.resumable) }
  launch (spec: CliSpawnSpec, callbacks: CliCallbacks): CliHandle { return this.deps.launch(spec, callbacks) }
  disown (): Promise<void> { return this.session.disown() }

  setStatus (status: SessionStatus): void { this.statusRecorder.set(status) }
  turnEnded (): void { this.turns.end(); void this.saves.save() }
  turnState (state: unknown): void { this.turns.cliState(state); this.armIdle() }
  stepped (): void { this.saves.stepped() }
  busy (): void { this.idle.disarm() }
  ended (): boolean { return isFinal(this.record.status) }
  refresh (): Promise<void> { return this.session.refresh() }
  snapshot (): Record<string, unknown> { return this.session.snapshot() }
  stop (why: string): Promise<void> { return this.session.stop(why) }
  pending (): PendingRequest[] { return this.control.list() }
  start (): GatewayError | null { return this.session.start() }
  turnStarted (): void { this.idle.disarm(); this.turns.begin() }
  asked (requestId: string, seq: number): void { this.unstored.asked(requestId, seq) }

  /** With nobody holding the session, the next client that asked for control holds it, and gets what it saw as notices. */
  promoteHolder (): void {
    const next = this.audience.promote()
    if (next === null) return
    this.audience.announceHolder()
    if (next.backlog === null) this.control.holderChanged(next.port, this.events.committedSeq)
  }

  /** The session may have become idle: the idle timer runs while nothing waits on it or its CLI. */
  armIdle (): void {
    const busy = !this.cli.running || this.cli.stopping || this.audience.size > 0 || this.turns.pending > 0 || this.control.pendingCount > 0
    this.idle.arm(busy)
  }

  /** Carries out what the control plane decided, in the order it decided it. */
  apply (effect: ControlEffect<ClientPort>): void {
    switch (effect.kind) {
      case 'write_cli':
        this.cli.write(effect.message)
        return
      case 'send':
        this.audience.send(effect.to, effect.frame, effect.seq)
        return
      case 'record': {
        const seq = this.events.push((s) => gatewayFrame(effect.subtype, effect.fields, s))
        if (effect.subtype === 'permission_resolved' || effect.subtype === 'request_resolved') this.unstored.ended(String(effect.fields.request_id), seq)
        this.armIdle()
        if (effect.subtype === 'permission_resolved') {
          const f = effect.fields
          this.notify.permissionResolved(this.ref, { requestId: String(f.request_id), decision: String(f.decision), by: typeof f.by === 'string' ? f.by : null, seq })
        }
        return
      }
      case 'keep_initialize':
        // Kept with the session: a restarted or resumed CLI gets it again.
        this.record.initialize = effect.request
        this.writes.persist()
    }
  }

  // The event log's (EventLogOptions); sessionId, lastSeq and lostRanges are read when it is made.
  get sessionId (): string { return this.id }
  get lastSeq (): number { return this.record.last_seq }
  get lostRanges (): SeqRange[] | undefined { return this.record.lost_ranges }
  get maxUnsaved (): number { return this.deps.limits.storeQueueMax }
  get logger (): Logger { return this.deps.logger }

  onCommit (committed: LogEvent[]): void {
    this.unstored.committed((committed[committed.length - 1] as LogEvent).seq)
    this.audience.broadcast(committed)
  }

  onDegraded (degraded: boolean, lost: OverflowEpisode | null): void {
    this.metrics.storeDegradedChanged()
    const totals = lost === null ? {} : { missing_from: lost.from, missing_to: lost.to, dropped: lost.dropped }
    this.audience.sendAll(gatewayFrame('store', { state: degraded ? 'degraded' : 'ok', ...totals }))
    // The store may have lost the record meanwhile (e.g. Redis restarted without persistence),
    // and it must learn the ranges dropped: save it again.
    if (!degraded) this.writes.persist()
  }

  onOverflow (episode: OverflowEpisode): void {
    this.audience.sendAll(errorFrame('store_overflow', errorTable.store_overflow.message, {
      missing_from: episode.from, missing_to: episode.to, dropped: episode.dropped
    }))
  }

  async reclaim (lease: Lease): Promise<boolean> { return await this.deps.ownership.reclaim(lease) }
  onBacklog (full: boolean): void { this.cli.backlog(full) }
}
