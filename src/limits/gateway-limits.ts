/**
 * The gateway's per-CLI and per-tenant resource limits in one place, for
 * app.ts: whether any is set, the launcher that applies them
 * (limited-launcher.ts, tenant-cgroups.ts), and the
 * start-up work: the parent cgroup found and prepared, leftovers of a
 * previous gateway removed (wherever its limits, maybe not these, put them;
 * also with none set now), and one real join checked, so that a host where
 * the limits cannot hold refuses to start instead of failing every session.
 */
import type { Logger } from 'pino'
import type { CliLauncher } from '../cli/cli-handle.js'
import { ConfigError, type Config } from '../config.js'
import type { ProbeRunner } from '../sandbox/probe.js'
import { type CgroupParents, controllersFor, findParents, parentFolders, possibleParents, prepareParents } from './cgroup-parents.js'
import { CliCgroup, sweepLeftovers } from './cli-cgroup.js'
import { limitedLauncher, joinArgs } from './limited-launcher.js'
import { TenantCgroups } from './tenant-cgroups.js'

export interface GatewayLimitsOptions {
  /** Starts a CLI from a spawn spec (CliProcess in production). */
  inner: CliLauncher
  logger: Logger
  /** Runs the start-up join check. */
  probe: ProbeRunner
  /** Where /proc is (tests point it at a copy). */
  proc?: string
}

export interface GatewayLimits {
  /** True when each CLI runs in a cgroup of its own (in its tenant's, with tenant limits) with the limits set. */
  readonly active: boolean
  readonly launch: CliLauncher
  /** At start, before any CLI (or the spawn helper) starts: throws ConfigError when the limits cannot hold here. */
  start: () => Promise<void>
  /** After the CLIs have stopped: resolves once their cgroups are emptied and removed. */
  close: () => Promise<void>
}

const HOW_TO_FIX = 'Run the gateway where it may manage a cgroup: a systemd service with Delegate=yes, a container with a writable cgroup ' +
  'namespace (podman --security-opt unmask=/sys/fs/cgroup), or as root; or unset the CLI_ and TENANT_ limits (_MEMORY_MAX_MB, _PIDS_MAX, _CPUS) and limit the gateway as a whole (docs/SECURITY.md, Resource limits).'

export function gatewayLimits (config: Config, options: GatewayLimitsOptions): GatewayLimits {
  const { logger } = options
  const limits = config.cliLimits
  const tenantLimits = config.tenantLimits
  const perTenant = controllersFor(tenantLimits).length > 0
  const needed = [...new Set([...controllersFor(limits), ...controllersFor(tenantLimits)])]
  if (needed.length === 0) {
    return {
      active: false,
      launch: options.inner,
      start: async () => {
        // A predecessor with limits may have left cgroups (and processes in them) although this one has none.
        await sweepEverywhere(possibleParents(config.cliCgroup, options.proc), config.cliStopTimeoutMs, logger)
        logger.info('no per-CLI or per-tenant limits (CLI_ or TENANT_ PIDS_MAX, MEMORY_MAX_MB, CPUS): a session may use all the pids, memory and CPU the gateway has')
      },
      close: async () => {}
    }
  }

  let launcher: CliLauncher | null = null
  const removals = new Set<Promise<void>>()
  const fail = (why: string): ConfigError => new ConfigError(`invalid configuration:\n  CLI limits (${needed.join(', ')}) cannot hold here: ${why}. ${HOW_TO_FIX}`)
  return {
    active: true,
    launch: (spec, callbacks) => {
      if (launcher === null) throw new Error('CLI limits: a CLI start before the gateway started')
      return launcher(spec, callbacks)
    },
    start: async () => {
      let parents: CgroupParents
      // Before prepareParents: with v2 it may move this process into a leaf, and its own cgroup with it.
      const possible = possibleParents(config.cliCgroup, options.proc)
      try {
        parents = findParents(needed, config.cliCgroup, options.proc)
        prepareParents(parents)
      } catch (err) {
        throw fail((err as Error).message)
      }
      await sweepEverywhere([parents, ...possible], config.cliStopTimeoutMs, logger)
      const tenants = perTenant ? new TenantCgroups({ parents, limits: tenantLimits, handDown: needed }) : undefined
      const problem = await checkJoin(parents, tenants, options.probe)
      if (problem !== null) throw fail(problem)
      launcher = limitedLauncher(options.inner, { parents, limits, tenants, graceMs: config.cliStopTimeoutMs, logger, removals })
      logger.info({ cgroupVersion: parents.version, parent: parentFolders(parents), limits, ...(perTenant ? { tenantLimits } : {}) },
        perTenant ? 'each CLI runs in a cgroup of its own, inside one per tenant, with these limits' : 'each CLI runs in a cgroup of its own with these limits')
    },
    close: async () => {
      await Promise.all([...removals])
    }
  }
}

/**
 * Removes a previous gateway process's leftovers under each of `candidates`
 * (those of its limits, and of any it may have had: a restart with other
 * limits or none must not strand them). Best effort: a hierarchy it may not
 * write is logged, never an error, so a gateway without limits starts where
 * cgroups are read-only. A folder seen twice is swept once.
 */
async function sweepEverywhere (candidates: CgroupParents[], graceMs: number, logger: Logger): Promise<void> {
  const seen = new Set<string>()
  for (const parents of candidates) {
    const dirs = new Map([...parents.dirs].filter(([, dir]) => !seen.has(dir)))
    if (dirs.size === 0) continue
    for (const dir of dirs.values()) seen.add(dir)
    const unseen: CgroupParents = { version: parents.version, dirs }
    try {
      const swept = await sweepLeftovers(unseen, graceMs)
      if (swept.length > 0) logger.warn({ cgroups: swept, parent: parentFolders(unseen) }, 'removed CLI cgroups left by a previous gateway process (what ran in them was ended)')
    } catch (err) {
      logger.warn({ err, parent: parentFolders(unseen) }, 'could not look for CLI cgroups a previous gateway process left')
    }
  }
}

/**
 * A throwaway cgroup with the limits' controllers (inside a throwaway
 * tenant's, with tenant limits), joined by a shell as a CLI joins its own;
 * null when that worked.
 */
async function checkJoin (parents: CgroupParents, tenants: TenantCgroups | undefined, run: ProbeRunner): Promise<string | null> {
  let group: CliCgroup
  try {
    group = CliCgroup.create(tenants?.acquire('check') ?? parents, `cgw-${process.pid}-check`, {})
  } catch (err) {
    if (tenants !== undefined) tenants.release('check')
    return `cannot make a cgroup under ${parentFolders(parents).join(', ')} (${(err as Error).message})`
  }
  try {
    const r = await run('/bin/sh', joinArgs(group.procsFiles, '/bin/cat', ['/proc/self/cgroup']), 10_000)
    const name = `/cgw-${process.pid}-check`
    if (r.code !== 0 || !r.output.split('\n').some((line) => line.endsWith(name))) {
      return `a process could not join a cgroup made under ${group.folders.join(', ')} (${r.error !== '' ? r.error : r.output})`
    }
    return null
  } finally {
    await group.remove()
    tenants?.release('check')
  }
}
