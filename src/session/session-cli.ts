/**
 * A session's CLI process as the session runs it: started (directly, or by
 * the spawn helper, which says later whether it runs), stopped, and its exit
 * recorded. The session has at most one at a time; callbacks of one it
 * replaced are ignored.
 */
import type { Logger } from 'pino'
import type { CliExit, CliHandle, CliLauncher, CliSpawnSpec } from '../cli/cli-handle.js'
import type { CliState } from '../control/control-effects.js'
import type { ControlPlane } from '../control/control-plane.js'
import type { ControlRequestFrame } from '../protocol/client-frames.js'
import { GatewayError } from '../errors.js'
import type { MetricsSink } from '../metrics/sink.js'
import type { ClientPort } from './audience.js'
import type { CliOutput } from './cli-output.js'
import type { ConversationSaves } from './conversation-saves.js'
import type { EventLog } from './event-log.js'
import type { IdleTimer } from './idle-timer.js'
import type { StatusRecorder } from './status-recorder.js'
import type { Turns } from './turns.js'
import { Waiters } from './waiters.js'

/** What the CLI's runner is given by its session (the session's shared host object). */
export interface SessionCliHost {
  readonly log: Logger
  readonly metrics: MetricsSink
  readonly events: EventLog
  readonly control: ControlPlane<ClientPort>
  readonly saves: ConversationSaves
  readonly cliOutput: CliOutput
  readonly statusRecorder: StatusRecorder
  readonly turns: Turns
  readonly idle: IdleTimer
  /** True while this node holds the session's lease. */
  owned: () => boolean
  /** True once fenced: the session object is being dropped. */
  gone: () => boolean
  /** Refuses a (re)start, e.g. when MAX_SESSIONS CLIs run already. */
  admit: () => GatewayError | null
  /** How to spawn the CLI now (--resume once the conversation is stored). */
  spawnSpec: () => CliSpawnSpec
  readonly launch: CliLauncher
  /** The session's status changed (as seen from outside: running counts). */
  changed: () => void
  /** Gives the lease up once everything is stored. */
  disown: () => Promise<void>
  armIdle: () => void
}

export class SessionCli {
  readonly #h: SessionCliHost
  #cli: CliHandle | null = null
  #stopping = false
  /** True from a CLI's start until its exit has been recorded (its status frame and record queued). */
  #exitPending = false
  /** Who waits for that (close); a promise is made only for them, not per CLI (issue 14). */
  #exitWaiters: Waiters<void> | null = null
  /** While the spawn helper starts the CLI (CliHandle.pending): who waits to learn whether it runs. */
  #startWaiters: Waiters<GatewayError | null> | null = null
  #starting = false

  constructor (host: SessionCliHost) {
    this.#h = host
  }

  get running (): boolean { return this.#cli !== null }
  get pid (): number | null { return this.#cli?.pid ?? null }
  get stopping (): boolean { return this.#stopping }

  get state (): CliState {
    return this.#cli === null ? 'stopped' : this.#stopping ? 'stopping' : 'running'
  }

  /** Starts the CLI (`--resume` once the conversation is stored); `opening` is the holder's initialize that starts it. */
  start (opening?: ControlRequestFrame): GatewayError | null {
    const h = this.#h
    if (this.#cli !== null) return null
    if (!h.owned()) return new GatewayError('session_elsewhere')
    const refused = h.admit()
    if (refused !== null) return refused
    this.#stopping = false
    h.turns.clear()
    h.cliOutput.cliStarted()
    let cli: CliHandle
    try {
      const spec: CliSpawnSpec = h.spawnSpec()
      // spawn itself throws for some failures (E2BIG: arguments or environment too large).
      cli = h.launch(spec, {
        onLine: (line) => { if (this.#cli === cli) h.cliOutput.line(line) },
        onOversize: (bytes) => h.cliOutput.reject('too_large', bytes, ''),
        onExit: (exit) => { if (this.#cli === cli) this.#onExit(exit) },
        onStart: () => { if (this.#cli === cli) this.#began() },
        onStartFailed: (err) => { if (this.#cli === cli) this.#startFailed(err) }
      })
    } catch (err) {
      return this.#failed(err)
    }
    this.#cli = cli
    // Started (again) while the lines of the CLI before it still wait behind the store's append:
    // the pause asked of that one holds for this one, until onBacklog(false).
    if (h.events.backlogged) cli.pauseOutput?.()
    this.#exitPending = true
    // Started by the spawn helper: `starting` (with the pid) once it says the CLI runs. Counted
    // as running from now, so a start admitted meanwhile sees this one (MAX_SESSIONS).
    if (cli.pending === true) {
      this.#starting = true
      h.changed()
    } else h.statusRecorder.set('starting')
    h.control.cliStarted(opening)
    h.armIdle()
    return null
  }

  /**
   * Settles once the CLI start() began is known to run (at once when it
   * started synchronously), with the error when starting it failed after all
   * (what start() returns for a spawn that throws at once).
   */
  started (): Promise<GatewayError | null> {
    if (!this.#starting) return Promise.resolve(null)
    return (this.#startWaiters ??= new Waiters()).wait()
  }

  #began (): void {
    this.#starting = false
    if (!this.#stopping) this.#h.statusRecorder.set('starting')
    this.#startWaiters?.wakeAll(null)
  }

  /** The spawn helper could not start the CLI: as when spawn() throws in start(), but later. */
  #startFailed (err: Error): void {
    const h = this.#h
    this.#starting = false
    this.#cli = null
    this.#stopping = false
    h.idle.disarm()
    // The message that asked for it was counted as a turn: no CLI runs it.
    h.turns.exited()
    h.control.cliExited()
    const error = this.#failed(err)
    this.#exitDone()
    this.#startWaiters?.wakeAll(error)
  }

  /**
   * A start that failed, at once or later: recorded (exited, spawn_failed),
   * and the lease given up as after an exit, or this node would keep (and
   * renew) it with no CLI, and every node's next message would come here to
   * fail again instead of starting the CLI where it can run. A failed create
   * gives it up this way too (session-creation.ts waits for it).
   */
  #failed (err: unknown): GatewayError {
    const h = this.#h
    const error = h.statusRecorder.spawnFailed(err)
    if (!h.gone()) void h.disown()
    return error
  }

  /** Ends the CLI: stdin closed, SIGTERM, SIGKILL. History and record stay. */
  async stop (why: string): Promise<void> {
    const h = this.#h
    h.idle.disarm()
    const cli = this.#cli
    if (cli === null) return
    // Asked again while it ends (a repeated DELETE, the idle timer): the same end, recorded once.
    if (!this.#stopping) {
      h.log.info({ why }, 'stopping session')
      this.#stopping = true
      h.statusRecorder.set('stopping')
    }
    await cli.stop()
  }

  /** Ends the CLI without recording `stopping` (the session is fenced off or drops it). */
  end (): void {
    this.#h.idle.disarm()
    const cli = this.#cli
    this.#stopping = true
    if (cli !== null) void cli.stop()
  }

  /** A line for the CLI's stdin; dropped, with a warning, when it cannot take it. */
  write (message: Record<string, unknown>): void {
    if (this.#cli === null || !this.#cli.write(JSON.stringify(message))) {
      this.#h.log.warn({ type: message.type }, 'CLI stdin unavailable; message dropped')
    }
  }

  /** The store's append is behind (true) or caught up (false): the CLI's output pauses, then goes on. */
  backlog (full: boolean): void {
    if (full) this.#cli?.pauseOutput?.()
    else this.#cli?.resumeOutput?.()
  }

  /** Settles once the running CLI's exit has been recorded (at once when none runs). */
  exitHandled (): Promise<void> {
    if (!this.#exitPending) return Promise.resolve()
    return (this.#exitWaiters ??= new Waiters()).wait()
  }

  #onExit (exit: CliExit): void {
    const h = this.#h
    h.metrics.cliExited(exit.code, exit.signal, exit.oomKills)
    this.#cli = null
    h.saves.unwatch()
    h.idle.disarm()
    const stopped = this.#stopping
    this.#stopping = false
    h.turns.exited()
    h.control.cliExited()
    if (h.gone()) { this.#exitDone(); return }
    h.statusRecorder.exited(exit, stopped)
    this.#exitDone()
    void h.disown()
  }

  #exitDone (): void {
    this.#exitPending = false
    this.#exitWaiters?.wakeAll()
  }
}
