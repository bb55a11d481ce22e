/**
 * A connection's open can_use_tool prompts: what is pending and whether it
 * can be answered here, asking onPermission once per prompt, sending
 * answers (on the WebSocket as holder, over HTTP otherwise) and saying how
 * they ended, and reading over HTTP the prompts an attach did not show.
 * The connection (session-connection.ts) feeds it the frames and owns the
 * socket; this keeps the bookkeeping in one place.
 */
import { AnswerOutcomes } from './answer-outcomes.js'
import type { AnswerOutcome, ConnectOptions, ConnectionEvents, PermissionDecision, PermissionRequest } from './connection-types.js'
import { GatewayRequestError } from './errors.js'
import type { Role } from './frames.js'
import type { GatewayClient } from './gateway-client.js'
import type { Outbox } from './outbox.js'
import { allowDecision, alwaysAllowDecision, permissionAnswerFrame, permissionFromControlRequest, permissionFromPending } from './permissions.js'

type Emit = <K extends keyof ConnectionEvents>(event: K, payload: ConnectionEvents[K]) => void

export interface PermissionDeskDeps {
  sessionId: string
  client: Pick<GatewayClient, 'answerPermission' | 'pendingRequests'>
  /** The connection's outbox: a holder's answers go through it. */
  outbox: Outbox
  onPermission: ConnectOptions['onPermission']
  /** The connection's role now (before its first hello: the role it asked for). */
  role: () => Role
  /** True once the connection was closed for good. */
  closed: () => boolean
  emit: Emit
}

export class PermissionDesk {
  /** Open can_use_tool prompts by request id. */
  readonly pending = new Map<string, PermissionRequest>()
  readonly #deps: PermissionDeskDeps
  /** Prompts onPermission was called for (so a redelivery does not call it twice). */
  readonly #asked = new Set<string>()
  readonly #outcomes = new AnswerOutcomes()
  /** The last hello's pending_requests, less those resolved since. */
  #helloPending = new Set<string>()

  constructor (deps: PermissionDeskDeps) {
    this.#deps = deps
  }

  /** A hello: this connection is `clientId` now; `pendingRequests` were open at its last_seq. */
  hello (clientId: string, pendingRequests: string[]): void {
    this.#outcomes.attachedAs(clientId)
    this.#helloPending = new Set(pendingRequests)
  }

  /**
   * A recorded control_request; returns the events to emit after the frame.
   * `replayedUpTo`: the hello's last_seq while its replay runs, else null.
   */
  opened (frame: { seq: number, request_id?: unknown, request?: unknown }, replayedUpTo: number | null): Array<() => void> {
    const request = permissionFromControlRequest(frame, true)
    if (request === null) return []
    this.pending.set(request.requestId, request)
    // Replayed, and not pending at the hello: answered already (its permission_resolved follows), nothing to ask.
    const answered = replayedUpTo !== null && frame.seq <= replayedUpTo && !this.#helloPending.has(request.requestId)
    return answered ? [() => this.#deps.emit('permission', request)] : [() => this.#deps.emit('permission', request), () => this.#ask(request)]
  }

  /** A recorded request_pending notice (what an observer learns of a prompt). */
  noticed (frame: Record<string, unknown>): Array<() => void> {
    const request = permissionFromPending(frame as never)
    if (request === null || this.pending.has(request.requestId)) return []
    this.pending.set(request.requestId, request)
    return [() => this.#deps.emit('permission', request)]
  }

  /** The prompt ended; returns the emit of its permissionResolved. */
  resolve (requestId: string, decision: string, by: string | null): () => void {
    this.pending.delete(requestId)
    this.#asked.delete(requestId)
    // Not to be fetched any more (#fetchUnseen): it is no longer open.
    this.#helloPending.delete(requestId)
    this.#deps.outbox.resolved(requestId)
    this.#outcomes.ended(requestId, by)
    return () => this.#deps.emit('permissionResolved', { requestId, decision, by })
  }

  /** A pending control_request handed out again with a seq already delivered (a new holder, a reconnect). */
  redelivered (frame: { seq: number, request_id?: unknown, request?: unknown }): void {
    const request = permissionFromControlRequest(frame, true)
    if (request === null || this.#deps.outbox.resendAnswer(request.requestId)) return
    const known = this.pending.get(request.requestId)
    this.pending.set(request.requestId, request)
    if (known === undefined || !known.canAnswer) this.#deps.emit('permission', request)
    this.#ask(request)
  }

  /** The replay reached the hello's last_seq (`upTo`): forget prompts that ended unseen, read those not shown. */
  caughtUp (upTo: number): void {
    for (const request of [...this.pending.values()]) {
      // Open before the hello but not pending at it: it ended in seqs history no longer has.
      if (request.seq <= upTo && !this.#helloPending.has(request.requestId)) this.resolve(request.requestId, 'unknown', null)()
    }
    this.#fetchUnseen()
  }

  /** The connection no longer holds the session: its prompts cannot be answered on the WebSocket. */
  notHolder (): void {
    for (const [id, request] of this.pending) if (request.canAnswer) this.pending.set(id, { ...request, canAnswer: false })
  }

  /**
   * The gateway refused something about `requestId` with `code` (an error
   * frame). Returns true when that is expected: the lost race of an answer
   * sent here, or a resent answer's refusal.
   */
  refused (requestId: string, code: string): boolean {
    const expected = this.#outcomes.refused(requestId, code) ||
      (this.#deps.outbox.wasResent(requestId) && (code === 'already_resolved' || code === 'unknown_request'))
    // The answer kept for a resend is done with: another answer won, or this one was refused and its
    // outcome said so. Resent when the prompt is handed out again, it would be refused again (an
    // error the user did not cause) or, for a transient refusal, taken after being reported refused.
    this.#deps.outbox.resolved(requestId)
    return expected
  }

  /** The outbox dropped a frame after a 1009 close: an answer among them will not be sent. */
  dropped (ref: { kind: string, id: string } | null): void {
    if (ref?.kind === 'answer') this.#outcomes.settle(ref.id, 'refused', 'frame_too_large')
  }

  /** The connection was closed for good. */
  close (): void {
    this.#outcomes.settleAll('connection_closed')
  }

  /** Allow + the request's permission_suggestions (unknown: a plain allow). */
  alwaysAllowDecision (requestId: string): PermissionDecision {
    const request = this.pending.get(requestId)
    return request === undefined ? allowDecision() : alwaysAllowDecision(request)
  }

  /**
   * The holder answers on the WebSocket (queued while reconnecting); a client
   * that does not hold the session answers over HTTP, which needs no hold.
   * Never rejects: the outcome says whether the answer was taken.
   */
  answer (requestId: string, decision: PermissionDecision): Promise<AnswerOutcome> {
    if (this.#deps.closed()) return Promise.resolve({ requestId, outcome: 'refused', code: 'connection_closed' })
    const request = this.pending.get(requestId)
    if (decision.behavior === 'allow' && decision.updatedInput === undefined && request?.canAnswer === true) {
      decision = { ...decision, updatedInput: request.input }
    }
    if (this.#deps.role() === 'observer') {
      return this.#deps.client.answerPermission(this.#deps.sessionId, requestId, decision).then(
        (): AnswerOutcome => ({ requestId, outcome: 'answered' }),
        (err: unknown): AnswerOutcome => {
          if (err instanceof GatewayRequestError && err.code === 'already_resolved') return { requestId, outcome: 'already_resolved' }
          this.#deps.emit('error', toError(err))
          return { requestId, outcome: 'refused', code: err instanceof GatewayRequestError ? err.code : 'request_failed' }
        })
    }
    const outcome = this.#outcomes.wait(requestId)
    this.#deps.outbox.answer(requestId, JSON.stringify(permissionAnswerFrame(requestId, decision)))
    return outcome
  }

  #ask (request: PermissionRequest): void {
    const handler = this.#deps.onPermission
    if (handler === undefined || !request.canAnswer || this.#asked.has(request.requestId)) return
    this.#asked.add(request.requestId)
    let result: ReturnType<typeof handler>
    try {
      result = handler(request)
    } catch (err) {
      this.#deps.emit('error', toError(err))
      return
    }
    Promise.resolve(result).then((decision) => {
      if (decision !== undefined && this.pending.has(request.requestId)) void this.answer(request.requestId, decision)
    }, (err: unknown) => this.#deps.emit('error', toError(err)))
  }

  /**
   * Prompts open at the hello that neither the replay nor a notice showed
   * (they are at or before where this attach started, e.g. `after: 'live'`):
   * an observer gets nothing more about them on the socket, so they are
   * read over HTTP. A holder is handed each again in full by the gateway.
   */
  #fetchUnseen (): void {
    if (this.#deps.role() === 'controller' || ![...this.#helloPending].some((id) => !this.pending.has(id))) return
    this.#deps.client.pendingRequests(this.#deps.sessionId).then((requests) => {
      for (const r of requests) {
        // Still open as far as this connection knows, and not yet known to it.
        if (this.#deps.closed() || !this.#helloPending.has(r.request_id) || this.pending.has(r.request_id)) continue
        const request = permissionFromControlRequest({ seq: r.seq, request_id: r.request_id, request: { ...r.request, subtype: r.subtype } }, false)
        if (request === null) continue
        this.pending.set(request.requestId, request)
        this.#deps.emit('permission', request)
      }
    }, (err: unknown) => this.#deps.emit('error', toError(err)))
  }
}

function toError (err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err))
}
