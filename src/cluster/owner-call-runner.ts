/**
 * The owner's side of an HTTP call another node routed to it (the caller's
 * side is outgoing-calls.ts): carries it out only while the store says this
 * node still holds the session's lease, and keeps the caller waiting with
 * `busy` while it runs.
 */
import type { Logger } from 'pino'
import { GatewayError } from '../errors.js'
import type { BusMessage, BusMessageOf, PostMessage } from './bus-message.js'
import type { RoutedSession, SessionCallOp } from './routed-session.js'

type CallMessage = BusMessageOf<'call'>

export interface OwnerCallRunnerOptions {
  /** This node, as lease holders are named. */
  node: string
  post: PostMessage
  logger: Logger
  /** A session this node owns, else null. */
  owned: (sessionId: string) => RoutedSession | null
  /** The node holding a session's lease; undefined when that is not known. */
  holder: (sessionId: string) => Promise<string | null | undefined>
  /** The callers' call timeout: `busy` goes out every half of it. */
  callTimeoutMs?: number
  /** Creates a session here for a node that is full (src/cluster/placement.ts); resolves with its snapshot. */
  onCreate?: (tenant: string, options: unknown) => Promise<unknown>
}

export class OwnerCallRunner {
  readonly #o: OwnerCallRunnerOptions

  constructor (options: OwnerCallRunnerOptions) {
    this.#o = options
  }

  /** A `call` message: created here, carried out on a session owned here, or sent back `moved`. */
  handle (m: CallMessage): void {
    if (m.op === 'create') { this.#create(m); return }
    if (this.#o.owned(m.s) === null) { this.#o.post(m.n, { k: 'reply', id: m.id, ok: false, moved: true }); return }
    this.#call(m).catch((err: unknown) => { this.#o.logger.error({ err, op: m.op }, 'node bus call failed') })
  }

  /**
   * Carries out a call on a session owned here once the store says this
   * node still holds its lease. An owner paused past its lease (SIGSTOP, a
   * VM freeze) wakes with calls in its inbox before its next renewal tells
   * it the session moved: carried out at once, an answer reached its fenced
   * CLI (a tool run for a turn nobody stores) and the caller was told 200,
   * as client frames were before they waited for LeaseKeeper.confirm. A
   * lease held by another node sends the caller back (`moved`: it handles
   * the request where the session runs now); a lapsed one nobody took yet
   * is answered `node_unavailable` (this node may take it back at its next
   * renewal: the caller tries again). A store that does not answer decides
   * nothing: the append fencing still stops a stale writer.
   */
  async #call (m: CallMessage): Promise<void> {
    const holder = await this.#o.holder(m.s)
    const session = this.#o.owned(m.s)
    if (session === null || (holder !== undefined && holder !== null && holder !== this.#o.node)) {
      this.#o.post(m.n, { k: 'reply', id: m.id, ok: false, moved: true })
      return
    }
    if (holder === null) { this.#o.post(m.n, failed(m.id, new GatewayError('node_unavailable'))); return }
    this.#carryOut(m, async () => await session.call(m.op as SessionCallOp, m.a))
  }

  #create (m: CallMessage): void {
    const create = this.#o.onCreate
    if (create === undefined) { this.#o.post(m.n, failed(m.id, new GatewayError('too_many_sessions'))); return }
    this.#carryOut(m, async () => await create(String(m.a[0]), m.a[1]))
  }

  /**
   * Runs a call and replies with its outcome; while it runs (a stop waits
   * for the CLI to go, up to twice CLI_STOP_TIMEOUT_MS), the caller hears
   * every half call timeout that this node is at work on it: it waits on,
   * where silence means this node died or hangs.
   */
  #carryOut (m: CallMessage, run: () => Promise<unknown>): void {
    const busy = setInterval(() => { this.#o.post(m.n, { k: 'busy', id: m.id }) }, Math.max(50, (this.#o.callTimeoutMs ?? 5000) / 2))
    busy.unref()
    run().then(
      (v) => { this.#o.post(m.n, { k: 'reply', id: m.id, ok: true, v }) },
      (err: unknown) => { this.#o.post(m.n, failed(m.id, err)) })
      .finally(() => { clearInterval(busy) })
  }
}

/** A reply saying a call failed; a GatewayError keeps its code, so the caller answers as this node would have. */
function failed (id: string, err: unknown): BusMessage {
  return err instanceof GatewayError
    ? { k: 'reply', id, ok: false, e: err.message, c: err.code }
    : { k: 'reply', id, ok: false, e: err instanceof Error ? err.message : String(err) }
}
