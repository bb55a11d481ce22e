/**
 * How a session's status changes are recorded: in its record (saved), as a
 * `status` frame in its own log (so history readers, event streams and
 * resuming clients learn them like anything else), to the session manager,
 * and, for an end, to webhooks.
 */
import type { Logger } from 'pino'
import type { CliExit } from '../cli/cli-handle.js'
import type { GatewayError } from '../errors.js'
import type { SessionRecord, SessionStatus } from '../store/store.js'
import type { EventLog } from './event-log.js'
import { exitInfo, spawnFailure } from './exit-info.js'
import { gatewayFrame } from './frames.js'
import type { SessionEvents, SessionRef } from './session-events.js'

export interface StatusHost {
  readonly record: SessionRecord
  readonly events: EventLog
  readonly log: Logger
  /** Who hears of ended sessions (webhooks). */
  readonly notify: SessionEvents
  readonly ref: SessionRef
  /** Saves the record as it is. */
  persist: () => void
  /** Tells the session manager (SessionDeps.onStatus). */
  changed: () => void
  /** The running CLI's pid, for the status frame. */
  pid: () => number | null
}

export class StatusRecorder {
  readonly #h: StatusHost

  constructor (host: StatusHost) {
    this.#h = host
  }

  set (status: SessionStatus, extra: Record<string, unknown> = {}): void {
    const h = this.#h
    h.record.status = status
    h.record.updated_at = new Date().toISOString()
    const seq = h.events.push((s) => gatewayFrame('status', { status, pid: h.pid(), ...extra }, s))
    h.persist()
    h.changed()
    if (status === 'stopped' || status === 'exited') {
      const exit = h.record.exit
      h.notify.sessionEnded(h.ref, { status, reason: exit?.reason ?? status, code: exit?.code ?? null, signal: exit?.signal ?? null, seq })
    }
  }

  /** A CLI the record says runs although none does (its gateway process crashed): stopped, `exit.reason: "lost"`. */
  lost (): void {
    const info = { code: null, signal: null, stderr_tail: [], reason: 'lost' as const, at: new Date().toISOString() }
    this.#h.record.exit = info
    this.set('stopped', { exit: info })
  }

  /** The CLI ended; `stopped` when the gateway ended it. */
  exited (exit: CliExit, stopped: boolean): void {
    const info = exitInfo(exit, stopped)
    this.#h.record.exit = info
    this.set(stopped ? 'stopped' : 'exited', { exit: info })
  }

  /**
   * A start that failed before any process ran: the session says so (exited,
   * `exit.reason: spawn_failed`), in memory and in the store, instead of
   * staying "starting" with no CLI behind it. Returns the error for the caller.
   */
  spawnFailed (err: unknown): GatewayError {
    this.#h.log.error({ err }, 'CLI could not be started')
    const { info, error } = spawnFailure(err)
    this.#h.record.exit = info
    this.set('exited', { exit: info })
    return error
  }
}
