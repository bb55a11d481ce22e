/**
 * CLI_MEMORY_MAX_MB, CLI_PIDS_MAX, CLI_CPUS: wraps the CLI launcher so each
 * CLI start gets a cgroup of its own with those limits, holding the CLI and
 * every process it starts (in the sandbox: bwrap, its init, socat, the tools).
 * A fork bomb or a runaway build in one session then meets its own limit,
 * not the host's, and the kernel's OOM killer picks within that session.
 *
 * The CLI joins the cgroup itself: `/bin/sh` writes `0` to each
 * `cgroup.procs` and execs the command, so nothing it runs is ever outside.
 * When the CLI has exited, the OOM kills are counted into the exit, what is
 * left in the cgroup is ended, SIGTERM then SIGKILL (processes a `setsid`
 * took out of its process group included), and the cgroup is removed.
 */
import { randomBytes } from 'node:crypto'
import type { Logger } from 'pino'
import type { CliExit, CliLauncher } from '../cli/cli-handle.js'
import { type CgroupLimits, type CgroupParents } from './cgroup-parents.js'
import { CliCgroup } from './cli-cgroup.js'

export interface LimitedLauncherOptions {
  parents: CgroupParents
  limits: CgroupLimits
  /** How long what is left in a CLI's cgroup at its exit gets between SIGTERM and SIGKILL (CLI_STOP_TIMEOUT_MS). */
  graceMs: number
  logger: Logger
  /** Removals still under way are kept here until they end (so that closing can wait for them). */
  removals: Set<Promise<boolean>>
}

/** The shell that joins: `sh -c JOIN cgw-join <procs files…> -- <command> <args…>`. */
const JOIN_SCRIPT = 'for f; do shift; [ "$f" = -- ] && break; ' +
  'echo 0 > "$f" || { echo "claude-gateway: cannot join the CLI\'s cgroup ($f)" >&2; exit 126; }; done; exec "$@"'

/** Arguments for `/bin/sh` that run `command args` inside the cgroup whose procs files are given. */
export function joinArgs (procsFiles: string[], command: string, args: string[]): string[] {
  return ['-c', JOIN_SCRIPT, 'cgw-join', ...procsFiles, '--', command, ...args]
}

export function limitedLauncher (inner: CliLauncher, options: LimitedLauncherOptions): CliLauncher {
  const { parents, limits, graceMs, logger, removals } = options
  return (spec, callbacks) => {
    // The gateway's pid in the name: a restarted gateway removes only the leftovers of one that is gone (cli-cgroup.ts).
    const name = `cgw-${process.pid}-${spec.sessionId}-${randomBytes(3).toString('hex')}`
    const group = CliCgroup.create(parents, name, limits)
    const release = (): number => {
      const oomKills = group.oomKills()
      const removal = group.remove(graceMs)
      removals.add(removal)
      void removal.then((removed) => {
        removals.delete(removal)
        if (!removed) logger.warn({ session: spec.sessionId, cgroup: group.folders, pids: group.pids() }, 'a CLI\'s cgroup could not be removed: processes in it did not die')
      })
      return oomKills
    }
    try {
      return inner({ ...spec, command: '/bin/sh', args: joinArgs(group.procsFiles, spec.command, spec.args) }, {
        ...callbacks,
        onExit: (exit: CliExit) => {
          const oomKills = release()
          if (oomKills > 0) logger.warn({ session: spec.sessionId, oomKills, limitBytes: limits.memoryBytes }, 'the kernel killed processes of this CLI at its memory limit (CLI_MEMORY_MAX_MB)')
          callbacks.onExit(oomKills > 0 ? { ...exit, oomKills } : exit)
        },
        ...(callbacks.onStartFailed === undefined
          ? {}
          : {
              onStartFailed: (err: Error) => {
                release()
                callbacks.onStartFailed?.(err)
              }
            })
      })
    } catch (err) {
      release()
      throw err
    }
  }
}
