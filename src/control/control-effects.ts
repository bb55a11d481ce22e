/**
 * What the control plane asks its session to do, and what it is given.
 * The plane never touches a process, a socket or the store: it returns its
 * decisions as effects (write this to the CLI, record that, send this to that
 * client), which the session carries out in the order they are emitted. So
 * the whole control-request plane runs in a unit test with plain objects and
 * fake timers.
 */
import type { ErrorCode } from '../errors.js'

/** A client as the control plane sees it: the session's ClientPort satisfies it. */
export interface ControlPort {
  readonly id: string
}

export type ControlEffect<P extends ControlPort = ControlPort> =
  /** One NDJSON line for the CLI's stdin. */
  | { kind: 'write_cli', message: Record<string, unknown> }
  /** A gateway frame for the event log (`permission_resolved`, `request_resolved`), relayed to every client. */
  | { kind: 'record', subtype: string, fields: Record<string, unknown> }
  /** A per-connection frame for one client, never recorded. */
  | { kind: 'send', to: P, frame: string, seq?: number }
  /** The holder's initialize, to be kept with the session record (a restarted or resumed CLI gets it again). */
  | { kind: 'keep_initialize', request: Record<string, unknown> }

/** Whether the session has a CLI process, and whether it is being stopped. */
export type CliState = 'stopped' | 'running' | 'stopping'

/** Timers and the clock, injected so tests can drive timeouts by hand. */
export interface Timers {
  set: (fn: () => void, ms: number) => unknown
  clear: (handle: unknown) => void
  now: () => number
}

/** Real timers; unref'd, so a pending prompt never keeps the process alive. */
export const realTimers: Timers = {
  set: (fn, ms) => {
    const timer = setTimeout(fn, ms)
    timer.unref()
    return timer
  },
  clear: (handle) => clearTimeout(handle as NodeJS.Timeout),
  now: () => Date.now()
}

/** An answer to a pending CLI request, from the holder's control_response or the HTTP route. */
export interface AnswerInput {
  subtype: 'success' | 'error'
  response?: Record<string, unknown> | undefined
  error?: string | undefined
}

export type AnswerResult = { ok: true, decision: string } | { ok: false, code: ErrorCode, message?: string }
