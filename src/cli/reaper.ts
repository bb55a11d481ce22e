/**
 * Ends CLIs left behind by a previous gateway process that crashed (or was
 * SIGKILLed) before it could stop them. Each running CLI has a pid file
 * (`<pidDir>/<session>.pid`: pid, then the command); a pid whose process
 * still runs that command is its group leader, so the whole group is ended:
 * SIGTERM, then SIGKILL.
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
    const [pidText, command] = readFileSync(path, 'utf8').split('\n')
    const pid = Number(pidText)
    rmSync(path, { force: true })
    if (!Number.isInteger(pid) || pid <= 1 || command === undefined || !runs(pid, command)) continue
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
