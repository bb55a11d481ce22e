/**
 * The turns a session's CLI is running (user messages it has not printed a
 * result for yet), and who waits for them to end: a node that drains lets
 * its turns end before it stops their CLIs (SHUTDOWN_GRACE_MS). Counting
 * results alone is not enough: some messages end without one (an `interrupt`
 * with `cancel_queued` cancels queued ones; the CLI may run queued messages
 * as one turn), so the CLI's own `session_state_changed` settles the count.
 */
export class Turns {
  #pending = 0
  /** Woken whenever no turn is running any more (drain). */
  #waiters: Array<() => void> = []

  get pending (): number { return this.#pending }

  /** A message was written to the CLI. */
  begin (): void { this.#pending++ }

  /** The CLI printed a turn's result. */
  end (): void {
    this.#pending = Math.max(0, this.#pending - 1)
    if (this.#pending === 0) this.#wake()
  }

  /**
   * The CLI's `session_state_changed`: `idle` says its turn and every queued
   * one ended. An `idle` printed before it read a message written meanwhile
   * is followed by `running` once it reads it: a turn runs again.
   */
  cliState (state: unknown): void {
    if (state === 'idle') this.exited()
    else if ((state === 'running' || state === 'requires_action') && this.#pending === 0) this.#pending = 1
  }

  /** A CLI starts: nothing it runs yet. */
  clear (): void { this.#pending = 0 }

  /** The CLI exited: whatever it was running has ended. */
  exited (): void {
    this.#pending = 0
    this.#wake()
  }

  /**
   * Waits (until `deadline`, ms since the epoch) for the turns running now,
   * and those that start meanwhile, to finish, while `running` says the CLI runs.
   */
  async drain (deadline: number, running: () => boolean): Promise<void> {
    while (running() && this.#pending > 0 && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, deadline - Date.now())
        this.#waiters.push(() => { clearTimeout(timer); resolve() })
      })
    }
  }

  #wake (): void {
    const waiters = this.#waiters
    this.#waiters = []
    for (const wake of waiters) wake()
  }
}
