/**
 * The caller's side of an HTTP call routed to a session's owner (the node
 * the request reached asks the node that runs the CLI): waits for the
 * owner's `reply`, and for as long as it keeps saying `busy`. The owner's
 * side is owner-call-runner.ts.
 */
import { GatewayError } from '../errors.js'
import type { BusMessageOf, PostMessage } from './bus-message.js'
import { NotOwner } from './not-owner.js'
import type { CallOp } from './routed-session.js'

export interface OutgoingCallsOptions {
  /** This node: call ids are unique per node, and the owner replies here. */
  node: string
  post: PostMessage
  /** How long a call waits for the owner's reply (default 5000 ms). */
  callTimeoutMs?: number
}

interface Waiting { resolve: (v: unknown) => void, reject: (e: Error) => void, timer: NodeJS.Timeout, expire: () => NodeJS.Timeout }

export class OutgoingCalls {
  readonly #o: OutgoingCallsOptions
  /** Calls waiting for their owner's reply, by call id. */
  readonly #calls = new Map<string, Waiting>()
  #callCount = 0

  constructor (options: OutgoingCallsOptions) {
    this.#o = options
  }

  /**
   * Asks the owner of a session to do what an HTTP request here asked
   * (`answer`, `stop`, `pending`) and resolves with its result. Rejects with
   * NotOwner when that node does not own the session (the caller handles it
   * itself), or an Error when the owner does not reply in time: nor says
   * it is still at work on it (`busy`), as while a CLI takes its time to stop.
   */
  async call (owner: string, sessionId: string, op: CallOp, args: unknown[]): Promise<unknown> {
    const id = `${this.#o.node}:${++this.#callCount}`
    return await new Promise((resolve, reject) => {
      const expire = (): NodeJS.Timeout => setTimeout(() => {
        this.#calls.delete(id)
        reject(new Error(`node ${owner} did not answer in time`))
      }, this.#o.callTimeoutMs ?? 5000)
      this.#calls.set(id, { resolve, reject, timer: expire(), expire })
      this.#o.post(owner, { k: 'call', s: sessionId, id, n: this.#o.node, op, a: args })
    })
  }

  /** The owner's outcome of a call made here. */
  reply (m: BusMessageOf<'reply'>): void {
    const waiting = this.#calls.get(m.id)
    if (waiting === undefined) return
    this.#calls.delete(m.id)
    clearTimeout(waiting.timer)
    if (m.ok) waiting.resolve(m.v)
    else if (m.moved === true) waiting.reject(new NotOwner())
    else waiting.reject(m.c !== undefined ? new GatewayError(m.c, m.e) : new Error(m.e ?? 'the owner failed'))
  }

  /** The owner is still at work on a call: it gets a full call timeout again. */
  busy (m: BusMessageOf<'busy'>): void {
    const waiting = this.#calls.get(m.id)
    if (waiting === undefined) return
    clearTimeout(waiting.timer)
    waiting.timer = waiting.expire()
  }

  /** Fails every call still waiting (the gateway shuts down). */
  close (): void {
    for (const [id, waiting] of this.#calls) {
      clearTimeout(waiting.timer)
      waiting.reject(new Error('gateway shutting down'))
      this.#calls.delete(id)
    }
  }
}
