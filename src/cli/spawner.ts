/**
 * The gateway's side of the spawn helper (spawn-helper.ts, which says why it
 * exists): forks it once, asks it to start each CLI, and gives CliProcess a
 * RemoteChild that behaves as a ChildProcess does ('spawn', 'error', 'exit',
 * 'close'), its pid and pipes filled in when the helper hands them over.
 *
 * If the helper dies, the next start forks a new one. CLIs it had started
 * keep running (each in its own process group, their pipes here); as their
 * exit status is lost with it, each is reported exited (code and signal
 * null) once its stdout and stderr have closed. Starts it had not answered
 * fail as a command that cannot run does.
 */
import { EventEmitter } from 'node:events'
import type { Socket } from 'node:net'
import type { Readable, Writable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import type { Logger } from 'pino'
import type { CliSpawnSpec } from './cli-handle.js'
import type { ChildLike, ChildSource, SpawnFailure } from './cli-process.js'

/** The forked helper as seen here (a ChildProcess with an IPC channel). */
export interface HelperChannel extends EventEmitter {
  readonly pid?: number | undefined
  readonly connected: boolean
  send: (message: { op: 'spawn', id: number, command: string, args: string[], cwd: string, env: Record<string, string> }) => boolean
  disconnect: () => void
  kill: (signal?: NodeJS.Signals) => boolean
}

export interface SpawnerOptions {
  logger: Logger
  /** How long the helper lets the CLIs it still runs end after SIGTERM when the gateway goes; also how long close() waits for it. */
  stopTimeoutMs: number
  /** Forks the helper module with these arguments and node flags (cli-process.ts `forkHelper`). */
  fork: (modulePath: string, args: string[], execArgv: string[]) => HelperChannel
}

interface HelperMessage {
  op: 'pipe' | 'spawned' | 'failed' | 'exit'
  id: number
  fd?: number
  pid?: number
  thrown?: boolean
  code?: number | string | null
  signal?: string | null
  message?: string
}

/** Node flags the helper keeps: module loaders only (tsx in tests), not the gateway's profiling or inspector. */
function loaderFlags (execArgv: string[]): string[] {
  const kept: string[] = []
  for (let i = 0; i < execArgv.length; i++) {
    const flag = execArgv[i] as string
    if (/^(--import|--require|-r|--loader|--experimental-loader)$/.test(flag)) kept.push(flag, execArgv[++i] ?? '')
    else if (/^(--import|--require|--loader|--experimental-loader)=/.test(flag)) kept.push(flag)
  }
  return kept
}

export class Spawner implements ChildSource {
  readonly #o: SpawnerOptions
  #helper: HelperChannel | null = null
  #next = 0
  /** Started here and not yet exited, by request id, per helper. */
  #children = new Map<number, RemoteChild>()
  #closed = false

  constructor (options: SpawnerOptions) {
    this.#o = options
  }

  /** Forks the helper now, unless it runs (best early, while the gateway is small). */
  start (): void {
    if (this.#helper !== null || this.#closed) return
    const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js'
    // Small heaps: it allocates little, and V8 would otherwise grow its young generation to
    // 16 MB under a burst of a thousand starts, and keep it (PERFORMANCE.md §23).
    const flags = [...loaderFlags(process.execArgv), '--max-semi-space-size=1', '--optimize-for-size']
    const helper = this.#o.fork(fileURLToPath(new URL(`./spawn-helper${ext}`, import.meta.url)), [String(this.#o.stopTimeoutMs)], flags)
    const children = this.#children = new Map()
    this.#helper = helper
    helper.on('message', (m: HelperMessage, handle?: Socket) => { this.#receive(children, m, handle) })
    helper.on('error', (err) => { this.#o.logger.error({ err }, 'spawn helper error') })
    helper.once('exit', (code, signal) => {
      if (this.#helper === helper) this.#helper = null
      if (!this.#closed) this.#o.logger.error({ code, signal, running: children.size }, 'the spawn helper exited; the next CLI start forks a new one')
      for (const child of children.values()) child.helperGone()
      children.clear()
    })
  }

  spawn (spec: Pick<CliSpawnSpec, 'command' | 'args' | 'cwd' | 'env'>): ChildLike {
    const child = new RemoteChild()
    if (this.#closed) {
      process.nextTick(() => { child.failed(Object.assign(new Error('the gateway is closing'), { thrown: true })) })
      return child
    }
    this.start()
    const id = ++this.#next
    this.#children.set(id, child)
    this.#helper?.send({ op: 'spawn', id, command: spec.command, args: spec.args, cwd: spec.cwd, env: spec.env })
    return child
  }

  /** Ends the helper: its channel closed (it ends any CLI still running), SIGKILL if it lingers. */
  async close (): Promise<void> {
    this.#closed = true
    const helper = this.#helper
    if (helper === null) return
    const gone = new Promise<void>((resolve) => { helper.once('exit', () => { resolve() }) })
    if (helper.connected) helper.disconnect()
    // Capped at setTimeout's longest delay: past it Node fires after 1 ms (CLI_STOP_TIMEOUT_MS may be that long).
    const timer = setTimeout(() => { helper.kill('SIGKILL') }, Math.min(this.#o.stopTimeoutMs + 1000, 2 ** 31 - 1))
    await gone
    clearTimeout(timer)
  }

  #receive (children: Map<number, RemoteChild>, m: HelperMessage, handle: Socket | undefined): void {
    const child = children.get(m.id)
    if (child === undefined) { handle?.destroy(); return }
    if (m.op === 'pipe' && handle !== undefined) child.pipe(m.fd ?? -1, handle)
    else if (m.op === 'spawned') child.spawned(m.pid as number)
    else if (m.op === 'failed') {
      children.delete(m.id)
      child.failed(Object.assign(new Error(m.message ?? 'spawn failed'), { code: m.code ?? undefined, thrown: m.thrown === true }) as SpawnFailure)
    } else if (m.op === 'exit') {
      children.delete(m.id)
      child.exited(m.code as number | null, m.signal ?? null)
    }
  }
}

/** A CLI the helper started, as CliProcess sees a ChildProcess. */
class RemoteChild extends EventEmitter implements ChildLike {
  pid: number | undefined = undefined
  stdin: Writable | null = null
  stdout: Readable | null = null
  stderr: Readable | null = null
  readonly #pipes: Socket[] = []
  #exit: [number | null, string | null] | null = null
  /** stdout and stderr not closed yet. */
  #open = 2
  #orphan = false

  pipe (fd: number, socket: Socket): void {
    this.#pipes[fd] = socket
    // Counted from now: a CLI that exits at once can close its (empty) stderr before 'spawned'.
    if (fd > 0) socket.once('close', () => { this.#open--; this.#maybeClose() })
  }

  spawned (pid: number): void {
    const [stdin, stdout, stderr] = this.#pipes
    if (stdin === undefined || stdout === undefined || stderr === undefined) {
      for (const s of this.#pipes) s?.destroy()
      this.failed(new Error('the spawn helper sent no pipes'))
      return
    }
    this.pid = pid
    this.stdin = stdin
    this.stdout = stdout
    this.stderr = stderr
    this.emit('spawn')
  }

  failed (err: SpawnFailure): void {
    this.emit('error', err)
  }

  exited (code: number | null, signal: string | null): void {
    if (this.#exit !== null) return
    this.#exit = [code, signal]
    this.emit('exit', code, signal)
    this.#maybeClose()
  }

  /** The helper died: a start it had not answered failed; a running CLI is reported once its pipes close. */
  helperGone (): void {
    if (this.pid === undefined) {
      // Pipes it handed over before it died: the CLI it started runs on, reading a stdin held open here, unless they close.
      for (const s of this.#pipes) s?.destroy()
      this.failed(new Error('the spawn helper exited before the CLI started'))
      return
    }
    this.#orphan = true
    this.#maybeClose()
  }

  #maybeClose (): void {
    if (this.#open > 0 || this.pid === undefined) return
    if (this.#exit === null) {
      if (!this.#orphan) return
      this.exited(null, null)
      return
    }
    this.emit('close', ...this.#exit)
  }
}
