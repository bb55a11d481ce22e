/**
 * Ends CLIs left behind by a previous gateway process that crashed (or was
 * SIGKILLed) before it could stop them. Each running CLI has a pid file
 * (`<pidDir>/<session>.pid`: pid, the command, the process start time); a
 * pid whose process still runs that command and started at that time is its
 * group leader, so the whole group is ended: SIGTERM, then SIGKILL. The start
 * time rules out a reused pid running a binary of the same name.
 */
import { readFileSync, readdirSync, rmSync } from 'node:fs'
import { basename, join } from 'node:path'

export async function reapOrphans (pidDir: string, graceMs: number): Promise<number[]> {
  let files: string[]
  try {
    files = readdirSync(pidDir).filter((f) => f.endsWith('.pid'))
  } catch {
    return []
  }
  const reaped: number[] = []
  for (const file of files) {
    const path = join(pidDir, file)
    const [pidText, command, started] = readFileSync(path, 'utf8').split('\n')
    const pid = Number(pidText)
    rmSync(path, { force: true })
    if (!Number.isInteger(pid) || pid <= 1 || command === undefined || !runs(pid, command)) continue
    if (started !== undefined && started !== '' && started !== processStartTime(pid)) continue
    signalGroup(pid, 'SIGTERM')
    reaped.push(pid)
  }
  if (reaped.length === 0) return reaped
  const deadline = Date.now() + graceMs
  while (Date.now() < deadline && reaped.some((pid) => groupAlive(pid))) {
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  for (const pid of reaped) if (groupAlive(pid)) signalGroup(pid, 'SIGKILL')
  return reaped
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

/** The process's start time (clock ticks since boot, /proc/<pid>/stat field 22), or null. */
export function processStartTime (pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // Fields after the command name, which is in parentheses and may hold spaces: state is field 3.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[22 - 3] ?? null
  } catch {
    return null
  }
}

function groupAlive (pgid: number): boolean {
  return signalGroup(pgid, 0)
}

function signalGroup (pgid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pgid, signal)
    return true
  } catch {
    return false
  }
}
