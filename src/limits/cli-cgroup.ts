/**
 * One CLI's cgroup (limited-launcher.ts makes one per CLI start): its
 * folder per hierarchy with the limits written, the OOM kills it saw, and
 * its end: whatever is left in it killed, the folders removed. A tenant's
 * cgroup (tenant-cgroups.ts), which holds its CLIs' cgroups, is made and
 * removed the same way. Also the removal of the cgroups a gateway process
 * that is gone left behind. Only files are touched: a CLI joins its cgroup
 * itself, by writing to `cgroup.procs` before it execs, so no process of it
 * runs outside.
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, rmdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { pidGone } from '../util/pid-gone.js'
import { type CgroupLimits, type CgroupParents, type Controller, parentFolders, readList } from './cgroup-parents.js'

/** The CPU time period limits are enforced over (the kernel's default), in µs. */
const CPU_PERIOD_US = 100_000

/** One CLI's cgroup: a folder per hierarchy (one with v2). */
export class CliCgroup {
  readonly #version: 1 | 2
  /** Folder per controller. */
  readonly #dirs: Map<Controller, string>

  /** The cgroup `name` under `parents`, as it is (made by `create`, or a leftover). */
  constructor (parents: CgroupParents, name: string) {
    this.#version = parents.version
    this.#dirs = new Map([...parents.dirs].map(([c, dir]) => [c, join(dir, name)]))
  }

  /**
   * Makes the folders and writes `limits` into them; throws (having removed
   * what it made) when the kernel refuses. `handDown`: controllers cgroups
   * made below it get (v2 enables them in its subtree_control; v1 has
   * nothing to enable).
   */
  static create (parents: CgroupParents, name: string, limits: CgroupLimits, handDown: Controller[] = []): CliCgroup {
    const group = new CliCgroup(parents, name)
    try {
      for (const dir of group.folders) mkdirSync(dir)
      group.#write(limits)
      if (group.#version === 2 && handDown.length > 0) {
        writeFileSync(join(group.folders[0] as string, 'cgroup.subtree_control'), handDown.map((c) => `+${c}`).join(' '))
      }
    } catch (err) {
      for (const dir of group.folders) rmdirQuietly(dir)
      throw err
    }
    return group
  }

  /** Each distinct folder (v1: one per hierarchy). */
  get folders (): string[] {
    return [...new Set(this.#dirs.values())]
  }

  /** The `cgroup.procs` files a process writes `0` to, to join this cgroup in every hierarchy. */
  get procsFiles (): string[] {
    return this.folders.map((dir) => join(dir, 'cgroup.procs'))
  }

  /** Processes killed by the kernel because this cgroup hit its memory limit. */
  oomKills (): number {
    const dir = this.#dirs.get('memory')
    if (dir === undefined) return 0
    const file = this.#version === 2 ? 'memory.events' : 'memory.oom_control'
    try {
      const match = /^oom_kill (\d+)$/m.exec(readFileSync(join(dir, file), 'utf8'))
      return match === null ? 0 : Number(match[1])
    } catch {
      return 0
    }
  }

  /**
   * Pids in the cgroup now (in any of its folders: a leftover may lack
   * some), those in cgroups a tool made inside it included: they are under
   * its limits, and must end with it.
   */
  pids (): number[] {
    return [...new Set(this.folders.flatMap(subtree).flatMap((dir) => readList(join(dir, 'cgroup.procs'))))].map(Number)
  }

  /**
   * Ends everything left in it and removes the folders: SIGTERM, up to
   * `graceMs` to go, then SIGKILL. Processes take a moment to die after
   * SIGKILL and the folder stays busy until they have, so it tries again for
   * up to about `withinMs` more. False when it could not.
   */
  async remove (graceMs = 0, withinMs = 2000): Promise<boolean> {
    if (graceMs > 0 && this.#signal('SIGTERM') > 0) await until(() => this.pids().length === 0, graceMs)
    return await until(() => {
      this.#kill()
      return this.tryRemove()
    }, withinMs)
  }

  /**
   * Removes the folders now, if nothing is in them any more, cgroups made
   * inside them first (the kernel refuses to remove one with children);
   * true when all are gone.
   */
  tryRemove (): boolean {
    return this.folders.flatMap((dir) => subtree(dir).reverse()).filter((dir) => !rmdirQuietly(dir)).length === 0
  }

  #kill (): void {
    const dir = this.folders[0]
    if (dir === undefined) return
    if (this.#version === 2 && existsSync(join(dir, 'cgroup.kill'))) {
      try {
        writeFileSync(join(dir, 'cgroup.kill'), '1')
        return
      } catch {
        // removed meanwhile, or an older kernel: signal one by one
      }
    }
    this.#signal('SIGKILL')
  }

  /** Sends `signal` to every process in it; how many there were. */
  #signal (signal: NodeJS.Signals): number {
    const pids = this.pids()
    for (const pid of pids) {
      try {
        process.kill(pid, signal)
      } catch {
        // gone meanwhile
      }
    }
    return pids.length
  }

  #write (limits: CgroupLimits): void {
    const at = (c: Controller, file: string): string => join(this.#dirs.get(c) as string, file)
    if (limits.memoryBytes !== undefined) {
      const bytes = String(limits.memoryBytes)
      if (this.#version === 2) {
        writeFileSync(at('memory', 'memory.max'), bytes)
        // Swap would let a process past the limit slow the whole host down instead of being killed.
        if (existsSync(at('memory', 'memory.swap.max'))) writeFileSync(at('memory', 'memory.swap.max'), '0')
      } else {
        writeFileSync(at('memory', 'memory.limit_in_bytes'), bytes)
        if (existsSync(at('memory', 'memory.memsw.limit_in_bytes'))) writeFileSync(at('memory', 'memory.memsw.limit_in_bytes'), bytes)
      }
    }
    if (limits.pids !== undefined) writeFileSync(at('pids', 'pids.max'), String(limits.pids))
    if (limits.cpus !== undefined) {
      const quota = String(Math.max(1000, Math.round(limits.cpus * CPU_PERIOD_US)))
      if (this.#version === 2) {
        writeFileSync(at('cpu', 'cpu.max'), `${quota} ${CPU_PERIOD_US}`)
      } else {
        writeFileSync(at('cpu', 'cpu.cfs_period_us'), String(CPU_PERIOD_US))
        writeFileSync(at('cpu', 'cpu.cfs_quota_us'), quota)
      }
    }
  }
}

/**
 * Removes the CLI and tenant cgroups a previous gateway process left under
 * `parents` (named `cgw-<pid>-…` by limited-launcher.ts and
 * tenant-cgroups.ts): those of a pid that no longer runs, or of this
 * process's own pid (a container restarted with the same pid). What still
 * runs in them is ended (SIGTERM, `graceMs`, SIGKILL); a tenant's CLI
 * cgroups go before it. Returns the names removed.
 */
export async function sweepLeftovers (parents: CgroupParents, graceMs: number): Promise<string[]> {
  const names = subfolders(parents, '').filter((name) => {
    const pid = Number(/^cgw-(\d+)-/.exec(name)?.[1] ?? NaN)
    return Number.isInteger(pid) && (pid === process.pid || pidGone(pid))
  })
  const removed: string[] = []
  for (const name of names) {
    const below = await Promise.all(subfolders(parents, name).map(async (child) => await new CliCgroup(parents, join(name, child)).remove(graceMs)))
    if (below.every(Boolean) && await new CliCgroup(parents, name).remove(graceMs)) removed.push(name)
  }
  return removed
}

/** The cgroups right below `name` under `parents` (in any hierarchy: a leftover may lack some folders). */
function subfolders (parents: CgroupParents, name: string): string[] {
  const names = new Set<string>()
  for (const dir of parentFolders(parents)) {
    try {
      for (const e of readdirSync(join(dir, name), { withFileTypes: true })) if (e.isDirectory()) names.add(e.name)
    } catch {
      // not in this hierarchy
    }
  }
  return [...names]
}

/** `dir` and the cgroups below it at any depth, each before those inside it; [] when `dir` is gone. */
function subtree (dir: string): string[] {
  let entries
  try {
    entries = readdirSync(dir, { withFileTypes: true })
  } catch {
    return []
  }
  return [dir, ...entries.filter((e) => e.isDirectory()).flatMap((e) => subtree(join(dir, e.name)))]
}

/**
 * Checks `done` now and then again on a 5–100 ms backoff for up to `ms`
 * (v1 says by no event when a cgroup's processes are gone); its last answer.
 */
async function until (done: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms
  for (let wait = 5; !done(); wait = Math.min(wait * 2, 100)) {
    if (Date.now() > deadline) return false
    await new Promise((resolve) => setTimeout(resolve, wait))
  }
  return true
}

/** rmdir that reports instead of throwing: true when the folder is gone. */
function rmdirQuietly (dir: string): boolean {
  try {
    rmdirSync(dir)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ENOENT'
  }
}
