/**
 * The client's node's record of the frames it routed to a session's owner
 * and the owner has not confirmed yet (`ack`). A frame sent to a node that
 * dies, hangs past its lease, or no longer owns the session (`moved`) is
 * handed back to the session here, so it is neither lost nor run twice.
 */
import type { Logger } from 'pino'
import type { ClientPort } from '../session/audience.js'
import type { ClientFrame } from '../protocol/client-frames.js'
import type { BusMessageOf } from './bus-message.js'
import type { RoutedSession } from './routed-session.js'

/**
 * How long a node takes a message sent to it (the bus refuses older ones as
 * `stale`, src/store/signed-bus.ts): a frame not confirmed by then will never
 * be handled by the node it went to.
 */
const BUS_MAX_AGE_MS = 120_000

/** A frame sent to an owner (`owner`, a node) and not yet confirmed by it. */
interface Unconfirmed { id: number, sessionId: string, port: ClientPort, frame: ClientFrame, sentAt: number, owner: string }

export interface UnconfirmedFramesOptions {
  logger: Logger
  /** A session loaded on this node, if any. */
  find: (sessionId: string) => RoutedSession | undefined
  /** The router's heartbeat: a frame unconfirmed for three of them is late. */
  heartbeatMs: number
  /** The node holding a session's lease; undefined when that is not known. */
  holder: (sessionId: string) => Promise<string | null | undefined>
  /** Stops routing `client` to `owner`, if it is still routed there. */
  forgetRoute: (client: string, owner: string) => void
}

export class UnconfirmedFrames {
  readonly #o: UnconfirmedFramesOptions
  /** Frames sent to owners and not confirmed yet, by client id, in the order sent. */
  readonly #unconfirmed = new Map<string, Unconfirmed[]>()
  /** Clients whose late frames wait for a lease lookup (one at a time per client). */
  readonly #checking = new Set<string>()
  #frameCount = 0

  constructor (options: UnconfirmedFramesOptions) {
    this.#o = options
  }

  /** Records a frame of `port`'s about to be sent to `owner`; returns its id (the owner confirms it by that). */
  sent (port: ClientPort, sessionId: string, owner: string, frame: ClientFrame): number {
    const id = ++this.#frameCount
    let list = this.#unconfirmed.get(port.id)
    if (list === undefined) this.#unconfirmed.set(port.id, list = [])
    list.push({ id, sessionId, port, frame, sentAt: Date.now(), owner })
    return id
  }

  /** Forgets a client's unconfirmed frames and returns them, in order. */
  take (client: string): ClientFrame[] {
    const unconfirmed = (this.#unconfirmed.get(client) ?? []).map((u) => u.frame)
    this.#unconfirmed.delete(client)
    return unconfirmed
  }

  ack (m: BusMessageOf<'ack'>): void {
    const list = this.#unconfirmed.get(m.c)
    if (list === undefined) return
    const at = list.findIndex((u) => u.id === m.i)
    if (at < 0) return
    // A node handles a client's frames in order: its ack confirms its earlier ones too, not
    // those sent to another node before the client was routed here (that node may be dead).
    const owner = (list[at] as Unconfirmed).owner
    const left = list.filter((u, k) => k > at || u.owner !== owner)
    if (left.length > 0) this.#unconfirmed.set(m.c, left)
    else this.#unconfirmed.delete(m.c)
  }

  /**
   * The node frame `id` of `client` went to does not own the session; `port`:
   * the client's, when that node is the one it is routed to (else undefined).
   */
  moved (sessionId: string, client: string, id: number, port: ClientPort | undefined): void {
    // This frame and every later one of the client sent to the same node went to a node
    // that does not own the session: all of them are handled here again. Frames sent to
    // another node since stay with that node; a frame no longer waiting was handed back
    // already (an earlier reply, or resendUnconfirmed), and what waits now went elsewhere.
    const list = this.#unconfirmed.get(client) ?? []
    const from = list.findIndex((u) => u.id === id)
    const to = from < 0 ? undefined : (list[from] as Unconfirmed).owner
    const again = list.filter((u, k) => k >= from && u.owner === to)
    const keep = list.filter((u, k) => !(k >= from && u.owner === to))
    if (keep.length > 0) this.#unconfirmed.set(client, keep)
    else this.#unconfirmed.delete(client)
    const back = again[0]?.port ?? port
    if (back !== undefined) this.#o.find(sessionId)?.ownerMoved(back, again.map((u) => u.frame))
  }

  /**
   * Frames an owner did not confirm within three heartbeats go back to their
   * sessions once that node no longer holds the session's lease (it died, or
   * hangs past its lease and another node took it): every frame of that
   * client sent to that node. Frames sent to another node since stay with it.
   * While that node still holds the lease (slow, not gone), or nobody does
   * yet (it may take it back as it wakes; else a node records the session
   * lost within a lease, which hands them back: SessionFollower), it may
   * still handle them, so they wait: handled here as well, an answer was
   * refused (`unknown_request`) though the owner took it, and the client,
   * no longer routed, had its later answers refused the same way. Past the
   * bus's age limit that node never will: they go back, and while it holds
   * the lease they are sent to it again.
   */
  resendUnconfirmed (): void {
    const late = Date.now() - 3 * this.#o.heartbeatMs
    for (const [client, list] of this.#unconfirmed) {
      const first = list[0]
      if (first === undefined || first.sentAt >= late || this.#checking.has(client)) continue
      this.#checking.add(client)
      void this.#o.holder(first.sessionId).then((holder) => {
        this.#checking.delete(client)
        this.#late(client, first, holder)
      })
    }
  }

  /** `first`, a client's oldest unconfirmed frame, is late; `holder` holds the session's lease now. */
  #late (client: string, first: Unconfirmed, holder: string | null | undefined): void {
    const list = this.#unconfirmed.get(client)
    if (list?.[0] !== first) return // confirmed, or handed back, meanwhile
    const expired = Date.now() - first.sentAt >= BUS_MAX_AGE_MS
    if (!expired && (holder === first.owner || holder === null)) return
    const again = list.filter((u) => u.owner === first.owner)
    const keep = list.filter((u) => u.owner !== first.owner)
    if (keep.length > 0) this.#unconfirmed.set(client, keep)
    else this.#unconfirmed.delete(client)
    // Still that node's client while it holds the lease: handled again, they go to it again.
    if (holder !== first.owner) this.#o.forgetRoute(client, first.owner)
    this.#o.logger.warn({ session: first.sessionId, frames: again.length, owner: first.owner, holder }, 'the owning node did not confirm routed frames in time; handling them here')
    this.#o.find(first.sessionId)?.ownerMoved(first.port, again.map((u) => u.frame))
  }
}
