/**
 * Ends CLIs, and every tool process they started, left behind by a previous
 * gateway process that crashed (or was SIGKILLed) before it could stop them.
 * Each running CLI has a pid file (`<pidDir>/<session>.<gateway pid>.pid`:
 * pid, the command, the process start time, and the gateway's own pid and
 * start time). Files of a gateway that still runs (another node on this host
 * sharing DATA_DIR) are left alone. The CLI was started in its own process
 * group, so the pid is also the group id, and the group is what is ended:
 * SIGTERM, then SIGKILL.
 *
 * A crashed gateway's CLI usually dies too (its stdin/stdout pipes break),
 * while a background tool it started keeps running in its group. So the group
 * is ended whether or not its leader still runs, as long as the pid file
 * provably names it: checked against the recorded start time, so that a
 * reused pid or group id is never signalled. Only /proc is read (no
 * child_process here).
 */
import { readFileSync, readdirSync, rmSync, statSync } from 'node:fs'
import { basename, join } from 'node:path'

/** What a pid file records about one CLI. */
interface PidRecord {
  pid: number
  command: string
  /** /proc start time of the CLI, '' when the file predates start times or reading it failed. */
  started: string
  /** The gateway process that started the CLI (pid and start time), when the file names it. */
  gateway?: { pid: number, started: string }
}

/** The fields of /proc/<pid>/stat this module needs. */
interface ProcStat {
  pid: number
  /** Field 3: `Z` for a zombie (exited, not yet waited for). */
  state: string
  /** Field 5: the process group id. */
  pgrp: number
  /** Field 22: clock ticks since boot, as a string to compare exactly. */
  started: string
}

/**
 * Reads every `*.pid` file of `pidDir` (deleting each), ends the process
 * groups they provably name (see `orphanGroup`) with SIGTERM, waits up to
 * `graceMs` for them to go, then SIGKILLs what is left. Returns the group ids
 * signalled (each the pid of the CLI that led it).
 */
export async function reapOrphans (pidDir: string, graceMs: number): Promise<number[]> {
  let files: string[]
  try {
    files = readdirSync(pidDir).filter((f) => f.endsWith('.pid'))
  } catch {
    return []
  }
  const bootMs = bootTimeMs()
  const reaped: number[] = []
  for (const file of files) {
    const path = join(pidDir, file)
    const record = readPidFile(path, bootMs)
    // Another gateway on this host, alive: its CLIs are its own.
    if (record?.gateway !== undefined && record.gateway.pid !== process.pid && record.gateway.started !== '' &&
      readStat(record.gateway.pid)?.started === record.gateway.started) continue
    rmSync(path, { force: true })
    const pgid = record === null ? null : orphanGroup(record)
    if (pgid === null) continue
    signalGroup(pgid, 'SIGTERM')
    reaped.push(pgid)
  }
  if (reaped.length === 0) return reaped
  const deadline = Date.now() + graceMs
  while (Date.now() < deadline && reaped.some((pgid) => groupAlive(pgid))) {
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  for (const pgid of reaped) if (groupAlive(pgid)) signalGroup(pgid, 'SIGKILL')
  return reaped
}

/**
 * Parses a pid file; null when it is malformed (a start time that is not a
 * number included), names pid 0 or 1, or was written before the machine last
 * booted (every process it named is gone, and pids and start times restart
 * at boot, so they would name strangers).
 */
function readPidFile (path: string, bootMs: number | null): PidRecord | null {
  let text: string
  let writtenMs: number
  try {
    text = readFileSync(path, 'utf8')
    writtenMs = statSync(path).mtimeMs
  } catch {
    return null
  }
  if (bootMs !== null && writtenMs < bootMs) return null
  const [pidText, command, started, gatewayText] = text.split('\n')
  const pid = Number(pidText)
  if (!Number.isInteger(pid) || pid <= 1 || command === undefined || command === '') return null
  if (started !== undefined && !/^\d*$/.test(started)) return null
  const [gatewayPid, gatewayStarted] = (gatewayText ?? '').split(' ')
  const gateway = Number.isInteger(Number(gatewayPid)) && Number(gatewayPid) > 1 && gatewayStarted !== undefined && /^\d*$/.test(gatewayStarted)
    ? { pid: Number(gatewayPid), started: gatewayStarted }
    : undefined
  return { pid, command, started: started ?? '', ...(gateway === undefined ? {} : { gateway }) }
}

/**
 * The process group to end for a pid file, or null to leave everything alone.
 *
 * - The leader (pid = group id) still runs: it must have started at the
 *   recorded time, or, in a file without one, run the recorded command
 *   (else the pid was reused by an unrelated process, whose group this is).
 * - Otherwise a start time must have been recorded, and the group must still
 *   have live members. A zombie leader counts as gone when its start time is
 *   the recorded one (the same CLI, exited but not yet waited for) and as a
 *   stranger otherwise. Every member must have started at or after the
 *   recorded start time, as the CLI's descendants did: a group whose id was
 *   given to another leader after the CLI's group died out (possible only
 *   once that pid was free, so again later) has the same property, which is
 *   why the recorded time is the least that is required, not a proof.
 */
function orphanGroup (record: PidRecord): number | null {
  const pgid = record.pid
  const leader = readStat(pgid)
  if (leader !== null && leader.state !== 'Z') {
    // Pid and start time name one process. Not its command line: a CLAUDE_LAUNCHER (or the
    // cgroup join's `/bin/sh`) recorded as the command has exec'd what it wraps by now.
    if (record.started !== '') return record.started === leader.started ? pgid : null
    return runs(pgid, record.command) ? pgid : null
  }
  if (record.started === '') return null
  if (leader !== null && leader.started !== record.started) return null
  const members = groupMembers(pgid)
  if (members.length === 0) return null
  const recorded = BigInt(record.started)
  return members.every((m) => BigInt(m.started) >= recorded) ? pgid : null
}

/** True when `pid` is alive and its command line names `command` (guards against pid reuse). */
function runs (pid: number, command: string): boolean {
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')
    return cmdline.some((arg) => arg === command || basename(arg) === basename(command))
  } catch {
    return false
  }
}

/** The live (non-zombie) processes whose process group is `pgid`, from a scan of /proc. */
function groupMembers (pgid: number): ProcStat[] {
  const members: ProcStat[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    const stat = readStat(Number(entry))
    if (stat !== null && stat.pgrp === pgid && stat.state !== 'Z') members.push(stat)
  }
  return members
}

/** /proc/<pid>/stat's state, process group and start time; null when there is no such process. */
function readStat (pid: number): ProcStat | null {
  let text: string
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8')
  } catch {
    return null
  }
  // Fields after the command name, which is in parentheses and may hold spaces and
  // parentheses itself: the last `)` ends it, and state (field 3) is next.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ')
  const [state, pgrp, started] = [fields[0], fields[5 - 3], fields[22 - 3]]
  if (state === undefined || pgrp === undefined || started === undefined || !/^\d+$/.test(started)) return null
  return { pid, state, pgrp: Number(pgrp), started }
}

/** The process's start time (clock ticks since boot, /proc/<pid>/stat field 22), or null. */
export function processStartTime (pid: number): string | null {
  return readStat(pid)?.started ?? null
}

/** When the machine booted (`btime` of /proc/stat), in ms since the epoch; null when unknown. */
function bootTimeMs (): number | null {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n').find((l) => l.startsWith('btime '))
    const seconds = Number(line?.slice('btime '.length))
    return line !== undefined && Number.isInteger(seconds) ? seconds * 1000 : null
  } catch {
    return null
  }
}

/**
 * True while the group has a live member. `kill(-pgid, 0)` would also count
 * zombies, which a container's PID 1 may never wait for, making every reap
 * wait the whole grace period.
 */
function groupAlive (pgid: number): boolean {
  return groupMembers(pgid).length > 0
}

/** Signals a whole process group (0: only checks it exists); false when no process of it is left. */
export function signalGroup (pgid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pgid, signal)
    return true
  } catch {
    return false
  }
}
