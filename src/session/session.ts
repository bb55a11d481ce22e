/**
 * One session: its CLI process, its event log and the clients attached to it.
 *
 * Everything the CLI prints (but keep_alives) is given the next seq, stored,
 * and then relayed to every client. At most one client holds the session:
 * only it may write to the CLI, and it alone receives CLI control requests
 * in full (others get a `request_pending` notice with the same seq).
 * Pending requests belong to the session, not to a connection.
 *
 * No fastify or ws here: clients are `ClientPort`s, the CLI a `CliHandle`.
 */
import { randomUUID } from 'node:crypto'
import type { Logger } from 'pino'
import type { CliExit, CliHandle, CliLauncher, CliSpawnSpec } from '../cli/cli-handle.js'
import { type ErrorCode, GatewayError, errorTable } from '../errors.js'
import { controlErrorFrame } from '../control/control-error.js'
import type { ControlPolicy, PolicyScope } from '../control/control-policy.js'
import { type PendingRequest, PermissionBroker, completePermissionAnswer, timeoutDenial } from '../permission/broker.js'
import { type ClientFrame, type ControlRequestFrame, type OtherTypeFrame, permissionAnswer } from '../protocol/client-frames.js'
import type { EventStore, ExitInfo, SessionRecord, SessionStatus } from '../store/store.js'
import { EventLog, type LogEvent } from './event-log.js'
import { readHistoryPage } from './history-page.js'
import { Audience, type ClientPort, type Role } from './audience.js'
import { sessionView } from './session-view.js'
import { errorFrame, gatewayFrame, isRecord, pendingNotice, withSeq } from './frames.js'

export type { ClientPort, Role } from './audience.js'

export interface SessionLimits {
  permissionTimeoutMs: number
  controlRequestTimeoutMs: number
  clientRequestTimeoutMs: number
  idleTimeoutMs: number
  storeQueueMax: number
  allowBypassPermissions: boolean
  /** How long a new CLI's initialize waits for the holder's own (INITIALIZE_HOLD_MS). */
  initializeHoldMs: number
}

export interface SessionDeps {
  store: EventStore
  launch: CliLauncher
  /** Builds how to spawn this session's CLI; `resume` picks --resume over --session-id. */
  spawnSpec: (resume: boolean) => CliSpawnSpec
  /** Refuses a (re)start, e.g. when MAX_SESSIONS CLIs run already. */
  admit: () => GatewayError | null
  /** Told whenever the session's status changes. */
  onStatus: (session: Session) => void
  limits: SessionLimits
  logger: Logger
  /** What clients may ask of the CLI (control requests, permission answers). */
  policy: ControlPolicy
  /** The tenant's workspace roots and this session's folder, for directories in grants. */
  policyScope: () => PolicyScope
}

export interface AnswerInput {
  subtype: 'success' | 'error'
  response?: Record<string, unknown> | undefined
  error?: string | undefined
}

export type AnswerResult = { ok: true, decision: string } | { ok: false, code: ErrorCode, message?: string }

const UUID_MEMORY = 1000
const REPLAY_PAGE = 1000
/** Replay reads at most about this much at once (CLI lines may be MiBs each). */
const REPLAY_PAGE_BYTES = 4 * 1024 * 1024

export class Session {
  readonly id: string
  readonly #deps: SessionDeps
  readonly #log: Logger
  readonly #record: SessionRecord
  readonly #events: EventLog
  readonly #broker: PermissionBroker
  readonly #audience = new Audience()
  readonly #clientRequests = new Map<string, { port: ClientPort, timer: NodeJS.Timeout }>()
  readonly #seenUuids = new Set<string>()
  #cli: CliHandle | null = null
  #stopping = false
  #turnsPending = 0
  #idleTimer: NodeJS.Timeout | null = null
  /** False from spawn until this CLI was given its one initialize (the holder's, or the gateway's). */
  #initialized = true
  #initHold: NodeJS.Timeout | null = null
  #recordWrite: Promise<void> = Promise.resolve()

  constructor (record: SessionRecord, deps: SessionDeps) {
    this.id = record.id
    this.#record = record
    this.#deps = deps
    this.#log = deps.logger.child({ session: record.id })
    this.#events = new EventLog({
      sessionId: record.id,
      store: deps.store,
      lastSeq: record.last_seq,
      maxUnsaved: deps.limits.storeQueueMax,
      logger: deps.logger,
      onCommit: (events) => this.#audience.broadcast(events),
      onDegraded: (degraded) => {
        this.#audience.sendAll(gatewayFrame('store', { state: degraded ? 'degraded' : 'ok' }))
        // The store may have lost the record meanwhile (e.g. Redis restarted without persistence): save it again.
        if (!degraded) this.#persist()
      },
      onOverflow: (dropped) => this.#audience.sendAll(errorFrame('store_overflow', errorTable.store_overflow.message, { dropped }))
    })
    this.#broker = new PermissionBroker({
      permissionTimeoutMs: deps.limits.permissionTimeoutMs,
      controlTimeoutMs: deps.limits.controlRequestTimeoutMs,
      onTimeout: (pending) => this.#timedOut(pending)
    })
  }

  get tenant (): string { return this.#record.tenant }
  get status (): SessionStatus { return this.#record.status }
  get running (): boolean { return this.#cli !== null }
  get degraded (): boolean { return this.#events.degraded }
  get clientCount (): number { return this.#audience.size }
  get pendingRequests (): PendingRequest[] { return this.#broker.list() }
  get events (): EventLog { return this.#events }

  /** What REST callers see. */
  snapshot (): Record<string, unknown> {
    return sessionView(this.#record, {
      last_seq: this.#events.lastSeq,
      clients: this.#audience.size,
      holder: this.#audience.holder?.port.id ?? null,
      pid: this.#cli?.pid ?? null,
      turn_running: this.#turnsPending > 0,
      pending_requests: this.#broker.size,
      store: this.#events.degraded ? 'degraded' : 'ok'
    })
  }

  /**
   * Starts the CLI (`--resume` once the conversation is stored). Its initialize
   * is `opening` (the holder's, which started it), else the holder's stored
   * one, else held back up to INITIALIZE_HOLD_MS for the holder's first frame.
   */
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
    this.#initialized = false
    const stored = this.#storedInitialize()
    if (opening !== undefined) this.#initialize(opening)
    else if (stored !== null) this.#initialize({ type: 'control_request', request_id: gatewayInitId(), request: stored })
    else if (this.#deps.limits.initializeHoldMs <= 0) this.#ensureInitialized()
    else {
      // The CLI prints nothing before its initialize: the wait is bounded so `running` still comes.
      this.#initHold = setTimeout(() => this.#ensureInitialized(), this.#deps.limits.initializeHoldMs)
      this.#initHold.unref()
    }
    this.#armIdle()
    return null
  }

  /** The holder's initialize kept with the session, if the policy still lets it through. */
  #storedInitialize (): Record<string, unknown> | null {
    const stored = this.#record.initialize
    if (stored === undefined) return null
    const refused = this.#deps.policy.checkClientRequest(stored, this.#deps.policyScope())
    if (refused === null) return stored
    this.#log.warn({ code: refused.code }, 'stored initialize refused by the control policy; the CLI gets the gateway\'s')
    return null
  }

  /** Writes this CLI's one initialize. */
  #initialize (frame: Record<string, unknown>): void {
    if (this.#initHold !== null) clearTimeout(this.#initHold)
    this.#initHold = null
    this.#initialized = true
    this.#writeCli(frame)
  }

  /** Before anything else reaches a CLI that has no initialize yet: the gateway's own. */
  #ensureInitialized (): void {
    if (this.#initialized || this.#cli === null) return
    this.#initialize({ type: 'control_request', request_id: gatewayInitId(), request: { subtype: 'initialize' } })
  }

  /** Ends the CLI: stdin closed, SIGTERM, SIGKILL. History and record stay. */
  async stop (why: string): Promise<void> {
    this.#disarmIdle()
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

  // ---- clients ----

  /**
   * Attaches a client. With `after`, it first gets every frame after that seq
   * (from the store), then live ones: no gap, no duplicate. `hello` comes first;
   * `onHello` runs right after it is sent, before the replay.
   */
  async attach (port: ClientPort, options: { role: Role, after?: number | undefined, onHello?: () => void }): Promise<void> {
    const att = this.#audience.add(port, options.role)
    this.#disarmIdle()
    const upTo = this.#events.committedSeq
    let from = upTo
    let resume: 'none' | 'ok' | 'gap' = 'none'
    let oldest: number | null = null
    if (options.after !== undefined) {
      from = Math.min(options.after, upTo)
      const first = await this.#events.firstSeq()
      oldest = first ?? null
      // Nothing readable although seqs after `from` were committed (e.g. Redis restarted empty): a gap too.
      // Unknown (store down, nothing held): try the replay, which reports where it stopped.
      const missing = first === null ? from < upTo : first !== undefined && first > from + 1
      resume = missing ? 'gap' : 'ok'
      if (missing) from = first === null ? upTo : (first as number) - 1
    }
    if (!this.#audience.has(port)) return
    if (options.role === 'controller') this.#audience.hold(att)
    const holder = this.#audience.holder
    port.send(gatewayFrame('hello', {
      session_id: this.id,
      client_id: port.id,
      role: holder === att ? 'controller' : 'observer',
      holder: holder?.port.id ?? null,
      status: this.#record.status,
      last_seq: upTo,
      resume,
      oldest_seq: oldest,
      store: this.#events.degraded ? 'degraded' : 'ok',
      pending_requests: this.#broker.list().map((p) => p.requestId)
    }))
    att.greeted = true
    if (options.role === 'controller') this.#audience.announceHolder(att)
    options.onHello?.()

    let cursor = from
    // Replayed up to here while another client held the session: control requests went out as notices.
    let noticedUpTo = from
    while (cursor < upTo) {
      let page
      try {
        page = (await readHistoryPage(this.#events, cursor, REPLAY_PAGE, REPLAY_PAGE_BYTES, upTo)).events
      } catch (err) {
        this.#log.warn({ err }, 'replay read failed')
        port.send(errorFrame('store_unavailable', `Replay stopped at seq ${cursor}: the event store did not answer`))
        break
      }
      if (page.length === 0 || !this.#audience.has(port)) break
      for (const event of page) {
        port.send(this.#audience.render(event, att))
        const wait = port.writable?.() ?? null
        if (wait !== null) await wait
      }
      cursor = (page[page.length - 1] as LogEvent).seq
      if (this.#audience.holder !== att) noticedUpTo = cursor
    }
    // Live frames held during the replay go out the same way; more may be held while it waits.
    const backlog = att.backlog ?? []
    for (let i = 0; i < backlog.length && this.#audience.has(port); i++) {
      const event = backlog[i] as LogEvent
      if (event.seq <= cursor) continue
      port.send(this.#audience.render(event, att))
      const wait = port.writable?.() ?? null
      if (wait !== null) await wait
    }
    att.backlog = null
    if (this.#audience.holder === att) this.#redeliver(att.port, noticedUpTo)
  }

  detach (port: ClientPort): void {
    const next = this.#audience.remove(port)
    if (next !== undefined) {
      this.#audience.announceHolder()
      // Only what it was sent as notices: later frames reach it live as the holder's. A client
      // still being replayed to gets its pending requests when its attach ends.
      if (next !== null && next.backlog === null) this.#redeliver(next.port, this.#events.committedSeq)
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
    if (frame.type === 'control_request') { this.#clientRequest(port, frame); return }
    const fail = (code: ErrorCode, message?: string, extra: Record<string, unknown> = {}): void =>
      port.send(errorFrame(code, message ?? errorTable[code].message, extra))
    if (!this.#audience.isHolder(port)) {
      const requestId = frame.type === 'control_response' ? frame.response.request_id : frame.type === 'control_cancel_request' ? frame.request_id : undefined
      fail('not_holder', undefined, requestId === undefined ? {} : { request_id: requestId })
      return
    }
    if (frame.type === 'other_type' || frame.type === 'control_cancel_request') {
      const refused = frame.type === 'other_type' ? this.#otherTypeRefusal(frame) : null
      if (refused !== null) { fail(refused.code, refused.message); return }
      // The CLI decides what they mean (it ignores types it does not know): as sent, once it runs.
      if (this.#cli === null || this.#stopping) return
      this.#ensureInitialized()
      this.#writeCli(frame.type === 'other_type' ? frame.value : frame)
      return
    }
    if (frame.type === 'user') {
      if (frame.uuid !== undefined) {
        if (this.#seenUuids.has(frame.uuid)) return
        this.#seenUuids.add(frame.uuid)
        if (this.#seenUuids.size > UUID_MEMORY) this.#seenUuids.delete(this.#seenUuids.values().next().value as string)
      }
      if (this.#cli === null) {
        const refused = this.start()
        if (refused !== null) { fail(refused.code, refused.message); return }
      } else if (this.#stopping) {
        fail('session_not_running', 'The session is stopping; send again once it has stopped')
        return
      }
      this.#disarmIdle()
      this.#turnsPending++
      this.#ensureInitialized()
      this.#writeCli({ ...frame, session_id: this.id, parent_tool_use_id: frame.parent_tool_use_id ?? null })
      return
    }
    const result = this.answer(frame.response.request_id, frame.response, port.id)
    if (!result.ok) fail(result.code, result.message, { request_id: frame.response.request_id })
  }

  /**
   * A client's own control request. Every refusal is the answer an SDK waits
   * for: a control_response error with the request's id (and the code).
   */
  #clientRequest (port: ClientPort, frame: ControlRequestFrame): void {
    const id = frame.request_id
    const refuse = (code: ErrorCode, message?: string): void => port.send(controlErrorFrame(id, code, message ?? errorTable[code].message))
    if (!this.#audience.isHolder(port)) { refuse('not_holder'); return }
    const initialize = frame.request.subtype === 'initialize'
    // An initialize may start a stopped CLI (an SDK attaching with --resume starts with it).
    if (this.#stopping || (this.#cli === null && !initialize)) { refuse('session_not_running'); return }
    // CLIENT_CONTROL_ALLOW, stdio MCP servers, mode fields naming bypassPermissions, what initialize may carry.
    const refused = this.#deps.policy.checkClientRequest(frame.request, this.#deps.policyScope())
    if (refused !== null) { refuse(refused.code, refused.message); return }
    if (this.#clientRequests.has(id) || this.#broker.get(id) !== undefined) { refuse('duplicate_request_id'); return }
    if (initialize) {
      // Kept with the session: a restarted or resumed CLI gets it again.
      this.#record.initialize = frame.request
      this.#persist()
    }
    if (this.#cli === null) {
      const failed = this.start(frame)
      if (failed !== null) { refuse(failed.code, failed.message); return }
    } else if (initialize && !this.#initialized) {
      this.#initialize(frame)
    } else {
      this.#ensureInitialized()
      this.#writeCli(frame)
    }
    const timer = setTimeout(() => {
      this.#clientRequests.delete(id)
      refuse('request_timeout')
    }, this.#deps.limits.clientRequestTimeoutMs)
    timer.unref()
    this.#clientRequests.set(id, { port, timer })
  }

  /** Unknown frame types pass, but for one that would set the CLI's environment (unless the policy lets it). */
  #otherTypeRefusal (frame: OtherTypeFrame): { code: ErrorCode, message: string } | null {
    if (frame.value.type !== 'update_environment_variables') return null
    return this.#deps.policy.checkClientRequest({ subtype: frame.value.type }, this.#deps.policyScope())
  }

  /** Answers a pending CLI control request (WebSocket holder or HTTP). First valid answer wins. */
  answer (requestId: string, input: AnswerInput, by: string): AnswerResult {
    const pending = this.#broker.get(requestId)
    if (pending === undefined) return { ok: false, code: this.#broker.wasResolved(requestId) ? 'already_resolved' : 'unknown_request' }
    // What the answer grants (updatedPermissions); a refusal leaves the request pending for a better answer.
    if (input.subtype === 'success') {
      const refused = this.#deps.policy.checkAnswer(pending.subtype, input.response, this.#deps.policyScope())
      if (refused !== null) return { ok: false, code: refused.code, message: refused.message }
    }
    let response: Record<string, unknown>
    let decision: string
    // The answer as the holder sent it (hook outputs, MCP JSON-RPC payloads, fields of newer SDKs), completed where the CLI needs it.
    if (input.subtype === 'error') {
      response = { ...input, subtype: 'error', request_id: requestId, error: input.error ?? 'error' }
      decision = pending.subtype === 'can_use_tool' ? 'denied' : 'answered'
    } else if (pending.subtype === 'can_use_tool') {
      const parsed = permissionAnswer.safeParse(input.response)
      if (!parsed.success) return { ok: false, code: 'invalid_frame', message: 'A can_use_tool answer needs response.behavior "allow" or "deny"' }
      response = { ...input, subtype: 'success', request_id: requestId, response: completePermissionAnswer(parsed.data, pending.request) }
      decision = parsed.data.behavior === 'allow' ? 'allowed' : 'denied'
    } else {
      response = { ...input, subtype: 'success', request_id: requestId, response: input.response ?? {} }
      decision = 'answered'
    }
    this.#broker.take(requestId)
    this.#writeCli({ type: 'control_response', response })
    this.#recordResolved(pending, decision, by)
    return { ok: true, decision }
  }

  // ---- CLI output ----

  #onLine (line: string): void {
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
        this.#broker.add({ requestId, subtype: String(request.subtype), request, seq, frame, createdAt: Date.now() })
        this.#disarmIdle()
        return
      }
      case 'control_cancel_request': {
        this.#events.push((s) => withSeq(line, msg, s))
        const pending = this.#broker.take(String(msg.request_id))
        if (pending !== undefined) this.#recordResolved(pending, 'cancelled', null)
        this.#armIdle()
        return
      }
      case 'control_response': {
        this.#events.push((s) => withSeq(line, msg, s))
        const id = isRecord(msg.response) ? String(msg.response.request_id) : ''
        const waiting = this.#clientRequests.get(id)
        if (waiting !== undefined) { clearTimeout(waiting.timer); this.#clientRequests.delete(id) }
        return
      }
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
    const message = err instanceof Error ? err.message : String(err)
    this.#log.error({ err }, 'CLI could not be started')
    const info: ExitInfo = { code: null, signal: null, stderr_tail: [], reason: 'spawn_failed', at: new Date().toISOString(), error: message }
    this.#record.exit = info
    this.#setStatus('exited', { exit: info })
    if (err instanceof GatewayError) return err
    const code = (err as { code?: unknown }).code
    return new GatewayError('cli_start_failed', typeof code === 'string' ? `The CLI could not be started (${code})` : undefined)
  }

  #onExit (exit: CliExit): void {
    this.#cli = null
    this.#disarmIdle()
    if (this.#initHold !== null) clearTimeout(this.#initHold)
    this.#initHold = null
    const stopped = this.#stopping
    this.#stopping = false
    this.#turnsPending = 0
    for (const pending of this.#broker.takeAll()) this.#recordResolved(pending, 'cancelled', null)
    for (const [id, waiting] of this.#clientRequests) {
      clearTimeout(waiting.timer)
      waiting.port.send(controlErrorFrame(id, 'session_not_running', 'The CLI exited before answering'))
    }
    this.#clientRequests.clear()
    const info: ExitInfo = {
      code: exit.code,
      signal: exit.signal,
      stderr_tail: exit.stderrTail,
      reason: exit.spawnError !== undefined ? 'spawn_failed' : stopped ? 'stopped' : 'exited',
      at: new Date().toISOString(),
      ...(exit.spawnError === undefined ? {} : { error: exit.spawnError })
    }
    this.#record.exit = info
    this.#setStatus(stopped ? 'stopped' : 'exited', { exit: info })
  }

  // ---- permissions ----

  #timedOut (pending: PendingRequest): void {
    const response = pending.subtype === 'can_use_tool'
      ? { subtype: 'success', request_id: pending.requestId, response: timeoutDenial(pending.request, this.#deps.limits.permissionTimeoutMs) }
      : { subtype: 'error', request_id: pending.requestId, error: `No client answered within ${this.#deps.limits.controlRequestTimeoutMs} ms` }
    this.#writeCli({ type: 'control_response', response })
    this.#recordResolved(pending, 'timed_out', null)
  }

  #recordResolved (pending: PendingRequest, decision: string, by: string | null): void {
    const subtype = pending.subtype === 'can_use_tool' ? 'permission_resolved' : 'request_resolved'
    this.#events.push((s) => gatewayFrame(subtype, {
      request_id: pending.requestId,
      request_subtype: pending.subtype,
      decision,
      by
    }, s))
    this.#armIdle()
  }

  /** Sends a new holder the pending requests it has not been given in full. */
  #redeliver (port: ClientPort, seenUpTo: number): void {
    for (const pending of this.#broker.list()) {
      if (pending.seq <= seenUpTo) port.send(pending.frame)
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
    const ms = this.#deps.limits.idleTimeoutMs
    if (ms <= 0 || this.#idleTimer !== null || this.#cli === null || this.#stopping) return
    if (this.#audience.size > 0 || this.#turnsPending > 0 || this.#broker.size > 0) return
    this.#idleTimer = setTimeout(() => {
      this.#idleTimer = null
      void this.stop('idle')
    }, ms)
    this.#idleTimer.unref()
  }

  #disarmIdle (): void {
    if (this.#idleTimer !== null) clearTimeout(this.#idleTimer)
    this.#idleTimer = null
  }
}

/** Request ids of the gateway's own initialize requests (their answers are recorded like any other). */
function gatewayInitId (): string {
  return `gw_init_${randomUUID()}`
}
