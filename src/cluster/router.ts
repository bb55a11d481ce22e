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
 *   owner forgets clients of a node that died.
 * - Owner side: each message is handed to the owned session; what the session
 *   sends a remote client (errors, control responses, holder changes, a
 *   prompt redelivered to a new holder) goes back to the client's node.
 *
 * Messages are JSON objects, `k` naming the kind; docs/SCALING.md lists them.
 */
import { randomUUID } from 'node:crypto'
import type { Logger } from 'pino'
import type { ClientPort, Role } from '../session/audience.js'
import type { ClientFrame } from '../protocol/client-frames.js'
import type { NodeBus } from '../store/store.js'
import { type ErrorCode, GatewayError } from '../errors.js'
import { RemotePort } from './remote-port.js'

/** What the router needs of the sessions on this node. */
export interface RoutedSession {
  readonly owned: boolean
  attachRemote: (port: ClientPort, role: Role) => void
  detach: (port: ClientPort) => void
  handleFrame: (port: ClientPort, frame: ClientFrame) => void
  /**
   * The owner says a client here holds (or no longer holds) the session;
   * `upTo`: the seq the owner had committed when it said so (it redelivers
   * the prompts pending up to there itself).
   */
  remoteHolder: (port: ClientPort, holds: boolean, upTo?: number) => void
  /**
   * The node this client's frames went to does not own the session (any
   * more), or did not confirm them in time (it died or hangs): handle
   * `frames` here again, in order (the session may have stopped; the lease
   * of a dead owner lapses, and then the CLI starts here).
   */
  ownerMoved: (port: ClientPort, frames: ClientFrame[]) => void
  /** On the owner: an HTTP call made on another node (answer a prompt, stop, list pending prompts). */
  call: (op: SessionCallOp, args: unknown[]) => Promise<unknown>
  /** On a client's node: a frame the owner sent the client alone; `seq` when it is recorded (a redelivered prompt). */
  fromOwner?: (port: ClientPort, frame: string, seq?: number) => void
  /** The session's log: on the owner, what it has committed (sent with a holder change). */
  readonly events?: { readonly committedSeq: number }
}

/** The calls that act on one session (the rest act on the node). */
export type SessionCallOp = Exclude<CallOp, 'create'>

/** What another node may ask of a session's owner on behalf of an HTTP request. */
export type CallOp = 'answer' | 'stop' | 'pending' | 'snapshot' | 'create'

/** The owner does not own the session (any more): the caller handles the request itself. */
export class NotOwner extends Error {
  constructor () {
    super('the node asked does not own the session')
    this.name = 'NotOwner'
  }
}

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

/**
 * How long a node takes a message sent to it (the bus refuses older ones as
 * `stale`, src/store/signed-bus.ts): a frame not confirmed by then will never
 * be handled by the node it went to.
 */
const BUS_MAX_AGE_MS = 120_000

type Message =
  | { k: 'attach', s: string, c: string, n: string, r: Role }
  | { k: 'detach', s: string, c: string }
  | { k: 'frame', s: string, c: string, n: string, r: Role, f: ClientFrame, i: number }
  | { k: 'ack', c: string, i: number }
  | { k: 'send', s: string, c: string, f: string, q?: number, sq?: number }
  | { k: 'moved', s: string, c: string, i?: number, n?: string }
  | { k: 'call', s: string, id: string, n: string, op: CallOp, a: unknown[] }
  | { k: 'reply', id: string, ok: boolean, v?: unknown, moved?: boolean, e?: string, c?: ErrorCode }
  | { k: 'busy', id: string }

/** `holds`: what the owner last said (a `holder` frame), unknown before it says anything. */
interface LocalClient { sessionId: string, port: ClientPort, owner: string, role: Role, holds?: boolean }
/** A frame sent to an owner (`owner`, a node) and not yet confirmed by it. */
interface Unconfirmed { id: number, sessionId: string, port: ClientPort, frame: ClientFrame, sentAt: number, owner: string }
interface Remote { port: RemotePort, sessionId: string, seen: number }

export class ClusterRouter {
  readonly #o: ClusterRouterOptions
  /** Clients of this node attached to sessions owned elsewhere, by client id. */
  readonly #local = new Map<string, LocalClient>()
  /** Clients of other nodes attached to sessions owned here, by client id. */
  readonly #remote = new Map<string, Remote>()
  #timer: NodeJS.Timeout | null = null
  /** Frames sent to owners and not confirmed yet, by client id, in the order sent. */
  readonly #unconfirmed = new Map<string, Unconfirmed[]>()
  /** Clients whose late frames wait for a lease lookup (one at a time per client). */
  readonly #checking = new Set<string>()
  #frameCount = 0
  /** Calls waiting for their owner's reply, by call id. */
  readonly #calls = new Map<string, { resolve: (v: unknown) => void, reject: (e: Error) => void, timer: NodeJS.Timeout, expire: () => NodeJS.Timeout }>()
  #callCount = 0
  /** When the heartbeat last ran (a late one means this node was paused). */
  #lastBeat = 0

  constructor (options: ClusterRouterOptions) {
    this.#o = options
  }

  async start (): Promise<void> {
    await this.#o.bus.start(this.#o.node, (text) => { this.#receive(text) })
    this.#lastBeat = Date.now()
    this.#timer = setInterval(() => { this.#heartbeat() }, this.#o.heartbeatMs)
    this.#timer.unref()
  }

  async close (): Promise<void> {
    if (this.#timer !== null) clearInterval(this.#timer)
    this.#timer = null
    for (const [id, waiting] of this.#calls) {
      clearTimeout(waiting.timer)
      waiting.reject(new Error('gateway shutting down'))
      this.#calls.delete(id)
    }
    await this.#o.bus.close()
  }

  // ---- the client's node ----

  /** Makes `port` a client of the session owned by `owner`. */
  attach (owner: string, sessionId: string, port: ClientPort, role: Role): void {
    this.#local.set(port.id, { sessionId, port, owner, role })
    this.#post(owner, { k: 'attach', s: sessionId, c: port.id, n: this.#o.node, r: role })
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
    const id = ++this.#frameCount
    let list = this.#unconfirmed.get(port.id)
    if (list === undefined) this.#unconfirmed.set(port.id, list = [])
    list.push({ id, sessionId: local.sessionId, port, frame, sentAt: Date.now(), owner: local.owner })
    this.#post(local.owner, { k: 'frame', s: local.sessionId, c: port.id, n: this.#o.node, r: seenAs(local), f: frame, i: id })
    return true
  }

  /**
   * Stops routing `port` (its session stopped on the owner, or is owned here
   * now) and returns its frames the owner has not confirmed, in order: they
   * are the caller's to handle.
   */
  unroute (port: ClientPort): ClientFrame[] {
    const unconfirmed = (this.#unconfirmed.get(port.id) ?? []).map((u) => u.frame)
    this.#unconfirmed.delete(port.id)
    this.detach(port)
    return unconfirmed
  }

  detach (port: ClientPort): void {
    const local = this.#local.get(port.id)
    if (local === undefined) return
    this.#local.delete(port.id)
    this.#unconfirmed.delete(port.id)
    this.#post(local.owner, { k: 'detach', s: local.sessionId, c: port.id })
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
      this.#post(owner, { k: 'call', s: sessionId, id, n: this.#o.node, op, a: args })
    })
  }

  // ---- the owner's node ----

  /** Drops the remote clients of a session this node stopped owning (they attach again where it runs next). */
  dropRemote (sessionId: string): void {
    for (const [id, remote] of this.#remote) if (remote.sessionId === sessionId) this.#remote.delete(id)
  }

  #receive (text: string): void {
    let message: Message
    try {
      message = JSON.parse(text) as Message
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

  #dispatch (m: Message): void {
    switch (m.k) {
      case 'attach': {
        const session = this.#owned(m.s)
        if (session === null) { this.#post(m.n, { k: 'moved', s: m.s, c: m.c, n: this.#o.node }); return }
        this.#remotePort(m.s, m.c, m.n, m.r, session)
        return
      }
      case 'frame': {
        const session = this.#owned(m.s)
        if (session === null) { this.#post(m.n, { k: 'moved', s: m.s, c: m.c, i: m.i, n: this.#o.node }); return }
        session.handleFrame(this.#remotePort(m.s, m.c, m.n, m.r, session), m.f)
        this.#post(m.n, { k: 'ack', c: m.c, i: m.i })
        return
      }
      case 'ack': {
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
        return
      }
      case 'detach': {
        const remote = this.#remote.get(m.c)
        if (remote === undefined) return
        this.#remote.delete(m.c)
        this.#o.find(m.s)?.detach(remote.port)
        return
      }
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
          // (or until #resendUnconfirmed hands them back). Dropping them here lost them.
          if (current) this.#o.find(m.s)?.ownerMoved(local.port, [])
          return
        }
        // This frame and every later one of the client sent to the same node went to a node
        // that does not own the session: all of them are handled here again. Frames sent to
        // another node since stay with that node; a frame no longer waiting was handed back
        // already (an earlier reply, or #resendUnconfirmed), and what waits now went elsewhere.
        const list = this.#unconfirmed.get(m.c) ?? []
        const from = list.findIndex((u) => u.id === m.i)
        const to = from < 0 ? undefined : (list[from] as Unconfirmed).owner
        const again = list.filter((u, k) => k >= from && u.owner === to)
        const keep = list.filter((u, k) => !(k >= from && u.owner === to))
        if (keep.length > 0) this.#unconfirmed.set(m.c, keep)
        else this.#unconfirmed.delete(m.c)
        const port = again[0]?.port ?? (current ? local.port : undefined)
        if (port !== undefined) this.#o.find(m.s)?.ownerMoved(port, again.map((u) => u.frame))
        return
      }
      case 'call': {
        if (m.op === 'create') { this.#create(m); return }
        if (this.#owned(m.s) === null) { this.#post(m.n, { k: 'reply', id: m.id, ok: false, moved: true }); return }
        this.#call(m).catch((err: unknown) => { this.#o.logger.error({ err, op: m.op }, 'node bus call failed') })
        return
      }
      case 'reply': {
        const waiting = this.#calls.get(m.id)
        if (waiting === undefined) return
        this.#calls.delete(m.id)
        clearTimeout(waiting.timer)
        if (m.ok) waiting.resolve(m.v)
        else if (m.moved === true) waiting.reject(new NotOwner())
        else waiting.reject(m.c !== undefined ? new GatewayError(m.c, m.e) : new Error(m.e ?? 'the owner failed'))
        return
      }
      case 'busy': {
        const waiting = this.#calls.get(m.id)
        if (waiting === undefined) return
        clearTimeout(waiting.timer)
        waiting.timer = waiting.expire()
      }
    }
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
  async #call (m: Extract<Message, { k: 'call' }>): Promise<void> {
    const holder = await this.#holder(m.s)
    const session = this.#owned(m.s)
    if (session === null || (holder !== undefined && holder !== null && holder !== this.#o.node)) {
      this.#post(m.n, { k: 'reply', id: m.id, ok: false, moved: true })
      return
    }
    if (holder === null) { this.#post(m.n, failed(m.id, new GatewayError('node_unavailable'))); return }
    this.#carryOut(m, async () => await session.call(m.op as SessionCallOp, m.a))
  }

  #create (m: Extract<Message, { k: 'call' }>): void {
    const create = this.#o.onCreate
    if (create === undefined) { this.#post(m.n, failed(m.id, new GatewayError('too_many_sessions'))); return }
    this.#carryOut(m, async () => await create(String(m.a[0]), m.a[1]))
  }

  /**
   * Runs a call and replies with its outcome; while it runs (a stop waits
   * for the CLI to go, up to twice CLI_STOP_TIMEOUT_MS), the caller hears
   * every half call timeout that this node is at work on it: it waits on,
   * where silence means this node died or hangs.
   */
  #carryOut (m: Extract<Message, { k: 'call' }>, run: () => Promise<unknown>): void {
    const busy = setInterval(() => { this.#post(m.n, { k: 'busy', id: m.id }) }, Math.max(50, (this.#o.callTimeoutMs ?? 5000) / 2))
    busy.unref()
    run().then(
      (v) => { this.#post(m.n, { k: 'reply', id: m.id, ok: true, v }) },
      (err: unknown) => { this.#post(m.n, failed(m.id, err)) })
      .finally(() => { clearInterval(busy) })
  }

  #owned (sessionId: string): RoutedSession | null {
    const session = this.#o.find(sessionId)
    return session?.owned === true ? session : null
  }

  /** The owner's port for a client of another node, attached on first sight (an attach may have been lost). */
  #remotePort (sessionId: string, client: string, node: string, role: Role, session: RoutedSession): RemotePort {
    const known = this.#remote.get(client)
    if (known !== undefined && known.sessionId === sessionId) {
      known.seen = Date.now()
      return known.port
    }
    const port = new RemotePort(client, (frame, seq) => {
      // A holder change carries the seq committed now: the owner redelivers the prompts pending up
      // to it (ControlPlane.holderChanged, in the same turn); the client's node those after it.
      const upTo = holderChange(frame) === true ? session.events?.committedSeq : undefined
      const q = upTo === undefined ? {} : { q: upTo }
      this.#post(node, { k: 'send', s: sessionId, c: client, f: frame, ...q, ...(seq === undefined ? {} : { sq: seq }) })
    })
    this.#remote.set(client, { port, sessionId, seen: Date.now() })
    session.attachRemote(port, role)
    return port
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
  #resendUnconfirmed (): void {
    const late = Date.now() - 3 * this.#o.heartbeatMs
    for (const [client, list] of this.#unconfirmed) {
      const first = list[0]
      if (first === undefined || first.sentAt >= late || this.#checking.has(client)) continue
      this.#checking.add(client)
      void this.#holder(first.sessionId).then((holder) => {
        this.#checking.delete(client)
        this.#late(client, first, holder)
      })
    }
  }

  /** The node holding a session's lease; undefined when that is not known (no lookup, or the store did not answer). */
  async #holder (sessionId: string): Promise<string | null | undefined> {
    try {
      return await this.#o.owner?.(sessionId)
    } catch {
      return undefined
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
    if (holder !== first.owner && this.#local.get(client)?.owner === first.owner) this.#local.delete(client)
    this.#o.logger.warn({ session: first.sessionId, frames: again.length, owner: first.owner, holder }, 'the owning node did not confirm routed frames in time; handling them here')
    this.#o.find(first.sessionId)?.ownerMoved(first.port, again.map((u) => u.frame))
  }

  #heartbeat (): void {
    this.#resendUnconfirmed()
    for (const [id, local] of this.#local) this.#post(local.owner, { k: 'attach', s: local.sessionId, c: id, n: this.#o.node, r: seenAs(local) })
    const now = Date.now()
    // A beat this late means this node was paused (SIGSTOP, a VM freeze, a blocked loop): timers
    // run before the inbox is read, where the clients' repeated attachments wait. Their silence
    // was this node's: they count as seen now (a dead node's clients go three beats later).
    const paused = now - this.#lastBeat > 2 * this.#o.heartbeatMs
    this.#lastBeat = now
    if (paused) for (const remote of this.#remote.values()) remote.seen = Math.max(remote.seen, now)
    const expired = now - 3 * this.#o.heartbeatMs
    for (const [id, remote] of this.#remote) {
      if (remote.seen >= expired) continue
      this.#remote.delete(id)
      this.#o.find(remote.sessionId)?.detach(remote.port)
    }
  }

  #post (node: string, message: Message): void {
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

/** A reply saying a call failed; a GatewayError keeps its code, so the caller answers as this node would have. */
function failed (id: string, err: unknown): Message {
  return err instanceof GatewayError
    ? { k: 'reply', id, ok: false, e: err.message, c: err.code }
    : { k: 'reply', id, ok: false, e: err instanceof Error ? err.message : String(err) }
}

/** For a `holder` gateway frame: whether it tells its client that it holds the session; else null. */
function holderChange (frame: string): boolean | null {
  if (!frame.includes('"holder"')) return null
  try {
    const parsed = JSON.parse(frame) as Record<string, unknown>
    return parsed.type === 'gateway' && parsed.subtype === 'holder' ? parsed.role === 'controller' : null
  } catch {
    return null
  }
}
