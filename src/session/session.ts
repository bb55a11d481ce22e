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
 * the ControlPlane (src/control/), whose effects are carried out by the
 * session's parts (session-parts.ts).
 *
 * Across nodes, the session's lease says where its CLI may run
 * (session-lease.ts); a node that does not hold it follows the log
 * (session-follower.ts), and HTTP requests are done where the CLI runs
 * (owner-calls.ts). The CLI process itself is session-cli.ts's, a client's
 * attach client-attach.ts's.
 *
 * No fastify or ws here: clients are `ClientPort`s, the CLI a `CliHandle`.
 */
import type { GatewayError } from '../errors.js'
import type { AnswerInput, AnswerResult } from '../control/control-effects.js'
import type { PendingRequest } from '../control/pending-requests.js'
import type { ClientFrame, ControlRequestFrame } from '../protocol/client-frames.js'
import { type Lease, type SessionRecord, type SessionStatus, isFinal } from '../store/store.js'
import type { EventLog } from './event-log.js'
import type { ClientPort, Role } from './audience.js'
import { type AttachOptions, attachClient } from './client-attach.js'
import { gatewayFrame } from './frames.js'
import type { OwnerOp } from './owner-calls.js'
import type { SessionDeps as BaseDeps } from './session-deps.js'
import { SessionParts } from './session-parts.js'
import { unresolvedRequests } from './unresolved-requests.js'
import { sessionView } from './session-view.js'

export type { ClientPort, EndReason, Role } from './audience.js'
export type { AnswerInput, AnswerResult } from '../control/control-effects.js'
export type { SessionLimits } from './session-deps.js'

export type SessionDeps = BaseDeps<Session>

export class Session {
  readonly id: string
  readonly #p: SessionParts

  /** `lease`: this node's lease when it owns the session (created or taken here), else null. */
  constructor (record: SessionRecord, deps: SessionDeps, lease: Lease | null = null) {
    this.id = record.id
    this.#p = new SessionParts(this, record, deps, lease)
  }

  get tenant (): string { return this.#p.record.tenant }
  get status (): SessionStatus { return this.#p.record.status }
  get running (): boolean { return this.#p.cli.running }
  get degraded (): boolean { return this.#p.events.degraded }
  get clientCount (): number { return this.#p.audience.size }
  /** Attached clients by their role now (the holder controls); read by the metrics. */
  get clientRoles (): { controller: number, observer: number } { return this.#p.audience.roles }
  get pendingRequests (): PendingRequest[] { return this.#p.control.list() }
  get events (): EventLog { return this.#p.events }
  /** True while this node holds the session's lease. */
  get owned (): boolean { return this.#p.sessionLease.owned }
  /** True while this node follows the session's log as another node appends it. */
  get following (): boolean { return this.#p.follower.following }

  /** See SessionFollower.refresh: brings a session this node does not own up to date with the store. */
  refresh (): Promise<void> { return this.#p.follower.refresh() }
  /** See SessionFollower.statusFromLog: the log's last frame may know the status better than the record. */
  statusFromLog (): Promise<void> { return this.#p.follower.statusFromLog() }
  /** See SessionLease.own: takes the session's lease for this node, if no other live node holds it. */
  own (): Promise<boolean> { return this.#p.sessionLease.own() }
  /** See SessionLease.disown: gives the lease up once the CLI has stopped and everything is stored. */
  disown (): Promise<void> { return this.#p.sessionLease.disown() }
  /** See SessionLease.fence: another node owns the session now. */
  fence (): void { this.#p.sessionLease.fence() }

  /**
   * On the owner: a client of another node attaches (it got its hello and
   * replay there, and its node relays recorded frames). It takes part in the
   * holder rules like any client here; repeated attaches are heartbeats.
   *
   * `rejoin`: the client did not just attach, it is routed here again (the
   * session moved to this node, or its node lost the route): the newest
   * controller wins only on a fresh attach (PROTOCOL.md), so it holds the
   * session only when nobody does, else it is told who does and waits as a
   * controller candidate (it takes over when the holder leaves).
   */
  attachRemote (port: ClientPort, role: Role, options: { rejoin?: boolean } = {}): void {
    const p = this.#p
    if (p.audience.attachment(port) !== undefined) return
    const att = p.audience.add(port, role)
    att.backlog = null
    att.greeted = true
    p.idle.disarm()
    if (role !== 'controller') return
    const holder = p.audience.holder
    if (options.rejoin === true && holder !== null) {
      // Its node may still show it as the holder its previous owner said it was.
      p.audience.send(port, gatewayFrame('holder', { holder: holder.port.id, role: 'observer' }))
      return
    }
    p.audience.hold(att)
    p.audience.announceHolder()
    p.control.holderChanged(port, p.events.committedSeq)
  }

  /** On a client's node: its owner says whether it holds the session now (what recorded control requests it is shown in full). */
  remoteHolder (port: ClientPort, holds: boolean, upTo?: number): void { this.#p.follower.remoteHolder(port, holds, upTo) }
  /** On a client's node: a frame its owner sent it alone (`seq` when recorded; see SessionFollower.fromOwner). */
  fromOwner (port: ClientPort, frame: string, seq?: number): void { this.#p.follower.fromOwner(port, frame, seq) }
  /** On a client's node: the node its frames went to does not own the session (any more) or did not confirm `frames` (see SessionFollower.ownerMoved). */
  ownerMoved (port: ClientPort, frames: ClientFrame[]): void { this.#p.follower.ownerMoved(port, frames) }

  /** What REST callers see. */
  snapshot (): Record<string, unknown> {
    const p = this.#p
    return sessionView(p.record, {
      last_seq: p.events.lastSeq,
      clients: p.audience.size,
      holder: p.audience.holder?.port.id ?? null,
      pid: p.cli.pid,
      turn_running: p.turns.pending > 0,
      pending_requests: p.control.pendingCount,
      store: p.events.degraded ? 'degraded' : 'ok'
    })
  }

  /** Starts the CLI (`--resume` once the conversation is stored); `opening` is the holder's initialize that starts it. */
  start (opening?: ControlRequestFrame): GatewayError | null { return this.#p.cli.start(opening) }

  /**
   * Settles once the CLI start() began is known to run (at once when it
   * started synchronously), with the error when starting it failed after all
   * (what start() returns for a spawn that throws at once).
   */
  started (): Promise<GatewayError | null> { return this.#p.cli.started() }

  /** Ends the CLI: stdin closed, SIGTERM, SIGKILL. History and record stay. */
  async stop (why: string): Promise<void> { await this.#p.cli.stop(why) }

  /**
   * Waits (until `deadline`, ms since the epoch) for the turns running now,
   * and those that start meanwhile, to finish: a node that drains lets its
   * turns end before it stops their CLIs (SHUTDOWN_GRACE_MS).
   */
  drain (deadline: number): Promise<void> { return this.#p.turns.drain(deadline, () => this.#p.cli.running) }

  /** Stops the CLI and waits until every event is stored (gateway shutdown). */
  async close (deadlineMs: number): Promise<void> {
    const p = this.#p
    p.follower.stop()
    await this.stop('shutdown')
    // The CLI's end is recorded by its exit handler, which may run after stop() returned:
    // released before that, the lease would be gone when the 'stopped' record is written.
    await p.cli.exitHandled()
    await p.writes.settle(deadlineMs)
    await p.saves.save()
    await p.sessionLease.disowning
    // Any node may take the session at once (the next message resumes it there).
    const lease = p.sessionLease.surrender()
    if (lease !== null) {
      try { await p.deps.ownership.release(lease) } catch { /* it lapses by itself */ }
    }
    p.events.close()
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
    const p = this.#p
    const lost = (): boolean => p.sessionLease.owned && !p.cli.running && !isFinal(p.record.status)
    if (!lost()) return
    // Its prompts died with the process that held them: they end here, cancelled, before the status.
    const open = await unresolvedRequests(p.deps.store, this.id).catch((err: unknown) => {
      p.log.warn({ err: (err as Error).message }, 'could not read which requests the lost CLI left open; they are not marked ended')
      return []
    })
    if (!lost()) return
    for (const { requestId, subtype } of open) {
      p.apply({ kind: 'record', subtype: subtype === 'can_use_tool' ? 'permission_resolved' : 'request_resolved', fields: { request_id: requestId, request_subtype: subtype, decision: 'cancelled', by: null } })
    }
    p.statusRecorder.lost()
    await p.events.flush(1000)
    await p.writes.written
  }

  /**
   * Saves the record again as it is. For a store that answers again after
   * losing its data (Redis restarted without persistence): the session must
   * not wait for its next status change to be listed and loadable again.
   */
  async persistRecord (): Promise<void> {
    this.#p.writes.persist()
    await this.#p.writes.written
  }

  // ---- clients ----

  /**
   * Attaches a client. With `after`, it first gets every frame after that seq
   * (from the store), then live ones: no gap, no duplicate. `hello` comes first;
   * `onHello` runs right after it is sent, before the replay. `rejoin`: see AttachOptions.
   */
  async attach (port: ClientPort, options: AttachOptions): Promise<void> {
    await attachClient(this.#p, port, options)
  }

  detach (port: ClientPort): void {
    const p = this.#p
    p.deps.route?.detach(port)
    // Where another node runs the CLI, that node picks the next holder (SessionFollower.leaving).
    p.follower.leaving(port)
    const next = p.audience.remove(port)
    if (p.audience.size === 0) p.follower.stop()
    if (next !== undefined) {
      p.audience.announceHolder()
      // Only what it was sent as notices: later frames reach it live as the holder's. A client
      // still being replayed to gets its pending requests when its attach ends.
      if (next !== null && next.backlog === null) p.control.holderChanged(next.port, p.events.committedSeq)
    }
    p.armIdle()
  }

  /**
   * Handles a validated client frame (src/session/client-input.ts). Problems
   * go back to that client: a refused control_request as a control_response
   * error with its request_id, anything else as an error frame.
   */
  handleFrame (port: ClientPort, frame: ClientFrame): void {
    if (frame.type === 'keep_alive') return
    // Held while the lease is being taken, or sent to the node that runs the CLI (SessionLease.intercept).
    if (this.#p.sessionLease.intercept(port, frame)) return
    this.#p.clientInput.handle(port, frame)
  }

  /** On the owner: what an HTTP request made on another node asks (src/cluster/router.ts). */
  call (op: OwnerOp, args: unknown[]): Promise<unknown> { return this.#p.ownerCalls.call(op, args) }
  /** `answer`, done by whichever node runs the CLI (HTTP answers reach any node). */
  answerAnywhere (requestId: string, input: AnswerInput, by: string): Promise<AnswerResult> { return this.#p.ownerCalls.answer(requestId, input, by) }
  /** `stop`, done by whichever node runs the CLI. */
  stopAnywhere (why: string): Promise<void> { return this.#p.ownerCalls.stop(why) }
  /** `snapshot` as the node running the CLI has it (see OwnerCalls.snapshot). */
  snapshotAnywhere (): Promise<Record<string, unknown>> { return this.#p.ownerCalls.snapshot() }
  /** The pending CLI control requests, as the node running the CLI knows them. */
  pendingAnywhere (): Promise<PendingRequest[]> { return this.#p.ownerCalls.pending() }

  /** Answers a pending CLI control request (WebSocket holder or HTTP). First valid answer wins. */
  answer (requestId: string, input: AnswerInput, by: string): AnswerResult {
    return this.#p.control.answer(requestId, input, by)
  }
}
