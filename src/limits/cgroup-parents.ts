/**
 * Where the per-CLI cgroups go (CLI_MEMORY_MAX_MB, CLI_PIDS_MAX, CLI_CPUS):
 * the controllers' hierarchy (cgroup v2's one, else v1's one per
 * controller, as /proc/self/mountinfo says), the parent cgroup in it (named
 * by CLI_CGROUP, else the gateway's own), and its preparation so that it
 * can hand those controllers to the CLIs' cgroups (cli-cgroup.ts).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

export type Controller = 'memory' | 'pids' | 'cpu'

/** How a cgroup file is written (writeFileSync; tests stand in the kernel's refusals). */
export type WriteFile = (file: string, text: string) => void

/** What each CLI (with every process it starts) may use; an absent field is not limited. */
export interface CgroupLimits {
  memoryBytes?: number | undefined
  pids?: number | undefined
  /** Cores' worth of CPU time (0.5 = half of one core), enforced per 100 ms period. */
  cpus?: number | undefined
}

/** The controllers `limits` needs. */
export function controllersFor (limits: CgroupLimits): Controller[] {
  const needed: Controller[] = []
  if (limits.memoryBytes !== undefined) needed.push('memory')
  if (limits.pids !== undefined) needed.push('pids')
  if (limits.cpus !== undefined) needed.push('cpu')
  return needed
}

/** One mounted cgroup hierarchy, from a line of /proc/self/mountinfo. */
export interface CgroupMount {
  version: 1 | 2
  /** v1: the controllers bound to it (`cpu,cpuacct` → both); v2: empty. */
  controllers: string[]
  mountPoint: string
  /** The cgroup shown at the mount point (`/` unless a bind mount or a cgroup namespace shows a subtree). */
  root: string
}

/** Parses /proc/self/mountinfo's cgroup and cgroup2 lines. */
export function parseMountInfo (text: string): CgroupMount[] {
  const mounts: CgroupMount[] = []
  for (const line of text.split('\n')) {
    const [left, right] = line.split(' - ')
    if (left === undefined || right === undefined) continue
    const fields = left.split(' ')
    const [fsType, , superOptions = ''] = right.split(' ')
    if (fsType !== 'cgroup' && fsType !== 'cgroup2') continue
    mounts.push({
      version: fsType === 'cgroup2' ? 2 : 1,
      controllers: fsType === 'cgroup2' ? [] : superOptions.split(','),
      mountPoint: unescapeMountPath(fields[4] ?? ''),
      root: unescapeMountPath(fields[3] ?? '/')
    })
  }
  return mounts
}

/** /proc/self/cgroup → the process's cgroup path per v1 controller, and `''` for v2. */
export function parseProcCgroup (text: string): Map<string, string> {
  const paths = new Map<string, string>()
  for (const line of text.split('\n')) {
    const match = /^\d+:([^:]*):(.*)$/.exec(line)
    if (match === null) continue
    const [, controllers = '', path = '/'] = match
    if (controllers === '') paths.set('', path)
    for (const c of controllers.split(',')) if (c !== '') paths.set(c, path)
  }
  return paths
}

/** Where the parent cgroup of the CLIs' cgroups is, per controller. */
export interface CgroupParents {
  version: 1 | 2
  /** v2: the same folder for every controller. */
  dirs: Map<Controller, string>
}

/** The parent's distinct folders (v1: one per hierarchy; v2: one). */
export function parentFolders (parents: CgroupParents): string[] {
  return [...new Set(parents.dirs.values())]
}

/**
 * Finds the parent folder for the CLIs' cgroups: `path` (a cgroup path, as
 * /proc/<pid>/cgroup spells it) or else the gateway's own cgroup, in the v2
 * hierarchy when it offers every controller needed, else in v1's. Throws,
 * saying what is missing, when neither has them all.
 */
export function findParents (needed: Controller[], path: string | undefined, proc = '/proc'): CgroupParents {
  const mounts = parseMountInfo(readFileSync(join(proc, 'self', 'mountinfo'), 'utf8'))
  const own = parseProcCgroup(readFileSync(join(proc, 'self', 'cgroup'), 'utf8'))
  const v2 = mounts.find((m) => m.version === 2)
  const v2Path = path ?? own.get('')
  if (v2 !== undefined && v2Path !== undefined) {
    const dir = inMount(v2, v2Path)
    // A folder not made yet gets what its nearest existing ancestor can hand down.
    const available = dir === null ? [] : readList(join(nearestExisting(dir), 'cgroup.controllers'))
    if (dir !== null && needed.every((c) => available.includes(c))) return { version: 2, dirs: new Map(needed.map((c) => [c, dir])) }
  }
  const dirs = new Map<Controller, string>()
  for (const c of needed) {
    const mount = mounts.find((m) => m.version === 1 && m.controllers.includes(c))
    const cgroup = path ?? own.get(c)
    if (mount === undefined || cgroup === undefined) {
      throw new Error(`no cgroup hierarchy here offers the ${c} controller${v2 === undefined ? '' : ' (neither cgroup v2 at ' + v2.mountPoint + ' nor a v1 mount)'}`)
    }
    const dir = inMount(mount, cgroup)
    if (dir === null) throw new Error(`cgroup ${cgroup} is outside ${mount.root}, the part of the ${c} hierarchy mounted at ${mount.mountPoint}`)
    dirs.set(c, dir)
  }
  return { version: 1, dirs }
}

/**
 * Every parent a gateway here could have put CLI cgroups in, whatever limits
 * it had: `path` (else this process's cgroup) in the v2 hierarchy, and in
 * the v1 one of each controller a limit may need. A restart with other
 * limits, or none, must still find a predecessor's leftovers there. Those it
 * cannot find (unmounted, outside a mount, /proc unreadable) are left out:
 * never an error.
 */
export function possibleParents (path: string | undefined, proc = '/proc'): CgroupParents[] {
  let mounts: CgroupMount[]
  let own: Map<string, string>
  try {
    mounts = parseMountInfo(readFileSync(join(proc, 'self', 'mountinfo'), 'utf8'))
    own = parseProcCgroup(readFileSync(join(proc, 'self', 'cgroup'), 'utf8'))
  } catch {
    return []
  }
  const found: CgroupParents[] = []
  const v2 = mounts.find((m) => m.version === 2)
  const v2Path = path ?? own.get('')
  const v2Dir = v2 === undefined || v2Path === undefined ? null : inMount(v2, v2Path)
  if (v2Dir !== null) found.push({ version: 2, dirs: new Map(ALL.map((c) => [c, v2Dir])) })
  const v1 = new Map<Controller, string>()
  for (const c of ALL) {
    const mount = mounts.find((m) => m.version === 1 && m.controllers.includes(c))
    const cgroup = path ?? own.get(c)
    const dir = mount === undefined || cgroup === undefined ? null : inMount(mount, cgroup)
    if (dir !== null) v1.set(c, dir)
  }
  if (v1.size > 0) found.push({ version: 1, dirs: v1 })
  return found
}

const ALL: Controller[] = ['memory', 'pids', 'cpu']

/**
 * Makes the parent folders. v2 lets a cgroup (but the root) hand
 * controllers to its children only while no process sits in it: in the
 * parent, the gateway's own processes (and any other there, which is the
 * gateway's to manage) move into a leaf `gateway` first; above the parent,
 * a cgroup with processes of its own is an error the message explains.
 */
export function prepareParents (parents: CgroupParents, write: WriteFile = writeFileSync): void {
  const dirs = parentFolders(parents)
  if (parents.version === 1) {
    for (const dir of dirs) mkdirSync(dir, { recursive: true })
    return
  }
  const dir = dirs[0] as string
  const wanted = [...parents.dirs.keys()]
  const made: string[] = []
  for (let d = dir; !existsSync(d); d = parentOf(d)) made.unshift(d)
  // Down from the nearest existing ancestor: each level hands the controllers on to the next.
  for (const level of made) {
    enableBelow(parentOf(level), wanted, false, write)
    mkdirSync(level)
  }
  enableBelow(dir, wanted, true, write)
}

/**
 * Enables `wanted` in `dir`'s subtree_control. A non-root v2 cgroup (one
 * with a `cgroup.type`) must hold no process then: with `moveOut` they move
 * into `dir/gateway` first, else it is an error the message explains. (The
 * kernel does not always refuse the write itself: pids and cpu get enabled,
 * and then no process can move from there into a child.)
 */
function enableBelow (dir: string, wanted: Controller[], moveOut: boolean, write: WriteFile): void {
  const enabled = readList(join(dir, 'cgroup.subtree_control'))
  const missing = wanted.filter((c) => !enabled.includes(c))
  const procs = existsSync(join(dir, 'cgroup.type')) ? readList(join(dir, 'cgroup.procs')) : []
  // Already enabled (a gateway restarted into the parent, as systemd does): only the move is left.
  if (missing.length === 0 && (procs.length === 0 || !moveOut)) return
  if (procs.length > 0 && !moveOut) {
    throw new Error(`cannot enable ${missing.join(', ')} below ${dir}: processes run in it (cgroup v2 lets only a cgroup without processes of its own hand controllers down); name in CLI_CGROUP a cgroup below one without processes`)
  }
  if (procs.length > 0) {
    const leaf = join(dir, 'gateway')
    mkdirSync(leaf, { recursive: true })
    for (const pid of procs) {
      try {
        write(join(leaf, 'cgroup.procs'), pid)
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err // gone meanwhile
      }
    }
  }
  if (missing.length > 0) write(join(dir, 'cgroup.subtree_control'), missing.map((c) => `+${c}`).join(' '))
}

/** A file of whitespace-separated words (cgroup.procs, cgroup.controllers, …); [] when unreadable. */
export function readList (file: string): string[] {
  try {
    return readFileSync(file, 'utf8').split(/\s+/).filter((w) => w !== '')
  } catch {
    return []
  }
}

/** The folder showing cgroup `path` under `mount`; null when the mount does not show it. */
function inMount (mount: CgroupMount, path: string): string | null {
  const root = mount.root === '/' ? '' : mount.root
  if (root !== '' && path !== root && !path.startsWith(`${root}/`)) return null
  const rest = path.slice(root.length).replace(/^\/+/, '')
  return rest === '' ? mount.mountPoint : join(mount.mountPoint, rest)
}

function parentOf (dir: string): string {
  return join(dir, '..')
}

function nearestExisting (dir: string): string {
  let d = dir
  while (!existsSync(d) && d !== '/') d = parentOf(d)
  return d
}

/** mountinfo writes space, tab, newline and backslash in paths as octal escapes. */
function unescapeMountPath (path: string): string {
  return path.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)))
}
