/**
 * The spawn helper: a small process the gateway forks once, while it is
 * still small, to start every CLI for it (spawner.ts is the gateway's side).
 *
 * Why: spawn() forks the calling process (libuv, on Linux), and the fork
 * holds the caller's event loop while its page tables are copied, longer the
 * more memory it has (about 3 ms at 130 MB of RSS, 13 ms at 440 MB:
 * docs/PERFORMANCE.md §22), after which every page the caller writes faults
 * once more. Every session on the node waits that out at each CLI start.
 * Here the fork copies this helper instead; the gateway gets the three pipes
 * over the IPC channel and reads and writes them itself, so no line passes
 * through this process.
 *
 * Channel messages (JSON). Gateway → helper: `{op: 'spawn', id, command,
 * args, cwd, env}`. Helper → gateway: `{op: 'pipe', id, fd}` three times,
 * each carrying that pipe, then `{op: 'spawned', id, pid}`; or
 * `{op: 'failed', id, thrown, code, message}` (`thrown`: spawn() threw, as
 * for E2BIG; else it reported an error, as for ENOENT); later
 * `{op: 'exit', id, code, signal}`.
 *
 * When the gateway goes (its channel closes, also when it was SIGKILLed),
 * the helper ends every process group it started that still has members:
 * SIGTERM, then SIGKILL after the grace given as its first argument (ms),
 * then it exits. It ignores SIGINT and SIGTERM: sent to the gateway's process group
 * (a terminal's Ctrl-C) they reach it too, while the gateway, stopping its
 * CLIs, still needs it to learn their exits. And SIGHUP (a terminal's hangup),
 * which the gateway takes as a credential reload and goes on with its helper.
 */
import type { Socket } from 'node:net'
import { spawnCli } from './cli-process.js'
import { signalGroup } from './reaper.js'

interface SpawnRequest {
  op: 'spawn'
  id: number
  command: string
  args: string[]
  cwd: string
  env: Record<string, string>
}

const graceMs = Number(process.argv[2] ?? 3000)
/**
 * Process groups (each the pid of the CLI that leads it) that may still have
 * members: a running CLI's, and, for `graceMs` after it exited, what it left
 * in its group.
 */
const groups = new Set<number>()

function tell (message: Record<string, unknown>, handle?: Socket): void {
  if (process.connected && process.send !== undefined) process.send(message, handle)
}

function start (m: SpawnRequest): void {
  const id = m.id
  let child
  try {
    child = spawnCli(m)
  } catch (err) {
    const e = err as NodeJS.ErrnoException
    tell({ op: 'failed', id, thrown: true, code: e.code ?? null, message: e.message })
    return
  }
  const pid = child.pid
  if (pid === undefined) {
    child.once('error', (err: NodeJS.ErrnoException) => {
      tell({ op: 'failed', id, thrown: false, code: err.code ?? null, message: err.message })
    })
    return
  }
  // Node began reading stdout and stderr in spawn(); stopped before anything can arrive (that
  // needs a turn of the event loop), so every byte stays in the pipe for the gateway to read.
  for (const stream of [child.stdout, child.stderr]) (stream as unknown as { _handle: { readStop: () => number } | null })._handle?.readStop()
  groups.add(pid)
  // Each pipe leaves with its message; this process closes its copy once the gateway has it.
  child.stdio.slice(0, 3).forEach((pipe, fd) => { tell({ op: 'pipe', id, fd }, pipe as Socket) })
  tell({ op: 'spawned', id, pid })
  // Kept for the CLI's life (hours), so only what its exit needs: not the pipes' handle-less
  // sockets, nor its arguments, nor (the closure below takes `id`, not `m`) its environment.
  child.stdio.fill(null as never)
  ;(child as { stdin: unknown }).stdin = (child as { stdout: unknown }).stdout = (child as { stderr: unknown }).stderr = null
  child.spawnargs.length = 0
  child.on('exit', (code, signal) => {
    tell({ op: 'exit', id, code, signal })
    endLeftovers(pid)
  })
}

/**
 * What a CLI left in its group (background tools) is ended here too, as the
 * gateway does on the exit message: a CLI that dies of its gateway's death
 * (the pipes break) may exit before this process hears that the channel
 * closed, and its tools must not outlive both.
 */
function endLeftovers (pgid: number): void {
  if (!signalGroup(pgid, 'SIGTERM')) { settled(pgid); return }
  setTimeout(() => {
    if (signalGroup(pgid, 0)) signalGroup(pgid, 'SIGKILL')
    settled(pgid)
  }, graceMs)
}

function settled (pgid: number): void {
  groups.delete(pgid)
  if (ending && groups.size === 0) process.exit(0)
}

let ending = false

/** The gateway is gone (or closing): end what still runs, then exit. */
function end (): void {
  if (ending) return
  ending = true
  if (groups.size === 0) process.exit(0)
  for (const pgid of groups) signalGroup(pgid, 'SIGTERM')
  setTimeout(() => {
    for (const pgid of groups) signalGroup(pgid, 'SIGKILL')
    process.exit(0)
  }, graceMs)
}

process.on('SIGINT', () => {})
process.on('SIGTERM', () => {})
process.on('SIGHUP', () => {})
process.on('message', (m: SpawnRequest) => { if (m.op === 'spawn' && !ending) start(m) })
process.on('disconnect', end)
