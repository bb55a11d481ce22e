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
import { type ErrorCode, type GatewayError, errorTable } from '../errors.js'
import type { AnswerInput, AnswerResult, ControlEffect } from '../control/control-effects.js'
import { ControlPlane } from '../control/control-plane.js'
import type { PendingRequest } from '../control/pending-requests.js'
import { RecentIds } from '../control/recent-ids.js'
import { type MetricsSink, noopMetrics } from '../metrics/sink.js'
import type { ClientFrame, ControlRequestFrame } from '../protocol/client-frames.js'
import type { SessionRecord, SessionStatus } from '../store/store.js'
import { EventLog, type SeqRange } from './event-log.js'
import { Audience, type ClientPort, type Role } from './audience.js'
import { exitInfo, spawnFailure } from './exit-info.js'
import { IdleTimer } from './idle-timer.js'
import { type ResumeVerdict, replay, resumePoint } from './replay.js'
import type { SessionDeps as BaseDeps } from './session-deps.js'
import { sessionView } from './session-view.js'
import { isRecord } from '../protocol/is-record.js'
import { errorFrame, gatewayFrame, pendingNotice, withSeq } from './frames.js'

export type { ClientPort, EndReason, Role } from './audience.js'
export type { AnswerInput, AnswerResult } from '../control/control-effects.js'
export type { SessionLimits } from './session-deps.js'

export type SessionDeps = BaseDeps<Session>

const UUID_MEMORY = 1000
/** What an `unavailable` hello suggests waiting before the same resume is tried again. */
const RETRY_AFTER_MS = 2000

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
  #cli: CliHandle | null = null
  #stopping = false
  #turnsPending = 0
  readonly #idle: IdleTimer
  #recordWrite: Promise<void> = Promise.resolve()

  constructor (record: SessionRecord, deps: SessionDeps) {
    this.id = record.id
    this.#record = record
    this.#deps = deps
    this.#log = deps.logger.child({ session: record.id })
    this.#metrics = deps.metrics ?? noopMetrics
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
      }))
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

  /** Stops the CLI and waits until every event is stored (gateway shutdown). */
  async close (deadlineMs: number): Promise<void> {
    await this.stop('shutdown')
    await this.#events.flush(deadlineMs)
    await this.#recordWrite
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
    if (this.#cli !== null || this.#record.status === 'stopped' || this.#record.status === 'exited') return
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
    const upTo = this.#events.committedSeq
    const wait = { waitMs: this.#deps.limits.resumeWaitMs, gone: () => !this.#audience.has(port) }
    const { from, resume, oldest, missing } = await resumePoint(this.#events, options.after, upTo, wait)
    if (!this.#audience.has(port)) return
    // A client about to be ended (no replay possible yet) never takes the session from its holder.
    if (options.role === 'controller' && resume !== 'unavailable') this.#audience.hold(att)
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
    if (options.role === 'controller') this.#audience.announceHolder(att)
    options.onHello?.()
    const noticedUpTo = await replay(att, from, upTo, { events: this.#events, audience: this.#audience, log: this.#log, wait })
    if (noticedUpTo !== null && this.#audience.holder === att) this.#control.holderChanged(att.port, noticedUpTo)
  }

  detach (port: ClientPort): void {
    const next = this.#audience.remove(port)
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
      this.#control.toCli({ ...frame, session_id: this.id, parent_tool_use_id: frame.parent_tool_use_id ?? null })
      return
    }
    const result = this.answer(frame.response.request_id, frame.response, port.id)
    if (!result.ok) fail(result.code, result.message, { request_id: frame.response.request_id })
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
    switch (msg.type) {
      case 'control_request': {
        const requestId = String(msg.request_id)
        const request = isRecord(msg.request) ? msg.request : {}
        let frame = ''
        const seq = this.#events.push((s) => (frame = withSeq(line, msg, s)), (s) => pendingNotice(s, requestId, request))
        this.#control.cliRequest(requestId, request, seq, frame)
        this.#idle.disarm()
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
      case 'result':
        this.#turnsPending = Math.max(0, this.#turnsPending - 1)
        this.#events.push((s) => withSeq(line, msg, s))
        this.#armIdle()
        return
    }
    this.#events.push((s) => withSeq(line, msg, s))
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
    this.#control.cliExited()
    const info = exitInfo(exit, stopped)
    this.#record.exit = info
    this.#setStatus(stopped ? 'stopped' : 'exited', { exit: info })
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
      case 'record':
        this.#events.push((s) => gatewayFrame(effect.subtype, effect.fields, s))
        this.#armIdle()
        return
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
    this.#events.push((s) => gatewayFrame('status', { status, pid: this.#cli?.pid ?? null, ...extra }, s))
    this.#persist()
    this.#deps.onStatus(this)
  }

  /** Saves the record; writes are chained so they land in order. */
  #persist (): void {
    this.#record.last_seq = this.#events.lastSeq
    const lost = this.#events.lostRanges
    if (lost.length > 0) this.#record.lost_ranges = lost
    const copy = structuredClone(this.#record)
    this.#recordWrite = this.#recordWrite
      .then(() => this.#deps.store.putSession(copy))
      .catch((err: unknown) => this.#log.warn({ err }, 'saving session record failed'))
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
