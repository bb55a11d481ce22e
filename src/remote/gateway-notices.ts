/**
 * The gateway's own frames (`type: 'gateway'`) as they bear on the host:
 * none is printed, but each moves something the host sees. A hello resumes
 * the attach (answers lost with the previous connection go again), a status
 * may end claude-remote as the CLI's exit would, an error refusing a host
 * request becomes the control_response an SDK understands, and the
 * request notices tell a prompt redelivered after a reconnect (or after
 * another controller held the session) from one already printed.
 */
import type { CredentialRenewal } from './credential-renewal.js'
import type { GatewayLink } from './gateway-link.js'
import type { GatewayOutbox } from './gateway-outbox.js'
import { refusalAnswer } from './host-answers.js'
import type { HostInput } from './host-input.js'
import type { SessionEnding } from './session-ending.js'
import { isRecord } from '../protocol/is-record.js'

/** Codes of gateway errors that answer a user line (no request_id): that line starts no turn. */
const USER_REFUSALS = new Set(['not_holder', 'session_not_running', 'too_many_sessions', 'tenant_session_limit', 'shutting_down', 'cli_start_failed', 'invalid_frame', 'invalid_json'])

export interface GatewayNoticesDeps {
  link: GatewayLink
  outbox: GatewayOutbox
  renewal: CredentialRenewal
  input: HostInput
  ending: SessionEnding
  /** The host's answers to CLI prompts, by request id, kept until the gateway says the request ended (cli-prompts.ts's, shared). */
  answers: Map<string, string>
  /** CLI prompts given to the host and not answered yet, by request id (cli-prompts.ts's, shared). */
  prompts: Map<string, string>
  /** Highest seq given to the host (-1 until the first hello of an attach without replay), and its update. */
  seenSeq: () => number
  setSeenSeq: (seq: number) => void
  /** Turns running or queued, and one fewer (a user line the gateway refused starts none). */
  turns: () => number
  turnRefused: () => void
  /** One line to the host (nothing once it is silenced). */
  out: (line: string) => void
  /** The host's request `id` got its answer: an end waiting for it need not any more. */
  hostAnswerGiven: (id: string) => void
  /** Ends the session if stdin is closed and nothing is left running. */
  maybeEnd: () => void
  /** The CLI exited, or was stopped mid-turn: claude-remote ends with `code`, without a DELETE. */
  endWithoutStop: (code: number) => void
  warn: (message: string) => void
  debug: (message: string) => void
}

export class GatewayNotices {
  readonly #deps: GatewayNoticesDeps
  #helloPending = new Set<string>()
  /** CLI control requests seen only as `request_pending` (another controller held the session): sent in full, same seq, once claude-remote holds it again. */
  readonly #noticed = new Set<string>()

  constructor (deps: GatewayNoticesDeps) {
    this.#deps = deps
  }

  /** True when the CLI's control request `id` comes again: pending at the last hello, or seen only as `request_pending`. */
  redelivered (id: string): boolean {
    return this.#helloPending.has(id) || this.#noticed.has(id)
  }

  /** One `type: 'gateway'` frame. */
  handle (frame: Record<string, unknown>): void {
    switch (frame.subtype) {
      case 'hello': this.#hello(frame); return
      case 'status': this.#status(frame); return
      case 'permission_resolved':
      case 'request_resolved':
        if (typeof frame.request_id === 'string') {
          this.#deps.answers.delete(frame.request_id)
          this.#deps.prompts.delete(frame.request_id)
          this.#noticed.delete(frame.request_id)
        }
        this.#advance(frame.seq)
        return
      case 'error': this.#gatewayError(frame); return
      case 'credential': this.#deps.renewal.deadline(frame.expires_at); return
      case 'request_pending':
        if (typeof frame.request_id === 'string') this.#noticed.add(frame.request_id)
        this.#advance(frame.seq)
        return
      default:
        this.#advance(frame.seq)
    }
  }

  #advance (seq: unknown): void {
    if (typeof seq === 'number' && seq > this.#deps.seenSeq()) this.#deps.setSeenSeq(seq)
  }

  #hello (frame: Record<string, unknown>): void {
    const { link, outbox } = this.#deps
    if (frame.resume === 'unavailable') {
      // The gateway's store could not serve the replay; it closes this connection (1013) and
      // nothing was skipped: come back later with the same ?after=.
      const hint = typeof frame.retry_after_ms === 'number' ? frame.retry_after_ms : 0
      link.retryAfter(hint)
      this.#deps.debug(`the gateway cannot replay after seq ${this.#deps.seenSeq()} yet (event store unavailable); retrying`)
      return
    }
    if (frame.role !== 'controller') {
      this.#deps.warn('the gateway attached claude-remote as an observer: its lines cannot reach the CLI')
    }
    if (frame.resume === 'gap') this.#deps.warn(`seqs ${String(frame.missing_from)}–${String(frame.missing_to)} are no longer in the gateway's history: some output was lost`)
    // Attached without replay (--resume): history before this point is not the host's.
    if (this.#deps.seenSeq() < 0 && typeof frame.last_seq === 'number') this.#deps.setSeenSeq(frame.last_seq)
    this.#helloPending = new Set(Array.isArray(frame.pending_requests) ? frame.pending_requests.map(String) : [])
    const ws = link.attached()
    // Answers that may have been lost with the previous connection (a second one is refused, harmlessly).
    for (const id of this.#helloPending) {
      const answer = this.#deps.answers.get(id)
      if (answer !== undefined && !outbox.isQueued(answer)) ws.send(answer)
    }
    // What went out on earlier connections unconfirmed waits for the replay: an answer given meanwhile is in it.
    const nothingReplayed = frame.resume === 'gap' && frame.oldest_seq === null
    const resendAt = typeof frame.last_seq === 'number' && !nothingReplayed ? frame.last_seq : -1
    outbox.attached(ws, resendAt)
    this.#deps.debug(`attached (last_seq ${String(frame.last_seq)}, resume ${String(frame.resume)})`)
    outbox.resendIfCaughtUp(this.#deps.seenSeq(), resendAt < 0)
  }

  #status (frame: Record<string, unknown>): void {
    this.#advance(frame.seq)
    const status = frame.status
    if (status !== 'stopped' && status !== 'exited') return
    if (this.#deps.ending.started) return
    const exit = isRecord(frame.exit) ? frame.exit : {}
    if (status === 'exited') {
      // The CLI ended on its own: so does its stand-in, with its code.
      const code = typeof exit.code === 'number' ? exit.code : 1
      this.#deps.debug(`the CLI exited (${String(exit.code)}, ${String(exit.reason)})`)
      this.#deps.endWithoutStop(code)
      return
    }
    if (this.#deps.turns() > 0) {
      // Stopped mid-turn by someone else (DELETE, gateway shutdown): that turn will never end.
      this.#deps.warn(`the gateway stopped the session's CLI during a turn (${String(exit.reason)})`)
      this.#deps.endWithoutStop(143)
    }
    // Stopped while idle: the next user line resumes it (--resume), as the gateway does.
  }

  #gatewayError (frame: Record<string, unknown>): void {
    const id = typeof frame.request_id === 'string' ? frame.request_id : null
    const code = String(frame.code)
    const message = typeof frame.message === 'string' ? frame.message : code
    if (code === 'credential_refused') this.#deps.renewal.refused()
    // The replay stopped short (the store did not answer): it will not catch up, send what was lost now.
    if (code === 'store_unavailable') this.#deps.outbox.resendIfCaughtUp(this.#deps.seenSeq(), true)
    if (id !== null) this.#deps.outbox.answered(id)
    if (id !== null && this.#deps.input.hostAnswered(id)) {
      // What an SDK waiting on that request understands.
      this.#deps.out(refusalAnswer(id, message, code))
      this.#deps.hostAnswerGiven(id)
      this.#deps.maybeEnd()
      return
    }
    if (id !== null && this.#deps.answers.has(id) && (code === 'already_resolved' || code === 'unknown_request')) return
    if (id === null && USER_REFUSALS.has(code) && this.#deps.turns() > 0) this.#deps.turnRefused()
    this.#deps.warn(`gateway: ${code}: ${message}${id === null ? '' : ` (request ${id})`}`)
    this.#deps.maybeEnd()
  }
}
