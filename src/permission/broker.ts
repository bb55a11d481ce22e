/**
 * Pending CLI control requests (permission prompts, hook callbacks, MCP
 * messages, ...). They live in session state, never in a connection, so a
 * prompt survives its holder disconnecting and is offered again to whoever
 * holds the session next. Every request ends exactly once: answered,
 * timed out, or cancelled; the first answer wins.
 */
import type { PermissionAnswer } from '../protocol/client-frames.js'

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

export type Decision = 'allowed' | 'denied' | 'timed_out' | 'cancelled' | 'answered'

export interface BrokerOptions {
  /** 0 = permission prompts wait for ever. */
  permissionTimeoutMs: number
  /** Other control requests always time out (an unanswered hook blocks the CLI). */
  controlTimeoutMs: number
  onTimeout: (pending: PendingRequest) => void
}

/** How many resolved ids are remembered to tell `already_resolved` from `unknown_request`. */
const RESOLVED_MEMORY = 1000

export class PermissionBroker {
  readonly #o: BrokerOptions
  readonly #pending = new Map<string, { entry: PendingRequest; timer: NodeJS.Timeout | null }>()
  readonly #resolved = new Set<string>()

  constructor (options: BrokerOptions) {
    this.#o = options
  }

  get size (): number { return this.#pending.size }

  add (entry: PendingRequest): void {
    const ms = entry.subtype === 'can_use_tool' ? this.#o.permissionTimeoutMs : this.#o.controlTimeoutMs
    const timer = ms > 0
      ? setTimeout(() => {
        if (this.take(entry.requestId) !== undefined) this.#o.onTimeout(entry)
      }, ms)
      : null
    timer?.unref()
    this.#pending.set(entry.requestId, { entry, timer })
  }

  get (requestId: string): PendingRequest | undefined {
    return this.#pending.get(requestId)?.entry
  }

  /** Removes and returns a pending request; it then counts as resolved. */
  take (requestId: string): PendingRequest | undefined {
    const slot = this.#pending.get(requestId)
    if (slot === undefined) return undefined
    if (slot.timer !== null) clearTimeout(slot.timer)
    this.#pending.delete(requestId)
    this.#resolved.add(requestId)
    if (this.#resolved.size > RESOLVED_MEMORY) {
      this.#resolved.delete(this.#resolved.values().next().value as string)
    }
    return slot.entry
  }

  wasResolved (requestId: string): boolean {
    return this.#resolved.has(requestId)
  }

  /** Pending requests, oldest first. */
  list (): PendingRequest[] {
    return [...this.#pending.values()].map((s) => s.entry)
  }

  /** Takes every pending request (the CLI exited). */
  takeAll (): PendingRequest[] {
    return this.list().filter((e) => this.take(e.requestId) !== undefined)
  }
}

export const DEFAULT_DENY_MESSAGE = 'The user denied this tool use.'

/**
 * Completes a holder's answer to `can_use_tool` the way the CLI needs it:
 * an allow always carries `updatedInput` (CLIs since 2.1.112 deny without it),
 * a deny always carries a `message`, and both carry `toolUseID` so the CLI
 * can match the answer even if it no longer knows the request_id.
 */
export function completePermissionAnswer (answer: PermissionAnswer, request: Record<string, unknown>): Record<string, unknown> {
  const toolUseID = typeof request.tool_use_id === 'string' ? request.tool_use_id : undefined
  if (answer.behavior === 'allow') {
    const input = isRecord(request.input) ? request.input : {}
    return { ...answer, updatedInput: answer.updatedInput ?? input, ...(toolUseID === undefined ? {} : { toolUseID }) }
  }
  return {
    ...answer,
    message: answer.message === undefined || answer.message === '' ? DEFAULT_DENY_MESSAGE : answer.message,
    ...(toolUseID === undefined ? {} : { toolUseID })
  }
}

/** The answer the gateway gives when nobody answered a prompt in time. */
export function timeoutDenial (request: Record<string, unknown>, timeoutMs: number): Record<string, unknown> {
  const toolUseID = typeof request.tool_use_id === 'string' ? request.tool_use_id : undefined
  return {
    behavior: 'deny',
    message: `No client answered this permission prompt within ${timeoutMs} ms (PERMISSION_TIMEOUT_MS); the gateway denied it and interrupted the turn. The user did not deny it.`,
    interrupt: true,
    ...(toolUseID === undefined ? {} : { toolUseID })
  }
}

function isRecord (value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
