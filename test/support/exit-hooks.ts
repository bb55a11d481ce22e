/**
 * Ends what a test file started when the file's process ends early. The test
 * runner ends a file that outlives `--test-timeout` with SIGTERM (Ctrl-C
 * sends SIGINT), and a signal's default action skips 'exit' listeners: the
 * Redis servers, gateway processes and CLIs the file started were left
 * running. Once a hook is registered, the two signals become
 * `process.exit`, so the hooks run.
 *
 * Hooks run inside 'exit', which allows synchronous work only: they send
 * signals, they cannot wait for the processes to end. A file killed outright
 * (SIGKILL: a runner or a person ending it) runs no hook at all; for that,
 * `endsWithTest` leaves a watcher holding a pipe from this process.
 */
import { spawn } from 'node:child_process'
import type { Socket } from 'node:net'

const hooks = new Set<() => void>()
let installed = false

/** Runs `hook` when this process exits, however it was asked to (see above). */
export function onTestExit (hook: () => void): void {
  install()
  hooks.add(hook)
}

function install (): void {
  if (installed) return
  installed = true
  process.once('exit', () => {
    for (const hook of hooks) {
      try { hook() } catch { /* the other hooks still run */ }
    }
  })
  // Conventional exit codes of a process ended by the signal (128 + its number).
  process.once('SIGTERM', () => process.exit(143))
  process.once('SIGINT', () => process.exit(130))
}

/**
 * Ends the process group `pid` leads (SIGTERM, then SIGKILL 5 s later) once
 * this process is gone, SIGKILL included: a small `sh`, in a session of its
 * own, reads a pipe only this process holds, and end of file there means
 * its holder died. Returns the watcher's stop, for a group that ended: the
 * watcher goes quietly, so no later holder of that pid is ever signalled.
 */
export function endsWithTest (pid: number): () => void {
  const watcher = spawn('sh', ['-c', 'read _ || { kill -TERM -"$0"; sleep 5; kill -KILL -"$0"; } 2>/dev/null', String(pid)], {
    stdio: ['pipe', 'ignore', 'ignore'],
    detached: true
  })
  watcher.on('error', () => {}) // no sh: only the exit hooks remain
  watcher.unref()
  // A pipe to a child is a socket: unref'd, it keeps no test file alive.
  ;(watcher.stdin as Socket | null)?.unref()
  let stopped = false
  return () => {
    if (stopped) return
    stopped = true
    // A line, not end of file: `read` succeeds and the watcher exits without signalling.
    watcher.stdin?.end('done\n')
  }
}
