/**
 * Runs one CLI as a child process in its own process group. The only module
 * that imports child_process.
 *
 * Ending is always the same ladder: stdin closed (the CLI finishes and exits
 * 0), then SIGTERM to the group, then SIGKILL to the group. When the CLI
 * exits by itself, whatever it left in its group (background tool processes)
 * is ended the same way, so nothing outlives its session.
 *
 * The process is started either here (spawn(), which forks the gateway) or,
 * with a `spawner`, by the spawn helper (spawner.ts), which hands the pipes
 * over: the gateway's event loop then never waits on a fork.
 */
import { type ChildProcess, type ChildProcessWithoutNullStreams, fork, spawn } from 'node:child_process'
import type { EventEmitter } from 'node:events'
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Readable, Writable } from 'node:stream'
import type { Logger } from 'pino'
import type { CliCallbacks, CliExit, CliHandle, CliSpawnSpec } from './cli-handle.js'
import { NdjsonSplitter } from './ndjson.js'
import { processStartTime, signalGroup } from './reaper.js'

/**
 * Longer stderr lines are not kept (nor logged), only their size. The tail is
 * diagnostics, saved in the session record and its status frame: MAX_LINE_BYTES
 * (the stdout bound) would let one crash print hundreds of MiB into them.
 */
const STDERR_LINE_MAX_BYTES = 4096

/**
 * A started CLI as CliProcess drives it: a ChildProcess, or a RemoteChild of
 * the spawn helper, whose pid and pipes come with its 'spawn' event.
 */
export interface ChildLike extends EventEmitter {
  readonly pid?: number | undefined
  readonly stdin: Writable | null
  readonly stdout: Readable | null
  readonly stderr: Readable | null
}

/** Starts CLIs somewhere else (the spawn helper); see spawner.ts. */
export interface ChildSource {
  spawn: (spec: Pick<CliSpawnSpec, 'command' | 'args' | 'cwd' | 'env'>) => ChildLike
}

/** An error the spawn helper reports for a start that failed; `thrown` when spawn() threw (E2BIG, …). */
export interface SpawnFailure extends Error {
  code?: string
  thrown?: boolean
}

/** The one spawn() of a CLI: own process group, three pipes. Throws what spawn() throws. */
export function spawnCli (spec: Pick<CliSpawnSpec, 'command' | 'args' | 'cwd' | 'env'>): ChildProcessWithoutNullStreams {
  return spawn(spec.command, spec.args, {
    cwd: spec.cwd,
    env: spec.env,
    detached: true, // own process group: signals reach the CLI and every tool it started
    stdio: ['pipe', 'pipe', 'pipe']
  })
}

/** Forks the spawn helper (spawn-helper.ts) with an IPC channel; its stdout and stderr are the gateway's. */
export function forkHelper (modulePath: string, args: string[], execArgv: string[]): ChildProcess {
  return fork(modulePath, args, { execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'], serialization: 'json' })
}

export interface CliProcessOptions {
  maxLineBytes: number
  /** How long each step of the stop ladder waits before the next. */
  stopTimeoutMs: number
  logger: Logger
  /** Where a pid file per running CLI is kept, so a restarted gateway can reap orphans. */
  pidDir?: string | undefined
  stderrTailLines?: number
  /**
   * Told how long spawn() held the event loop. It forks the gateway, so the
   * time grows with the gateway's memory, and every session waits it out.
   */
  onSpawn?: ((seconds: number) => void) | undefined
  /** Starts the process elsewhere (the spawn helper) instead of forking the gateway. */
  spawner?: ChildSource | undefined
}

export class CliProcess implements CliHandle {
  readonly #child: ChildLike
  readonly #options: CliProcessOptions
  readonly #callbacks: CliCallbacks
  readonly #sessionId: string
  /** Made on first use: most idle CLIs log nothing until they exit. */
  #logger: Logger | null = null
  readonly #stderrTail: string[] = []
  readonly #exited: Promise<CliExit>
  #resolveExit!: (exit: CliExit) => void
  #exit: CliExit | null = null
  #pidFile: string | null = null
  /** Lines written before the spawn helper handed over stdin, and whether stdin was ended meanwhile. */
  #queued: string[] | null = null
  #endQueued = false
  /** pauseOutput was asked last (resumeOutput not since): kept for pipes handed over later. */
  #outputPaused = false
  /** The one stop ladder: a second stop() joins it rather than signalling the group again. */
  #stopping: Promise<CliExit> | null = null
  /** Hands on a last stdout and stderr line that had no newline (set once the pipes are here). */
  #flushLines: (() => void) | null = null

  constructor (spec: CliSpawnSpec, callbacks: CliCallbacks, options: CliProcessOptions) {
    this.#options = options
    this.#callbacks = callbacks
    this.#sessionId = spec.sessionId
    this.#exited = new Promise((resolve) => { this.#resolveExit = resolve })

    const started = process.hrtime.bigint()
    const child = this.#child = options.spawner?.spawn(spec) ?? spawnCli(spec)
    options.onSpawn?.(Number(process.hrtime.bigint() - started) / 1e9)

    child.on('error', (err: SpawnFailure) => {
      this.#log.error({ err }, 'cli process error')
      if (child.pid !== undefined) return
      const failed = { code: null, signal: null, stderrTail: [], spawnError: err.message }
      if (this.#queued === null) { this.#finish(failed); return }
      // The helper's start failed: the session learns it as a direct spawn() would have told it.
      this.#queued = null
      if (err.thrown === true && callbacks.onStartFailed !== undefined) {
        this.#exit = failed
        this.#resolveExit(failed)
        callbacks.onStartFailed(err)
        return
      }
      callbacks.onStart?.()
      this.#finish(failed)
    })
    child.on('exit', () => {
      // The CLI is gone; end anything it left in its group so the pipes close too.
      void this.#killGroupLadder()
    })
    child.on('close', (code: number | null, signal: string | null) => {
      // Pipes given up while a process outside the group held them (#killGroupLadder) end
      // without 'end': their last line, read already, is still the CLI's, and comes before the exit.
      this.#flushLines?.()
      this.#finish({ code, signal, stderrTail: [...this.#stderrTail] })
    })
    if (child.stdout !== null) { this.#attach(spec.command); return }
    this.#queued = []
    // The command alone, not the spec: a closure made here shares this constructor's context
    // with the handlers above, which live as long as the CLI, and what it names stays with them
    // (the whole spec, arguments and environment, for every running CLI: 0.8 KiB of heap with the
    // bench's light CLI, more with the real one's arguments or a sandbox's).
    const command = spec.command
    child.once('spawn', () => {
      this.#attach(command)
      callbacks.onStart?.()
    })
  }

  /** True while the spawn helper has not said yet whether the process runs (see CliHandle). */
  get pending (): boolean {
    return this.#queued !== null
  }

  /** Wires the pipes once they are here (at once for spawn(), at 'spawn' from the helper). */
  #attach (command: string): void {
    const child = this.#child
    const { stdin, stdout, stderr } = child as ChildLike & { stdin: Writable, stdout: Readable, stderr: Readable }
    const options = this.#options
    const callbacks = this.#callbacks
    if (child.pid !== undefined && options.pidDir !== undefined) {
      // Named and marked by this gateway process too: gateways sharing DATA_DIR on one host
      // (several nodes) never reap, or delete the pid files of, each other's live CLIs.
      const pidFile = join(options.pidDir, `${this.#sessionId}.${process.pid}.pid`)
      try {
        mkdirSync(options.pidDir, { recursive: true })
        writeFileSync(pidFile, `${child.pid}\n${command}\n${processStartTime(child.pid) ?? ''}\n${process.pid} ${processStartTime(process.pid) ?? ''}\n`)
        this.#pidFile = pidFile
      } catch (err) {
        // Only for after a crash (the spawn helper covers most): a full disk must not end the CLI,
        // nor, thrown where the helper's answer is handled, the gateway and every session.
        this.#log.error({ err }, 'could not write the CLI\'s pid file; a gateway restarted after a crash cannot reap it')
      }
    }

    const splitter = new NdjsonSplitter({
      maxLineBytes: options.maxLineBytes,
      onLine: callbacks.onLine,
      onOversize: callbacks.onOversize
    })
    stdout.on('data', (chunk: Buffer) => splitter.push(chunk))
    // Asked to pause while the spawn helper started it: nothing is read until resumeOutput.
    if (this.#outputPaused) stdout.pause()
    stdout.on('end', () => splitter.end())

    // Split as bytes like stdout and decoded per line (a character split across chunks decodes
    // intact): no StringDecoder and its buffer kept per idle CLI, as setEncoding would.
    const lines = new NdjsonSplitter({
      maxLineBytes: STDERR_LINE_MAX_BYTES,
      onLine: (line) => { this.#stderrLine(line) },
      onOversize: (bytes) => { this.#stderrLine(`(a stderr line of ${bytes} bytes, not kept)`) }
    })
    stderr.on('data', (chunk: Buffer) => { lines.push(chunk) })
    stderr.on('end', () => { lines.end() })
    this.#flushLines = () => { splitter.end(); lines.end() }

    // A write racing the CLI's exit fails with EPIPE; the exit report covers it. The helper's
    // pipes arrive as two-way sockets, whose other half may report an error too: never fatal.
    const pipeError = (err: Error): void => { this.#log.debug({ err }, 'cli pipe error') }
    stdin.on('error', pipeError)
    if (this.#queued !== null) { stdout.on('error', pipeError); stderr.on('error', pipeError) }
    const queued = this.#queued
    this.#queued = null
    for (const line of queued ?? []) stdin.write(line)
    if (this.#endQueued) stdin.end()
  }

  get pid (): number | undefined {
    return this.#child.pid
  }

  pauseOutput (): void {
    // Before the helper hands over the pipes there is no stdout yet: #attach pauses it then.
    this.#outputPaused = true
    this.#child.stdout?.pause()
  }

  resumeOutput (): void {
    this.#outputPaused = false
    this.#child.stdout?.resume()
  }

  write (line: string): boolean {
    if (this.#exit !== null || this.#endQueued) return false
    if (this.#queued !== null) { this.#queued.push(line + '\n'); return true }
    const stdin = this.#child.stdin
    if (stdin === null || stdin.destroyed || stdin.writableEnded) return false
    stdin.write(line + '\n')
    return true
  }

  stop (): Promise<CliExit> {
    if (this.#exit !== null) return this.#exited
    this.#stopping ??= this.#stopLadder()
    return this.#stopping
  }

  async #stopLadder (): Promise<CliExit> {
    if (this.#queued !== null) this.#endQueued = true
    else this.#child.stdin?.end()
    if (await this.#waitExit(this.#options.stopTimeoutMs)) return this.#exited
    this.#signalGroup('SIGTERM')
    if (await this.#waitExit(this.#options.stopTimeoutMs)) return this.#exited
    this.#signalGroup('SIGKILL')
    return this.#exited
  }

  get #log (): Logger {
    this.#logger ??= this.#options.logger.child({ session: this.#sessionId })
    return this.#logger
  }

  #stderrLine (line: string): void {
    if (line === '') return
    this.#log.info({ stderr: line }, 'cli stderr')
    this.#stderrTail.push(line)
    const max = this.#options.stderrTailLines ?? 20
    if (this.#stderrTail.length > max) this.#stderrTail.shift()
  }

  /**
   * After the CLI itself exited: SIGTERM what is left of its group, SIGKILL it if it lingers.
   * Then its pipes are given up if they still have not closed: a process outside the group
   * (`setsid`) may hold them for ever, and the exit would never be reported (the session
   * stopping for ever, its cgroup never emptied). Not while its output is paused: the CLI's
   * last lines are still in the pipe, to be read first.
   */
  async #killGroupLadder (): Promise<void> {
    const wait = (): Promise<unknown> => new Promise((resolve) => setTimeout(resolve, this.#options.stopTimeoutMs).unref())
    if (this.#signalGroup('SIGTERM')) {
      await wait()
      if (this.#signalGroup(0)) this.#signalGroup('SIGKILL')
    }
    do await wait(); while (this.#exit === null && this.#outputPaused)
    if (this.#exit !== null) return
    this.#log.warn('the CLI exited but a process outside its process group holds its stdout or stderr: closing them')
    this.#child.stdout?.destroy()
    this.#child.stderr?.destroy()
  }

  /** Signals the whole group; false when no process of it is left. */
  #signalGroup (signal: NodeJS.Signals | 0): boolean {
    const pid = this.#child.pid
    return pid !== undefined && signalGroup(pid, signal)
  }

  /** Resolves true once the process has exited and its pipes closed, false after `ms`. */
  #waitExit (ms: number): Promise<boolean> {
    if (this.#exit !== null) return Promise.resolve(true)
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), ms)
      void this.#exited.then(() => { clearTimeout(timer); resolve(true) })
    })
  }

  #finish (exit: CliExit): void {
    if (this.#exit !== null) return
    this.#exit = exit
    if (this.#pidFile !== null) rmSync(this.#pidFile, { force: true })
    this.#log.info({ code: exit.code, signal: exit.signal, spawnError: exit.spawnError }, 'cli exited')
    this.#callbacks.onExit(exit)
    this.#resolveExit(exit)
  }
}

export interface RunResult {
  code: number | null
  signal: string | null
  /** Start error (ENOENT, ...), else ''. */
  error: string
  output: string
}

/**
 * Runs a short command to completion (start-up checks such as the sandbox
 * probe), with a deadline after which it is killed. Lives here because this
 * is the one module that starts processes.
 */
export function runOnce (command: string, args: string[], timeoutMs: number): Promise<RunResult> {
  return new Promise((resolve) => {
    let output = ''
    let error = ''
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } })
    const timer = setTimeout(() => { error = `timed out after ${timeoutMs} ms`; child.kill('SIGKILL') }, timeoutMs)
    const collect = (chunk: Buffer): void => { if (output.length < 4096) output += chunk.toString('utf8') }
    child.stdout.on('data', collect)
    child.stderr.on('data', collect)
    const done = (code: number | null, signal: string | null): void => {
      clearTimeout(timer)
      resolve({ code, signal, error, output: output.trim() })
    }
    child.on('error', (err) => {
      error = err.message
      if (child.pid === undefined) done(null, null) // never started: no 'close' to wait for
    })
    child.on('close', done)
  })
}
