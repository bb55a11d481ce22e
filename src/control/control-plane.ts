/**
 * The control-request plane of one session, as one module with no I/O.
 *
 * Two kinds of request cross the gateway. CLI → client (permission prompts,
 * hook callbacks, MCP messages): pending in the session, never in a
 * connection, offered again to each new holder, ended exactly once (first
 * valid answer wins, timeout, `control_cancel_request`, CLI exit). Client →
 * CLI: the policy decides, refusals are `control_response` errors with the
 * request's id, and each forwarded request waits a bounded time for the
 * CLI's answer. The CLI's one `initialize` (the holder's, kept with the
 * session, or the gateway's after INITIALIZE_HOLD_MS) is settled here too.
 *
 * Inputs are method calls from the session; outputs are `ControlEffect`s
 * handed to `effects` synchronously, in order. Only the CLI's state and
 * starting a stopped CLI are asked of the session directly.
 */
import { randomUUID } from 'node:crypto'
import { type ErrorCode, errorTable } from '../errors.js'
import type { MetricsSink, PermissionOutcome } from '../metrics/sink.js'
import type { ControlRequestFrame } from '../protocol/client-frames.js'
import { completeAnswer, timeoutAnswer } from './answers.js'
import { type AnswerInput, type AnswerResult, type CliState, type ControlEffect, type ControlPort, type Timers, realTimers } from './control-effects.js'
import { controlErrorFrame } from './control-error.js'
import type { ControlPolicy, PolicyScope, Refusal } from './control-policy.js'
import { type PendingRequest, PendingRequests } from './pending-requests.js'

export interface ControlPlaneOptions<P extends ControlPort> {
  policy: ControlPolicy
  /** The tenant's workspace roots and this session's folder, for directories in grants. */
  policyScope: () => PolicyScope
  permissionTimeoutMs: number
  controlRequestTimeoutMs: number
  clientRequestTimeoutMs: number
  /** How long a new CLI's initialize waits for the holder's own (INITIALIZE_HOLD_MS). */
  initializeHoldMs: number
  /** The holder's initialize kept with the session record, if any. */
  initialize?: Record<string, unknown> | undefined
  cliState: () => CliState
  /** Starts the stopped CLI with a client's initialize as its first line; why not, when it cannot. */
  startCli: (opening: ControlRequestFrame) => Refusal | null
  effects: (effect: ControlEffect<P>) => void
  logger: { warn: (fields: object, message: string) => void }
  timers?: Timers | undefined
  /** Told how long each permission prompt waited and how it ended. */
  metrics?: Pick<MetricsSink, 'permissionAnswered'> | undefined
}

export class ControlPlane<P extends ControlPort = ControlPort> {
  readonly #o: ControlPlaneOptions<P>
  readonly #timers: Timers
  readonly #pending: PendingRequests
  /**
   * Client requests waiting on the CLI; made on first use (most sessions never send one).
   * `ports`: who asked under that id, the first asker and whoever sent it again while in flight.
   */
  #clientRequests: Map<string, { ports: P[], timer: unknown }> | null = null
  #kept: Record<string, unknown> | undefined
  /** False from spawn until this CLI was given its one initialize (the holder's, or the gateway's). */
  #initialized = true
  #initHold: unknown = null

  constructor (options: ControlPlaneOptions<P>) {
    this.#o = options
    this.#timers = options.timers ?? realTimers
    this.#kept = options.initialize
    this.#pending = new PendingRequests({
      permissionTimeoutMs: options.permissionTimeoutMs,
      controlTimeoutMs: options.controlRequestTimeoutMs,
      timers: this.#timers,
      onTimeout: (pending) => this.#timedOut(pending)
    })
  }

  /** Pending CLI requests (client requests waiting on the CLI are not counted). */
  get pendingCount (): number { return this.#pending.size }
  /** Pending CLI requests, oldest first. */
  list (): PendingRequest[] { return this.#pending.list() }

  // ---- the CLI's initialize ----

  /**
   * A CLI was spawned. Its initialize is `opening` (the holder's, which
   * started it), else the kept one, else held back up to INITIALIZE_HOLD_MS
   * for the holder's first frame.
   */
  cliStarted (opening?: ControlRequestFrame): void {
    this.#initialized = false
    if (opening !== undefined) { this.#initialize(opening); return }
    const stored = this.#storedInitialize()
    if (stored !== null) this.#initialize({ type: 'control_request', request_id: gatewayInitId(), request: stored })
    else if (this.#o.initializeHoldMs <= 0) this.ensureInitialized()
    // The CLI prints nothing before its initialize: the wait is bounded so `running` still comes.
    else this.#initHold = this.#timers.set(() => this.ensureInitialized(), this.#o.initializeHoldMs)
  }

  /** Before anything else reaches a CLI that has no initialize yet: the gateway's own. */
  ensureInitialized (): void {
    if (this.#initialized || this.#o.cliState() === 'stopped') return
    this.#initialize({ type: 'control_request', request_id: gatewayInitId(), request: { subtype: 'initialize' } })
  }

  /** A client line for the CLI (user message, cancel, unknown type), after the CLI's initialize. */
  toCli (message: Record<string, unknown>): void {
    this.ensureInitialized()
    this.#write(message)
  }

  /** The kept initialize, if the policy still lets it through. */
  #storedInitialize (): Record<string, unknown> | null {
    const stored = this.#kept
    if (stored === undefined) return null
    const refused = this.#o.policy.checkClientRequest(stored, this.#o.policyScope())
    if (refused === null) return stored
    this.#o.logger.warn({ code: refused.code }, 'stored initialize refused by the control policy; the CLI gets the gateway\'s')
    return null
  }

  #initialize (frame: Record<string, unknown>): void {
    this.#clearHold()
    this.#initialized = true
    this.#write(frame)
  }

  #clearHold (): void {
    if (this.#initHold !== null) this.#timers.clear(this.#initHold)
    this.#initHold = null
  }

  // ---- client → CLI ----

  /**
   * A client's own control request. Every refusal is the answer an SDK waits
   * for: a control_response error with the request's id (and the code).
   */
  clientRequest (port: P, frame: ControlRequestFrame, holder: boolean): void {
    const id = frame.request_id
    const refuse = (code: ErrorCode, message?: string): void => this.#send(port, controlErrorFrame(id, code, message ?? errorTable[code].message))
    if (!holder) { refuse('not_holder'); return }
    const initialize = frame.request.subtype === 'initialize'
    const cli = this.#o.cliState()
    // An initialize may start a stopped CLI (an SDK attaching with --resume starts with it).
    if (cli === 'stopping' || (cli === 'stopped' && !initialize)) { refuse('session_not_running'); return }
    // CLIENT_CONTROL_ALLOW, stdio MCP servers, mode fields naming bypassPermissions, what initialize may carry.
    const refused = this.#o.policy.checkClientRequest(frame.request, this.#o.policyScope())
    if (refused !== null) { refuse(refused.code, refused.message); return }
    const inFlight = this.#clientRequests?.get(id)
    if (inFlight !== undefined || this.#pending.get(id) !== undefined) {
      // A client that reconnected sends what it has no answer for again, and waits for the original's:
      // the CLI's is recorded (its replay has it), the gateway's own (timeout, exit) is owed to this connection too.
      if (inFlight !== undefined && !inFlight.ports.includes(port)) inFlight.ports.push(port)
      refuse('duplicate_request_id')
      return
    }
    if (initialize) {
      this.#kept = frame.request
      this.#o.effects({ kind: 'keep_initialize', request: frame.request })
    }
    if (cli === 'stopped') {
      const failed = this.#o.startCli(frame)
      if (failed !== null) { refuse(failed.code, failed.message); return }
    } else if (initialize && !this.#initialized) {
      this.#initialize(frame)
    } else {
      this.toCli(frame)
    }
    const ports = [port]
    const timer = this.#timers.set(() => {
      this.#clientRequests?.delete(id)
      for (const to of ports) this.#send(to, controlErrorFrame(id, 'request_timeout', errorTable.request_timeout.message))
    }, this.#o.clientRequestTimeoutMs)
    this.#clientRequests ??= new Map()
    this.#clientRequests.set(id, { ports, timer })
  }

  /** The CLI answered a request (a client's, or its initialize): it no longer times out. */
  cliResponse (requestId: string): void {
    const waiting = this.#clientRequests?.get(requestId)
    if (waiting === undefined) return
    this.#timers.clear(waiting.timer)
    this.#clientRequests?.delete(requestId)
  }

  /** A user message, unless its text is a slash command the policy refuses. */
  checkUserMessage (content: unknown): Refusal | null {
    return this.#o.policy.checkUserMessage(content)
  }

  /** Unknown frame types pass, but for one that would set the CLI's environment (unless the policy lets it). */
  checkOtherType (value: Record<string, unknown> & { type: string }): Refusal | null {
    if (value.type !== 'update_environment_variables') return this.#o.policy.checkOtherFrame(value)
    return this.#o.policy.checkClientRequest({ subtype: value.type }, this.#o.policyScope())
  }

  // ---- CLI → client ----

  /** The CLI asked something (recorded at `seq` as `frame`): pending until answered, timed out or cancelled. */
  cliRequest (requestId: string, request: Record<string, unknown>, seq: number, frame: string): void {
    this.#pending.add({ requestId, subtype: String(request.subtype), request, seq, frame, createdAt: this.#timers.now() })
  }

  /** The CLI withdrew a request (`control_cancel_request`). */
  cliCancel (requestId: string): void {
    const pending = this.#pending.take(requestId)
    if (pending !== undefined) this.#resolved(pending, 'cancelled', null)
  }

  /** Answers a pending CLI request (WebSocket holder or HTTP). First valid answer wins. */
  answer (requestId: string, input: AnswerInput, by: string): AnswerResult {
    const pending = this.#pending.get(requestId)
    if (pending === undefined) return { ok: false, code: this.#pending.wasResolved(requestId) ? 'already_resolved' : 'unknown_request' }
    // Stopping: its stdin is closed, the answer could not reach it. The prompt stays pending and ends cancelled with the exit.
    if (this.#o.cliState() !== 'running') return { ok: false, code: 'session_not_running', message: 'The CLI is stopping and can no longer read an answer; the prompt ends cancelled with it' }
    // What the answer grants (updatedPermissions); a refusal leaves the request pending for a better answer.
    if (input.subtype === 'success') {
      const refused = this.#o.policy.checkAnswer(pending.subtype, input.response, this.#o.policyScope())
      if (refused !== null) return { ok: false, code: refused.code, message: refused.message }
    }
    const done = completeAnswer(pending, input)
    if ('invalid' in done) return { ok: false, code: 'invalid_frame', message: done.invalid }
    this.#pending.take(requestId)
    this.#write({ type: 'control_response', response: done.response })
    this.#resolved(pending, done.decision, by, input.subtype === 'error' ? 'error' : undefined)
    return { ok: true, decision: done.decision }
  }

  /** A new holder that saw the requests up to `seenUpTo` only as notices gets them in full. */
  holderChanged (port: P, seenUpTo: number): void {
    for (const pending of this.#pending.list()) {
      if (pending.seq <= seenUpTo) this.#send(port, pending.frame, pending.seq)
    }
  }

  /** The CLI exited: every request either way ends now. */
  cliExited (): void {
    this.#clearHold()
    for (const pending of this.#pending.takeAll()) this.#resolved(pending, 'cancelled', null)
    for (const [id, waiting] of this.#clientRequests ?? []) {
      this.#timers.clear(waiting.timer)
      for (const to of waiting.ports) this.#send(to, controlErrorFrame(id, 'session_not_running', 'The CLI exited before answering'))
    }
    this.#clientRequests?.clear()
  }

  #timedOut (pending: PendingRequest): void {
    // Stopping: stdin is closed and the session is ending, so the request was withdrawn, not left
    // unanswered (docs/PROTOCOL.md); nothing could reach the CLI, which exits without it.
    if (this.#o.cliState() !== 'running') { this.#resolved(pending, 'cancelled', null); return }
    this.#write({ type: 'control_response', response: timeoutAnswer(pending, this.#o.permissionTimeoutMs, this.#o.controlRequestTimeoutMs) })
    this.#resolved(pending, 'timed_out', null)
  }

  /** `outcome` for the metrics when the decision alone does not say it (an error answer to a prompt). */
  #resolved (pending: PendingRequest, decision: string, by: string | null, outcome?: PermissionOutcome): void {
    if (pending.subtype === 'can_use_tool') {
      this.#o.metrics?.permissionAnswered(outcome ?? OUTCOMES[decision] ?? 'error', (this.#timers.now() - pending.createdAt) / 1000)
    }
    this.#o.effects({
      kind: 'record',
      subtype: pending.subtype === 'can_use_tool' ? 'permission_resolved' : 'request_resolved',
      fields: { request_id: pending.requestId, request_subtype: pending.subtype, decision, by }
    })
  }

  #write (message: Record<string, unknown>): void {
    this.#o.effects({ kind: 'write_cli', message })
  }

  /** `seq` for a recorded frame (a pending request's own), none for a per-connection answer. */
  #send (to: P, frame: string, seq?: number): void {
    this.#o.effects(seq === undefined ? { kind: 'send', to, frame } : { kind: 'send', to, frame, seq })
  }
}

/** A prompt's recorded decision as a metrics outcome. */
const OUTCOMES: Record<string, PermissionOutcome> = { allowed: 'allow', denied: 'deny', timed_out: 'timeout', cancelled: 'cancelled' }

/** Request ids of the gateway's own initialize requests (their answers are recorded like any other). */
function gatewayInitId (): string {
  return `gw_init_${randomUUID()}`
}
