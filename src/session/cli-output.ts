/**
 * What a session makes of each line its CLI prints: every line but
 * keep_alives is given the next seq and recorded (then relayed to clients);
 * control requests, cancels and responses go to the control plane, a turn's
 * `result` ends the turn, and problems a gateway user could not diagnose from
 * the CLI's own lines are recorded beside them (src/session/cli-problems.ts).
 */
import type { Logger } from 'pino'
import type { ControlPlane } from '../control/control-plane.js'
import type { MetricsSink } from '../metrics/sink.js'
import { isRecord } from '../protocol/is-record.js'
import type { SessionRecord, SessionStatus } from '../store/store.js'
import type { Audience, ClientPort } from './audience.js'
import { CliProblems } from './cli-problems.js'
import type { EventLog } from './event-log.js'
import { bulkType } from './bulk-line.js'
import { gatewayFrame, pendingNotice, spliceSeq, spliceSource, withSeq } from './frames.js'
import type { SessionEvents, SessionRef } from './session-events.js'

export interface CliOutputHost {
  readonly record: SessionRecord
  readonly events: EventLog
  readonly audience: Audience
  readonly control: ControlPlane<ClientPort>
  readonly metrics: MetricsSink
  /** Who hears of prompts and turns (webhooks). */
  readonly notify: SessionEvents
  readonly ref: SessionRef
  readonly log: Logger
  setStatus: (status: SessionStatus) => void
  /** Saves the record as it is. */
  persist: () => void
  /** The CLI printed a turn's result: the turn is over (and its conversation worth saving). */
  turnEnded: () => void
  /** The CLI's `session_state_changed` state (`idle`: no turn runs or waits, whatever was counted). */
  turnState: (state: unknown) => void
  /**
   * A step of a turn is in the CLI's conversation file (a tool's result, a
   * tool call waiting for permission): worth saving, so that a node dying
   * mid-turn leaves the steps made so far to the node that resumes it.
   */
  stepped: () => void
  /** Something is waiting on the CLI or a client: the session is not idle. */
  busy: () => void
  /** The session may have become idle. */
  armIdle: () => void
  /** A CLI control request was recorded at `seq` (what a hello lists as pending depends on when it is stored). */
  asked: (requestId: string, seq: number) => void
}

export class CliOutput {
  readonly #h: CliOutputHost
  #problems = new CliProblems()

  constructor (host: CliOutputHost) {
    this.#h = host
  }

  /**
   * A CLI starts: a turn its predecessor left without a result (stopped,
   * crashed) is over, so what was told or counted for it no longer holds.
   */
  cliStarted (): void {
    this.#problems = new CliProblems()
  }

  /** One line the CLI printed (without its newline). */
  line (line: string): void {
    const h = this.#h
    h.metrics.cliLine()
    // Most of a turn: relayed as printed, checked without being parsed (bulk-line.ts).
    const bulk = bulkType(line)
    if (bulk !== null) {
      if (h.record.status === 'starting') h.setStatus('running')
      h.events.push((s) => spliceSeq(line, s), undefined, spliceSource(line))
      if (bulk === 'user') h.stepped()
      return
    }
    let parsed: unknown
    try {
      parsed = JSON.parse(line)
    } catch {
      this.reject('invalid_json', Buffer.byteLength(line), line)
      return
    }
    if (!isRecord(parsed)) { this.reject('not_an_object', Buffer.byteLength(line), line); return }
    const msg = parsed
    // Live only, as printed: it says the CLI is alive now (the SDK times its `startup_mark` on arrival); replayed it would lie.
    if (msg.type === 'keep_alive') { h.audience.sendAll(line); return }
    if (h.record.status === 'starting') h.setStatus('running')
    const problem = this.#problems.observe(msg)
    switch (msg.type) {
      case 'control_request': {
        const requestId = String(msg.request_id)
        const request = isRecord(msg.request) ? msg.request : {}
        let frame = ''
        const seq = h.events.push((s) => (frame = withSeq(line, msg, s)), (s) => pendingNotice(s, requestId, request))
        h.control.cliRequest(requestId, request, seq, frame)
        h.asked(requestId, seq)
        h.busy()
        if (request.subtype === 'can_use_tool') {
          h.stepped()
          h.notify.permissionRequested(h.ref, {
            requestId,
            toolName: String(request.tool_name),
            input: isRecord(request.input) ? request.input : {},
            seq
          })
        }
        return
      }
      case 'control_cancel_request':
        h.events.push((s) => withSeq(line, msg, s))
        h.control.cliCancel(String(msg.request_id))
        h.armIdle()
        return
      case 'control_response':
        h.events.push((s) => withSeq(line, msg, s))
        h.control.cliResponse(isRecord(msg.response) ? String(msg.response.request_id) : '')
        return
      case 'system':
        if (msg.subtype === 'init' && !h.record.resumable) {
          h.record.resumable = true
          h.persist()
        }
        if (msg.subtype === 'session_state_changed') h.turnState(msg.state)
        break
      case 'result': {
        h.turnEnded()
        const seq = h.events.push((s) => withSeq(line, msg, s))
        h.armIdle()
        h.notify.turnFinished(h.ref, {
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
    h.events.push((s) => withSeq(line, msg, s))
    // After the line that shows it, so history reads in the order things happened.
    if (problem !== null) h.events.push((s) => gatewayFrame('cli_problem', { ...problem }, s))
  }

  /** A line that cannot be relayed (not JSON, not an object, too large): recorded as such, with a preview. */
  reject (reason: string, bytes: number, line: string): void {
    this.#h.log.warn({ reason, bytes, preview: line.slice(0, 200) }, 'CLI printed a line that cannot be relayed')
    this.#h.events.push((s) => gatewayFrame('cli_output_rejected', { reason, bytes, preview: line.slice(0, 200) }, s))
  }
}
