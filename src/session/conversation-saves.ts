/**
 * Saves a session's CLI conversation file to the store (nodes with local
 * config dirs), coalesced: turns end faster than saves, so one save runs and
 * one more follows if any was asked meanwhile. Only under this node's lease.
 *
 * While the CLI runs, the file is watched and saved again whenever the CLI
 * writes to it (each save sends only what is new): a node that dies
 * mid-turn leaves the turn's steps so far (the tool calls and results the CLI
 * had written) to the node that resumes it, not just the turns before.
 */
import type { Logger } from 'pino'
import { FencedError, type Lease } from '../store/store.js'
import type { SessionDeps } from './session-deps.js'

export interface ConversationSavesOptions {
  /** Absent: nothing is carried (one node, or a shared volume). */
  readonly conversation: SessionDeps<unknown>['conversation']
  /** This node's lease on the session, or null when it does not own it. */
  lease: () => Lease | null
  /** A save was refused as fenced: another node owns the session now. */
  onFenced: () => void
  /** True while the session's CLI runs (its file is watched only then). */
  cliRunning: () => boolean
  log: Logger
}

export class ConversationSaves {
  readonly #o: ConversationSavesOptions
  /** A conversation save running, and whether another is wanted after it. */
  #running: Promise<void> | null = null
  #again = false
  /** Stops watching the CLI's file; null when not watching. */
  #unwatch: (() => void) | null = null

  constructor (options: ConversationSavesOptions) {
    this.#o = options
  }

  async save (): Promise<void> {
    const carry = this.#o.conversation
    if (carry === undefined) return
    if (this.#running !== null) {
      this.#again = true
      await this.#running
      return
    }
    this.#running = (async () => {
      try {
        // Never done before #running is set: its end below must clear what this set.
        await undefined
        do {
          this.#again = false
          const lease = this.#o.lease()
          if (lease === null) return
          try {
            await carry.save(lease)
          } catch (err) {
            if (err instanceof FencedError) { this.#o.onFenced(); return }
            this.#o.log.warn({ err: (err as Error).message }, 'could not save the conversation to the store')
          }
          // The file exists once a save has looked (it may not before the first prompt).
          if (this.#unwatch === null && this.#o.cliRunning()) this.#unwatch = carry.watch(() => { void this.save() })
        } while (this.#again)
      } finally {
        // In the same step as the last check of #again: a save asked after it starts a run of its own.
        this.#running = null
      }
    })()
    await this.#running
  }

  /**
   * A step of a turn (a permission prompt, a tool's result): saves, which
   * starts the watch, unless the file is watched already (the watch then
   * sees the step's lines as the CLI writes them, a save now would only
   * read the file early).
   */
  stepped (): void {
    if (this.#unwatch === null) void this.save()
  }

  /** The CLI has exited: its file is no longer watched (the save at its end follows as before). */
  unwatch (): void {
    this.#unwatch?.()
    this.#unwatch = null
  }
}
