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
 * With tenant limits (TENANT_*), a CLI's cgroup goes into its tenant's
 * (tenant-cgroups.ts), so both hold.
 */
import { randomBytes } from 'node:crypto'
import type { Logger } from 'pino'
import type { CliExit, CliLauncher } from '../cli/cli-handle.js'
import { type CgroupLimits, type CgroupParents } from './cgroup-parents.js'
import { CliCgroup } from './cli-cgroup.js'
import type { TenantCgroups } from './tenant-cgroups.js'

export interface LimitedLauncherOptions {
  parents: CgroupParents
  /** What each CLI may use (empty with tenant limits only). */
  limits: CgroupLimits
  /** With tenant limits: the tenants' cgroups, each CLI's made inside its tenant's. */
  tenants?: TenantCgroups | undefined
  /** How long what is left in a CLI's cgroup at its exit gets between SIGTERM and SIGKILL (CLI_STOP_TIMEOUT_MS). */
  graceMs: number
  logger: Logger
  /** Removals still under way are kept here until they end (so that closing can wait for them). */
  removals: Set<Promise<void>>
}

/** The shell that joins: `sh -c JOIN cgw-join <procs files…> -- <command> <args…>`. */
const JOIN_SCRIPT = 'for f; do shift; [ "$f" = -- ] && break; ' +
  'echo 0 > "$f" || { echo "claude-gateway: cannot join the CLI\'s cgroup ($f)" >&2; exit 126; }; done; exec "$@"'

/** Arguments for `/bin/sh` that run `command args` inside the cgroup whose procs files are given. */
export function joinArgs (procsFiles: string[], command: string, args: string[]): string[] {
  return ['-c', JOIN_SCRIPT, 'cgw-join', ...procsFiles, '--', command, ...args]
}

export function limitedLauncher (inner: CliLauncher, options: LimitedLauncherOptions): CliLauncher {
  const { limits, tenants, graceMs, logger, removals } = options
  return (spec, callbacks) => {
    const tenant = spec.tenant
    if (tenants !== undefined && tenant === undefined) throw new Error('tenant limits: a CLI start without a tenant')
    const parents = tenants === undefined || tenant === undefined ? options.parents : tenants.acquire(tenant)
    // The gateway's pid in the name: a restarted gateway removes only the leftovers of one that is gone (cli-cgroup.ts).
    const name = `cgw-${process.pid}-${spec.sessionId}-${randomBytes(3).toString('hex')}`
    let group: CliCgroup
    try {
      group = CliCgroup.create(parents, name, limits)
    } catch (err) {
      if (tenant !== undefined) tenants?.release(tenant)
      throw err
    }
    const release = (): number => {
      const oomKills = group.oomKills()
      const removal = group.remove(graceMs).then((removed) => {
        removals.delete(removal)
        if (!removed) logger.warn({ session: spec.sessionId, cgroup: group.folders, pids: group.pids() }, 'a CLI\'s cgroup could not be removed: processes in it did not die')
        if (tenant !== undefined && tenants?.release(tenant) === false) {
          logger.warn({ tenant, cgroup: tenants.folders(tenant) }, 'a tenant\'s cgroup could not be removed: a CLI cgroup in it is still busy')
        }
      })
      removals.add(removal)
      return oomKills
    }
    try {
      return inner({ ...spec, command: '/bin/sh', args: joinArgs(group.procsFiles, spec.command, spec.args) }, {
        ...callbacks,
        onExit: (exit: CliExit) => {
          const oomKills = release()
          if (oomKills > 0) logger.warn({ session: spec.sessionId, oomKills }, 'the kernel killed processes of this CLI at a memory limit (CLI_MEMORY_MAX_MB or TENANT_MEMORY_MAX_MB)')
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
