/**
 * How a CLI's end is written into the session record (`exit`), whether the
 * process ran and exited, was stopped, or could not be spawned at all.
 */
import type { CliExit } from '../cli/cli-handle.js'
import { GatewayError } from '../errors.js'
import type { ExitInfo } from '../store/store.js'

/** A CLI process that ended; `stopped` when the gateway ended it. */
export function exitInfo (exit: CliExit, stopped: boolean): ExitInfo {
  return {
    code: exit.code,
    signal: exit.signal,
    stderr_tail: exit.stderrTail,
    reason: exit.spawnError !== undefined ? 'spawn_failed' : stopped ? 'stopped' : 'exited',
    at: new Date().toISOString(),
    ...(exit.spawnError === undefined ? {} : { error: exit.spawnError }),
    ...(exit.oomKills === undefined ? {} : { oom_kills: exit.oomKills })
  }
}

/** A start that threw before any process ran: the record's exit, and the error the caller gets. */
export function spawnFailure (err: unknown): { info: ExitInfo, error: GatewayError } {
  const message = err instanceof Error ? err.message : String(err)
  const info: ExitInfo = { code: null, signal: null, stderr_tail: [], reason: 'spawn_failed', at: new Date().toISOString(), error: message }
  if (err instanceof GatewayError) return { info, error: err }
  const code = (err as { code?: unknown }).code
  return { info, error: new GatewayError('cli_start_failed', typeof code === 'string' ? `The CLI could not be started (${code})` : undefined) }
}
