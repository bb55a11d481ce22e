/**
 * What an HTTP request asks of a session (answer a prompt, stop it, list its
 * pending prompts, show it) is done by whichever node runs its CLI: HTTP
 * requests reach any node. The node that gets one asks the owner through the
 * cluster router (src/cluster/router.ts); the owner carries it out with `call`.
 */
import type { Logger } from 'pino'
import { GatewayError } from '../errors.js'
import type { AnswerInput, AnswerResult } from '../control/control-effects.js'
import type { PendingRequest } from '../control/pending-requests.js'
import type { SessionRoute } from './session-deps.js'

export type OwnerOp = 'answer' | 'stop' | 'pending' | 'snapshot'

/** The session the calls are about, as done on this node. */
export interface OwnerCallsHost {
  readonly id: string
  /** Other nodes (absent: one node, everything is done here). */
  readonly route: SessionRoute | undefined
  readonly log: Logger
  /** True while this node holds the session's lease. */
  owned: () => boolean
  /**
   * True when this node holds the lease and may act now: confirmed with the
   * store first when this node may have lost it while paused (false, and the
   * session fenced, when another node took it: SessionLease.confirmed).
   */
  ownedNow: () => Promise<boolean>
  /** True when the session's CLI has stopped or exited (as far as this node knows). */
  ended: () => boolean
  /** Brings a session this node does not own up to date with the store. */
  refresh: () => Promise<void>
  snapshot: () => Record<string, unknown>
  answer: (requestId: string, input: AnswerInput, by: string) => AnswerResult
  stop: (why: string) => Promise<void>
  pending: () => PendingRequest[]
}

export class OwnerCalls {
  readonly #h: OwnerCallsHost

  constructor (host: OwnerCallsHost) {
    this.#h = host
  }

  /** On the owner: what an HTTP request made on another node asks (src/cluster/router.ts). */
  async call (op: OwnerOp, args: unknown[]): Promise<unknown> {
    const h = this.#h
    switch (op) {
      case 'snapshot': return h.snapshot()
      case 'answer': return h.answer(String(args[0]), args[1] as AnswerInput, String(args[2]))
      case 'stop': await h.stop(String(args[0])); return null
      case 'pending': return h.pending()
    }
  }

  /** `answer`, done by whichever node runs the CLI (HTTP answers reach any node). */
  async answer (requestId: string, input: AnswerInput, by: string): Promise<AnswerResult> {
    return await this.#onOwner('answer', [requestId, input, by], () => this.#h.answer(requestId, input, by)) as AnswerResult
  }

  /** `stop`, done by whichever node runs the CLI. */
  async stop (why: string): Promise<void> {
    await this.#onOwner('stop', [why], async () => { await this.#h.stop(why) })
  }

  /**
   * `snapshot` as the node running the CLI has it (its pid, holder, pending
   * prompts, turn); this node's own when it runs it or nobody does. The
   * owner's count of clients includes clients of other nodes.
   */
  async snapshot (): Promise<Record<string, unknown>> {
    const h = this.#h
    if (h.owned() || h.route === undefined || h.ended()) return h.snapshot()
    return await this.#onOwner('snapshot', [], () => h.snapshot()) as Record<string, unknown>
  }

  /** The pending CLI control requests, as the node running the CLI knows them. */
  async pending (): Promise<PendingRequest[]> {
    return await this.#onOwner('pending', [], () => this.#h.pending()) as PendingRequest[]
  }

  /**
   * Runs `local` when this node owns the session or nobody else does; else
   * asks the owner. An owner that turns out not to own it (it just stopped)
   * means the session is brought up to date and `local` runs here.
   *
   * An owner woken from a pause past its lease (SIGSTOP, a VM freeze) gets
   * the requests made on it meanwhile before its next renewal says whether
   * the session moved: done at once, an answer reached its fenced CLI and
   * a stop stopped that CLI, not the one running the session, both answered
   * 200. The lease is confirmed first; lost, this copy is fenced and the
   * request goes where the session runs now, as on any other node, or is
   * answered `node_unavailable` while nobody runs it (the caller tries again,
   * on a copy read afresh from the store).
   */
  async #onOwner (op: OwnerOp, args: unknown[], local: () => unknown): Promise<unknown> {
    const h = this.#h
    const route = h.route
    if (route === undefined) return await local()
    const fenced = h.owned() && !(await h.ownedNow())
    if (!fenced && h.owned()) return await local()
    const owner = await route.owner(h.id)
    if (owner === null || owner === route.node) {
      if (fenced) throw new GatewayError('node_unavailable')
      return await local()
    }
    try {
      return await route.call(owner, h.id, op, args)
    } catch (err) {
      if (!(err instanceof Error) || err.name !== 'NotOwner') {
        h.log.warn({ owner, op, err: (err as Error).message }, 'the node running the session did not answer')
        throw new GatewayError('node_unavailable')
      }
      if (fenced) throw new GatewayError('node_unavailable')
      await h.refresh()
      return await local()
    }
  }
}
