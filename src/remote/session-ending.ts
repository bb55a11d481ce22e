/**
 * The end of a session claude-remote started or attached: DELETE stops the
 * gateway's CLI, and the host still gets every line up to the session's
 * last seq (its final status included) before claude-remote exits — as the
 * CLI prints its last lines before it exits. Bounded: a gateway that does
 * not answer does not keep the host waiting.
 */
import type { GatewayApi } from './gateway-api.js'

/** After DELETE: how long to wait for the CLI's last lines and the session's final status. */
const END_WAIT_MS = 15_000
/** After SIGTERM: how long the DELETE may take (the SDK sends SIGKILL not long after). */
const SIGTERM_STOP_MS = 3_000

export class SessionEnding {
  readonly #api: GatewayApi
  readonly #warn: (message: string) => void
  readonly #seenSeq: () => number
  readonly #endWaitMs: number
  #started = false
  /** The DELETE, settled either way. */
  #stopping: Promise<void> = Promise.resolve()
  #target: number | null = null
  #caughtUp: (() => void) | null = null

  /** `seenSeq`: the highest seq given to the host so far; `endWaitMs`: the bound on that wait, END_WAIT_MS unless a test shortens it (the DELETE keeps END_WAIT_MS). */
  constructor (deps: { api: GatewayApi, warn: (message: string) => void, seenSeq: () => number, endWaitMs?: number | undefined }) {
    this.#api = deps.api
    this.#warn = deps.warn
    this.#seenSeq = deps.seenSeq
    this.#endWaitMs = deps.endWaitMs ?? END_WAIT_MS
  }

  /** True once the end has begun. */
  get started (): boolean {
    return this.#started
  }

  /** Marks the end as begun; false when it already was (an end runs once). */
  begin (): boolean {
    if (this.#started) return false
    this.#started = true
    return true
  }

  /**
   * DELETEs the session, then resolves once the host has been given every
   * seq up to the session's last (see `check`), or after END_WAIT_MS;
   * `silent` (SIGTERM: nothing more is printed) waits for the DELETE only,
   * at most SIGTERM_STOP_MS.
   */
  async stopSession (sessionId: string, silent: boolean): Promise<void> {
    const caughtUp = new Promise<void>((resolve) => { this.#caughtUp = resolve })
    const bounded = new Promise<void>((resolve) => setTimeout(resolve, silent ? 0 : this.#endWaitMs).unref())
    try {
      const deleting = this.#api.deleteSession(sessionId, silent ? SIGTERM_STOP_MS : END_WAIT_MS)
      this.#stopping = deleting.then(() => {}, () => {})
      const session = await deleting
      // Everything up to the session's last seq (its final status included) reaches the host first.
      this.#target = typeof session.last_seq === 'number' ? session.last_seq : this.#seenSeq()
      this.check()
    } catch (err) {
      this.#warn(`could not stop the session: ${err instanceof Error ? err.message : String(err)}`)
      this.#caughtUp?.()
    }
    await Promise.race([caughtUp, bounded])
  }

  /** Called after each gateway frame: the wait ends once the host has the session's last seq. */
  check (): void {
    if (this.#target !== null && this.#seenSeq() >= this.#target) this.#caughtUp?.()
  }

  /** SIGTERM during the end: the DELETE already sent is waited for, SIGTERM_STOP_MS at most. */
  async stopSent (): Promise<void> {
    await Promise.race([this.#stopping, new Promise<void>((resolve) => setTimeout(resolve, SIGTERM_STOP_MS).unref())])
  }
}
