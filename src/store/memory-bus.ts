/**
 * The in-process node bus, for the memory store: every "node" lives in this
 * one process, so an inbox is a callback and `send` hands the message to it
 * on a microtask (asynchronously, as over Redis, and in the order sent).
 *
 * A message to a node nobody started on this bus is dropped, not kept for a
 * later `start`: in one process an inbox nobody reads has no reader to
 * come, and `start` promises only messages sent after it anyway. Several
 * nodes may be started on one bus (tests run a few "nodes" in a process);
 * each node once.
 */
import type { NodeBus } from './store.js'

export interface MemoryBusConfig {
  /** Errors thrown by an `onMessage` (the message counts as delivered). For logs. */
  onError?: ((err: Error) => void) | undefined
}

export class MemoryBus implements NodeBus {
  readonly #inboxes = new Map<string, (message: string) => void>()
  readonly #onError: ((err: Error) => void) | undefined
  #closed = false

  constructor (config: MemoryBusConfig = {}) {
    this.#onError = config.onError
  }

  async start (node: string, onMessage: (message: string) => void): Promise<void> {
    if (this.#closed) throw new Error('node bus is closed')
    if (this.#inboxes.has(node)) throw new Error(`node ${node} is already reading its inbox`)
    this.#inboxes.set(node, onMessage)
  }

  async send (node: string, message: string): Promise<void> {
    if (this.#closed) throw new Error('node bus is closed')
    const onMessage = this.#inboxes.get(node)
    if (onMessage === undefined) return
    // Microtasks run in the order queued: per sender, and overall, the order of the sends.
    queueMicrotask(() => {
      if (this.#closed || this.#inboxes.get(node) !== onMessage) return
      try {
        onMessage(message)
      } catch (err) {
        this.#report(err)
      }
    })
  }

  async close (): Promise<void> {
    this.#closed = true
    this.#inboxes.clear()
  }

  #report (err: unknown): void {
    try {
      this.#onError?.(err instanceof Error ? err : new Error(String(err)))
    } catch {
      // The logger's own problem.
    }
  }
}
