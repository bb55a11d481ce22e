/**
 * How each permission answer a holder sent on the WebSocket ended, for the
 * promise allow/deny/alwaysAllow return. The gateway says so only
 * indirectly: a recorded `permission_resolved` naming who answered (this
 * connection, or another client first), or an `error` frame about the
 * request (`already_resolved` when another answer won, other codes when
 * this one was refused). Losing the first-answer-wins race is an outcome,
 * not an error: its `already_resolved` frame is absorbed here.
 */
import type { AnswerOutcome } from './connection-types.js'

/** Client ids this connection had, to recognise its own answers after reconnects (most recent kept). */
const OWN_IDS_MAX = 50
/** Prompts another answer won, whose `already_resolved` refusal may still come (oldest forgotten first). */
const LATE_MAX = 100

export class AnswerOutcomes {
  readonly #waiting = new Map<string, Array<(outcome: AnswerOutcome) => void>>()
  readonly #late = new Set<string>()
  readonly #ownIds = new Set<string>()

  /** A hello gave this connection `clientId`: `permission_resolved` frames by it are this connection's answers. */
  attachedAs (clientId: string): void {
    this.#ownIds.delete(clientId)
    this.#ownIds.add(clientId)
    if (this.#ownIds.size > OWN_IDS_MAX) this.#ownIds.delete(this.#ownIds.values().next().value as string)
  }

  /** Settles when the answer sent for `requestId` is known to have been taken or not. */
  wait (requestId: string): Promise<AnswerOutcome> {
    return new Promise((resolve) => {
      const list = this.#waiting.get(requestId) ?? []
      list.push(resolve)
      this.#waiting.set(requestId, list)
    })
  }

  /** Settles every answer waiting on `requestId` with `outcome`. */
  settle (requestId: string, outcome: AnswerOutcome['outcome'], code?: string): void {
    const list = this.#waiting.get(requestId)
    if (list === undefined) return
    this.#waiting.delete(requestId)
    for (const resolve of list) resolve({ requestId, outcome, ...(code === undefined ? {} : { code }) })
  }

  /** The prompt ended (`by`: the client id that answered, or null when unknown). */
  ended (requestId: string, by: string | null): void {
    if (!this.#waiting.has(requestId)) return
    const ours = by !== null && this.#ownIds.has(by)
    if (!ours) {
      this.#late.add(requestId)
      if (this.#late.size > LATE_MAX) this.#late.delete(this.#late.values().next().value as string)
    }
    this.settle(requestId, ours ? 'answered' : 'already_resolved')
  }

  /**
   * The gateway refused an answer about `requestId` with `code`. Returns
   * true when that is the lost race (`already_resolved` for an answer sent
   * here): no error to report.
   */
  refused (requestId: string, code: string): boolean {
    if (code === 'already_resolved') {
      if (this.#waiting.has(requestId)) { this.settle(requestId, 'already_resolved'); return true }
      return this.#late.delete(requestId)
    }
    this.settle(requestId, 'refused', code)
    return false
  }

  /** The connection was closed for good: every waiting answer ends `refused` with `code`. */
  settleAll (code: string): void {
    for (const requestId of [...this.#waiting.keys()]) this.settle(requestId, 'refused', code)
  }
}
