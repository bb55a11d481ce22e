/**
 * Pending CLI control requests (permission prompts, hook callbacks, MCP
 * messages, ...). They live in session state, never in a connection, so a
 * prompt survives its holder disconnecting and is offered again to whoever
 * holds the session next. Every request ends exactly once: answered,
 * timed out, or cancelled; the first answer wins.
 */
import type { Timers } from './control-effects.js'
import { RecentIds } from './recent-ids.js'

export interface PendingRequest {
  requestId: string
  /** `can_use_tool`, `hook_callback`, `mcp_message`, ... */
  subtype: string
  /** The CLI's `request` object. */
  request: Record<string, unknown>
  /** Seq of the recorded control_request frame. */
  seq: number
  /** The recorded frame, re-sent to a new holder. */
  frame: string
  createdAt: number
}

export interface PendingRequestsOptions {
  /** 0 = permission prompts wait for ever. */
  permissionTimeoutMs: number
  /** Other control requests always time out (an unanswered hook blocks the CLI). */
  controlTimeoutMs: number
  onTimeout: (pending: PendingRequest) => void
  timers: Timers
}

/** How many resolved ids are remembered to tell `already_resolved` from `unknown_request`. */
const RESOLVED_MEMORY = 1000

export class PendingRequests {
  readonly #o: PendingRequestsOptions
  /** Made on first use: most sessions never get a control request (issue 14: memory per idle session). */
  #pending: Map<string, { entry: PendingRequest, timer: unknown }> | null = null
  readonly #resolved = new RecentIds(RESOLVED_MEMORY)

  constructor (options: PendingRequestsOptions) {
    this.#o = options
  }

  get size (): number { return this.#pending?.size ?? 0 }

  /** A request asked again under an id still pending (a CLI repeating itself) replaces it, with a timeout of its own. */
  add (entry: PendingRequest): void {
    const ms = entry.subtype === 'can_use_tool' ? this.#o.permissionTimeoutMs : this.#o.controlTimeoutMs
    const timer = ms > 0
      ? this.#o.timers.set(() => {
        // Only its own timeout: one replaced under the same id must not end its successor early.
        if (this.#pending?.get(entry.requestId)?.entry === entry && this.take(entry.requestId) !== undefined) this.#o.onTimeout(entry)
      }, ms)
      : null
    this.#pending ??= new Map()
    const replaced = this.#pending.get(entry.requestId)
    if (replaced !== undefined && replaced.timer !== null) this.#o.timers.clear(replaced.timer)
    this.#pending.set(entry.requestId, { entry, timer })
  }

  get (requestId: string): PendingRequest | undefined {
    return this.#pending?.get(requestId)?.entry
  }

  /** Removes and returns a pending request; it then counts as resolved. */
  take (requestId: string): PendingRequest | undefined {
    const slot = this.#pending?.get(requestId)
    if (slot === undefined) return undefined
    if (slot.timer !== null) this.#o.timers.clear(slot.timer)
    this.#pending?.delete(requestId)
    this.#resolved.seen(requestId)
    return slot.entry
  }

  wasResolved (requestId: string): boolean {
    return this.#resolved.has(requestId)
  }

  /** Pending requests, oldest first. */
  list (): PendingRequest[] {
    return this.#pending === null ? [] : [...this.#pending.values()].map((s) => s.entry)
  }

  /** Takes every pending request (the CLI exited). */
  takeAll (): PendingRequest[] {
    return this.list().filter((e) => this.take(e.requestId) !== undefined)
  }
}
