/**
 * Routes client frames between gateway nodes through the store's node bus,
 * so a client may connect to any node: the node that holds a session's
 * lease (its owner) runs the CLI and decides everything (holder, pending
 * prompts, first answer wins), exactly as on one node; a client on another
 * node is one more client of that owner's session, a `RemotePort`.
 *
 * - Client side (the node the client reached): `attach`, `frame`, `detach`
 *   post to the owner's inbox. The client's live frames do not travel on the
 *   bus: its node follows the session's log in the store (EventFeed) and
 *   relays them itself. Attachments are repeated every `heartbeatMs`, so an
 *   owner forgets clients of a node that died. Frames the owner has not
 *   confirmed yet: unconfirmed-frames.ts; HTTP calls: outgoing-calls.ts.
 * - Owner side: each message is handed to the owned session; what the session
 *   sends a remote client (errors, control responses, holder changes, a
 *   prompt redelivered to a new holder) goes back to the client's node
 *   (remote-clients.ts); HTTP calls: owner-call-runner.ts.
 *
 * Messages are JSON objects, `k` naming the kind (bus-message.ts);
 * docs/SCALING.md lists them.
 */
import { randomUUID } from 'node:crypto'
import type { Logger } from 'pino'
import type { ClientPort, Role } from '../session/audience.js'
import type { ClientFrame } from '../protocol/client-frames.js'
import type { NodeBus } from '../store/store.js'
import { holderChange, type BusMessage } from './bus-message.js'
import { OutgoingCalls } from './outgoing-calls.js'
import { OwnerCallRunner } from './owner-call-runner.js'
import { RemoteClients } from './remote-clients.js'
import type { CallOp, RoutedSession } from './routed-session.js'
import { UnconfirmedFrames } from './unconfirmed-frames.js'

export type { CallOp, RoutedSession, SessionCallOp } from './routed-session.js'
export { NotOwner } from './not-owner.js'

export interface ClusterRouterOptions {
  bus: NodeBus
  node: string
  logger: Logger
  /** A session loaded on this node, if any. */
  find: (sessionId: string) => RoutedSession | undefined
  /** How often a client's attachment is repeated to its owner; an owner forgets it after three missed. */
  heartbeatMs: number
  /** How long a call waits for the owner's reply (default 5000 ms). */
  callTimeoutMs?: number
  /** Creates a session here for a node that is full (src/cluster/placement.ts); resolves with its snapshot. */
  onCreate?: (tenant: string, options: unknown) => Promise<unknown>
  /** The node holding a session's lease now, or null (frames an owner is late to confirm wait while it still holds it). */
  owner?: (sessionId: string) => Promise<string | null>
}

/** `holds`: what the owner last said (a `holder` frame), unknown before it says anything. */
interface LocalClient { sessionId: string, port: ClientPort, owner: string, role: Role, holds?: boolean, rejoin?: boolean }

export class ClusterRouter {
  readonly #o: ClusterRouterOptions
  /** Clients of this node attached to sessions owned elsewhere, by client id. */
  readonly #local = new Map<string, LocalClient>()
  readonly #remote: RemoteClients
  readonly #frames: UnconfirmedFrames
  readonly #calls: OutgoingCalls
  readonly #runner: OwnerCallRunner
  #timer: NodeJS.Timeout | null = null

  constructor (options: ClusterRouterOptions) {
    this.#o = options
    const post = (node: string, message: BusMessage): void => { this.#post(node, message) }
    const holder = (sessionId: string): Promise<string | null | undefined> => this.#holder(sessionId)
    this.#remote = new RemoteClients({ post, find: options.find, heartbeatMs: options.heartbeatMs })
    this.#frames = new UnconfirmedFrames({
      logger: options.logger,
      find: options.find,
      heartbeatMs: options.heartbeatMs,
      holder,
      forgetRoute: (client, owner) => { if (this.#local.get(client)?.owner === owner) this.#local.delete(client) }
    })
    this.#calls = new OutgoingCalls({ node: options.node, post, callTimeoutMs: options.callTimeoutMs })
    this.#runner = new OwnerCallRunner({
      node: options.node,
      post,
      logger: options.logger,
      owned: (sessionId) => this.#owned(sessionId),
      holder,
      callTimeoutMs: options.callTimeoutMs,
      onCreate: options.onCreate
    })
  }

  async start (): Promise<void> {
    await this.#o.bus.start(this.#o.node, (text) => { this.#receive(text) })
    this.#remote.start()
    this.#timer = setInterval(() => { this.#heartbeat() }, this.#o.heartbeatMs)
    this.#timer.unref()
  }

  async close (): Promise<void> {
    if (this.#timer !== null) clearInterval(this.#timer)
    this.#timer = null
    this.#calls.close()
    await this.#o.bus.close()
  }

  // ---- the client's node ----

  /**
   * Makes `port` a client of the session owned by `owner`. `rejoin`: routed
   * here again after the session moved (it did not just attach), which every
   * message of it says, so an owner meeting it first takes it as such.
   */
  attach (owner: string, sessionId: string, port: ClientPort, role: Role, options: { rejoin?: boolean } = {}): void {
    const local: LocalClient = { sessionId, port, owner, role, ...(options.rejoin === true ? { rejoin: true } : {}) }
    this.#local.set(port.id, local)
    this.#post(owner, { k: 'attach', s: sessionId, c: port.id, n: this.#o.node, r: role, ...rejoined(local) })
  }

  /**
   * Sends a frame of `port`'s to the owner it is attached to; false when it is
   * attached to none. The owner confirms each frame; one not confirmed within
   * three heartbeats is handed back to the session (with every later one of
   * that client), so a frame sent to a node that dies is not lost. A user
   * message without a uuid gets one here: if the owner ran it and died
   * before confirming it, the copy handed back is then known by its uuid
   * (recorded in the session's log) and does not run twice.
   */
  frame (port: ClientPort, sent: ClientFrame): boolean {
    const local = this.#local.get(port.id)
    if (local === undefined) return false
    const frame = sent.type === 'user' && sent.uuid === undefined ? { ...sent, uuid: randomUUID() } : sent
    const id = this.#frames.sent(port, local.sessionId, local.owner, frame)
    this.#post(local.owner, { k: 'frame', s: local.sessionId, c: port.id, n: this.#o.node, r: seenAs(local), ...rejoined(local), f: frame, i: id })
    return true
  }

  /**
   * Stops routing `port` (its session stopped on the owner, or is owned here
   * now) and returns its frames the owner has not confirmed, in order: they
   * are the caller's to handle.
   */
  unroute (port: ClientPort): ClientFrame[] {
    const unconfirmed = this.#frames.take(port.id)
    this.detach(port)
    return unconfirmed
  }

  detach (port: ClientPort): void {
    const local = this.#local.get(port.id)
    if (local === undefined) return
    this.#local.delete(port.id)
    this.#frames.take(port.id)
    this.#post(local.owner, { k: 'detach', s: local.sessionId, c: port.id })
  }

  /** See OutgoingCalls.call: what an HTTP request here asks of the session's owner. */
  async call (owner: string, sessionId: string, op: CallOp, args: unknown[]): Promise<unknown> {
    return await this.#calls.call(owner, sessionId, op, args)
  }

  // ---- the owner's node ----

  /** Drops the remote clients of a session this node stopped owning (they attach again where it runs next). */
  dropRemote (sessionId: string): void {
    this.#remote.drop(sessionId)
  }

  #receive (text: string): void {
    let message: BusMessage
    try {
      message = JSON.parse(text) as BusMessage
    } catch {
      this.#o.logger.warn({ preview: text.slice(0, 200) }, 'node bus message is not JSON; dropped')
      return
    }
    try {
      this.#dispatch(message)
    } catch (err) {
      this.#o.logger.error({ err, kind: message.k }, 'node bus message failed')
    }
  }

  #dispatch (m: BusMessage): void {
    switch (m.k) {
      case 'attach': {
        const session = this.#owned(m.s)
        if (session === null) { this.#post(m.n, { k: 'moved', s: m.s, c: m.c, n: this.#o.node }); return }
        this.#remote.port(m.s, m.c, m.n, m.r, session, m.j === true)
        return
      }
      case 'frame': {
        const session = this.#owned(m.s)
        if (session === null) { this.#post(m.n, { k: 'moved', s: m.s, c: m.c, i: m.i, n: this.#o.node }); return }
        session.handleFrame(this.#remote.port(m.s, m.c, m.n, m.r, session, m.j === true), m.f)
        this.#post(m.n, { k: 'ack', c: m.c, i: m.i })
        return
      }
      case 'ack': this.#frames.ack(m); return
      case 'detach': this.#remote.detach(m.s, m.c); return
      case 'send': {
        const local = this.#local.get(m.c)
        if (local === undefined) return
        const holder = holderChange(m.f)
        const session = this.#o.find(m.s)
        // Through the session: a recorded frame waits for the client's replay to end.
        if (session?.fromOwner === undefined) local.port.send(m.f)
        else session.fromOwner(local.port, m.f, m.sq)
        // After the holder frame: what this node then resends the client follows it.
        if (holder !== null) {
          local.holds = holder
          session?.remoteHolder(local.port, holder, m.q)
        }
        return
      }
      case 'moved': {
        const local = this.#local.get(m.c)
        // From a node the client is routed to no more (its frames went elsewhere since), a
        // reply changes nothing: the first one from that node already handed everything back.
        // A node too old to say who it is (no `n`) is taken to be the current owner.
        const current = local !== undefined && (m.n === undefined || local.owner === m.n)
        if (current) this.#local.delete(m.c)
        if (m.i === undefined) {
          // The reply to an attach (or its heartbeat): the frames sent after it still get their
          // own replies (ack, or 'moved' with their id), so they stay unconfirmed until then
          // (or until resendUnconfirmed hands them back). Dropping them here lost them.
          if (current) this.#o.find(m.s)?.ownerMoved(local.port, [])
          return
        }
        this.#frames.moved(m.s, m.c, m.i, current ? local.port : undefined)
        return
      }
      case 'call': this.#runner.handle(m); return
      case 'reply': this.#calls.reply(m); return
      case 'busy': this.#calls.busy(m)
    }
  }

  #owned (sessionId: string): RoutedSession | null {
    const session = this.#o.find(sessionId)
    return session?.owned === true ? session : null
  }

  /** The node holding a session's lease; undefined when that is not known (no lookup, or the store did not answer). */
  async #holder (sessionId: string): Promise<string | null | undefined> {
    try {
      return await this.#o.owner?.(sessionId)
    } catch {
      return undefined
    }
  }

  #heartbeat (): void {
    this.#frames.resendUnconfirmed()
    for (const [id, local] of this.#local) this.#post(local.owner, { k: 'attach', s: local.sessionId, c: id, n: this.#o.node, r: seenAs(local), ...rejoined(local) })
    this.#remote.beat()
  }

  #post (node: string, message: BusMessage): void {
    this.#o.bus.send(node, JSON.stringify(message)).catch((err: unknown) => {
      this.#o.logger.warn({ to: node, kind: message.k, err: (err as Error).message }, 'node bus send failed')
    })
  }
}

/**
 * The role a client's repeated attachment (a heartbeat, or its frames) asks
 * for: an owner that forgot the client (its node missed three heartbeats)
 * attaches it again with it, and a controller attaching takes the session.
 * One the owner last told it does not hold did not just attach: asking for
 * control again, it took the session from the newer controller holding it.
 */
function seenAs (local: LocalClient): Role {
  return local.holds === false ? 'observer' : local.role
}

/** A rejoining client's messages say so (`j`). */
function rejoined (local: LocalClient): { j?: true } {
  return local.rejoin === true ? { j: true } : {}
}
