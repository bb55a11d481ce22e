/**
 * A session as another node runs it: while that node holds the lease and
 * clients are attached here, this node follows the log in the store and
 * relays what is appended to them as if it had been appended here, learns
 * from it what it must know should the session come here next (its status,
 * that the conversation is stored, which messages the CLI was given), and
 * makes those clients clients of the owner (src/cluster/router.ts).
 */
import type { Logger } from 'pino'
import type { PendingRequest } from '../control/pending-requests.js'
import type { RecentIds } from '../control/recent-ids.js'
import { isRecord } from '../protocol/is-record.js'
import type { ClientFrame } from '../protocol/client-frames.js'
import { type EventStore, type SessionRecord, type SessionStatus, type StoredEvent, isFinal } from '../store/store.js'
import type { Audience, ClientPort, Role } from './audience.js'
import type { EventLog } from './event-log.js'
import { askedUuid, isInit, observerFrameOf, statusOf } from './followed-frames.js'
import { gatewayFrame } from './frames.js'
import { type OpenRequest, OpenRequests } from './open-requests.js'
import type { SessionRoute } from './session-deps.js'

/** What a client here had sent to the owner that the owner did not confirm. */
export interface Unconfirmed { port: ClientPort, frames: ClientFrame[] }

export interface FollowerHost {
  readonly id: string
  /** The session's record as this node has it; updated from what the owner saves and appends. */
  readonly record: SessionRecord
  readonly events: EventLog
  readonly audience: Audience
  readonly store: EventStore
  /** Other nodes (absent: one node, nothing to route). */
  readonly route: SessionRoute | undefined
  readonly log: Logger
  /** Uuids of the messages written to the CLI, wherever it ran. */
  readonly seenUuids: RecentIds
  /** True while this node holds the lease: the log is written here. */
  owned: () => boolean
  /** True once fenced: the session object is being dropped. */
  gone: () => boolean
  /** The next client that asked for control holds the session, if there is one. */
  promoteHolder: () => void
  /** Handles a client frame (Session.handleFrame). */
  handleFrame: (port: ClientPort, frame: ClientFrame) => void
}

export class SessionFollower {
  readonly #h: FollowerHost
  /** Stops following the session's log in the store (while another node owns it and clients are attached here). */
  #unfollow: (() => void) | null = null
  /**
   * The CLI's control requests the log followed here shows asked and not yet
   * ended, by request id: what a hello here lists as pending, and what a
   * client here that the owner makes holder may have been relayed as notices only.
   */
  readonly #open = new OpenRequests()

  constructor (host: FollowerHost) {
    this.#h = host
  }

  /** True while this node follows the session's log as another node appends it. */
  get following (): boolean { return this.#unfollow !== null }

  /**
   * Brings a session this node does not own up to date with the store: its
   * record as its owner last saved it, and the events appended since (to
   * attached clients, as they would have had them live).
   */
  async refresh (): Promise<void> {
    const h = this.#h
    if (h.owned() || h.gone()) return
    const fresh = await h.store.getSession(h.id)
    if (fresh !== null) this.adopt(fresh)
    await this.statusFromLog()
    await h.events.catchUp((e) => this.learn(e))
  }

  /**
   * The owner saves the record after the frame that changed the status, so
   * a record read just after a stop may still say `stopping`: the log's last
   * frame, when it is a status frame, says where the session really is.
   */
  async statusFromLog (): Promise<void> {
    const h = this.#h
    const last = h.events.lastSeq
    if (h.owned() || last < 1) return
    const [event] = await h.store.read(h.id, last - 1, 1)
    if (event !== undefined && statusOf(event) !== null) this.learn(event)
  }

  /** Follows the log from the store while another node owns the session and clients are attached here. */
  follow (): void {
    const h = this.#h
    if (h.owned() || h.gone() || this.#unfollow !== null) return
    this.#unfollow = h.store.feed.follow(h.id, h.events.committedSeq,
      (events) => { this.#ingest(events) },
      (err) => h.log.warn({ err: err.message }, 'following the session in the store failed'))
  }

  stop (): void {
    this.#unfollow?.()
    this.#unfollow = null
    // Not followed, the ends of these requests may go unseen: read again when needed.
    this.#open.forget()
  }

  /**
   * Makes `openIds` the CLI control requests pending as of what this node has
   * committed, for a hello here while another node runs the CLI (its own
   * control plane knows none): read from the stored log once per time this
   * node follows it, then kept from what it follows. Resolves once they are
   * known, or the store did not answer (then `openIds` holds those followed).
   */
  async knowOpen (): Promise<void> {
    const h = this.#h
    if (isFinal(h.record.status)) this.#open.settled()
    try {
      await this.#open.ensure(h.store, h.id, h.events.committedSeq, async () => await this.#pendingOnOwner())
    } catch (err) {
      h.log.warn({ err: (err as Error).message }, 'could not read which requests the session has open; a hello lists those followed here')
    }
  }

  /**
   * The CLI control requests pending on the node running the CLI; none when
   * no other node runs it or it does not answer (the log's scan alone then).
   */
  async #pendingOnOwner (): Promise<PendingRequest[]> {
    const h = this.#h
    const route = h.route
    if (route === undefined || h.owned()) return []
    try {
      const owner = await route.owner(h.id)
      if (owner === null || owner === route.node) return []
      const pending = await route.call(owner, h.id, 'pending', [])
      return Array.isArray(pending) ? pending as PendingRequest[] : []
    } catch (err) {
      h.log.warn({ err: (err as Error).message }, 'could not ask the node running the session for its pending requests; a hello lists those of the log\'s last events')
      return []
    }
  }

  /** The request ids of the CLI control requests the log leaves open, as far as this node has committed it (see knowOpen). */
  get openIds (): string[] { return [...this.#open.open.keys()] }

  /** Those requests as recorded: what a replay here sends where history lost or trimmed them. */
  get openRequests (): OpenRequest[] { return [...this.#open.open.values()] }

  /** Takes what another owner saved since this object was loaded. */
  adopt (fresh: SessionRecord): void {
    const r = this.#h.record
    r.status = fresh.status
    r.updated_at = fresh.updated_at
    // Never back: a conversation the log shows stored stays resumable, whatever a lagging record says.
    r.resumable = r.resumable || fresh.resumable
    r.exit = fresh.exit
    r.metadata = fresh.metadata
    if (fresh.initialize !== undefined) r.initialize = fresh.initialize
    if (fresh.lost_ranges !== undefined) r.lost_ranges = fresh.lost_ranges
    r.last_seq = Math.max(r.last_seq, fresh.last_seq)
  }

  /**
   * What a frame another node appended tells this one about the session:
   * status changes, and that the CLI stored the conversation (its `init`; the
   * owner's record may lag, or never be saved if it died). Returns the
   * frame's observer rendering.
   */
  learn (e: StoredEvent): string | undefined {
    const record = this.#h.record
    const status = statusOf(e)
    if (status !== null) {
      if (typeof status.status === 'string') record.status = status.status as SessionStatus
      if (isRecord(status.exit)) record.exit = status.exit as unknown as SessionRecord['exit']
    }
    if (isInit(e)) record.resumable = true
    this.#open.learn(e.seq, e.frame, status !== null && typeof status.status === 'string' && isFinal(status.status as SessionStatus))
    // A message the last owner wrote to the CLI: its copy a client resends (or that the owner
    // never confirmed before it died) reaches the CLI no second time when handled here.
    const uuid = askedUuid(e)
    if (uuid !== null) this.#h.seenUuids.seen(uuid)
    return observerFrameOf(e)
  }

  /** Makes a client here a client of the node that runs the CLI, if another node does (`rejoin`: see SessionRoute.attach). */
  async routeClient (port: ClientPort, role: Role, rejoin = false): Promise<void> {
    const h = this.#h
    const route = h.route
    if (route === undefined) return
    let owner: string | null
    try {
      owner = await route.owner(h.id)
    } catch (err) {
      h.log.warn({ err: (err as Error).message }, 'could not look up the session\'s owner')
      return
    }
    if (owner === null || owner === route.node || !h.audience.has(port) || h.owned()) return
    route.attach(owner, h.id, port, role, rejoin ? { rejoin } : undefined)
  }

  /**
   * On a client's node: its owner says whether it holds the session now
   * (what recorded control requests it is shown in full). The owner
   * redelivers the prompts pending up to `upTo`, the seq it had committed
   * then; a prompt after it that this node relayed before the owner's word
   * arrived (the log and the bus are two channels) reached the client as a
   * notice, so it is sent again here, in full.
   */
  remoteHolder (port: ClientPort, holds: boolean, upTo?: number): void {
    const { audience, events } = this.#h
    const att = audience.attachment(port)
    if (att === undefined) return
    const was = audience.isHolder(port)
    if (holds) audience.hold(att)
    else audience.unhold(att)
    // Still being replayed to, it gets what arrived meanwhile from its backlog, rendered as holder.
    if (!holds || was || upTo === undefined || att.backlog !== null) return
    for (const { seq, frame } of this.#open.open.values()) {
      if (seq > upTo && seq <= events.committedSeq) audience.send(port, frame, seq)
    }
  }

  /**
   * On a client's node: a frame its owner sent it alone. A recorded one (a
   * prompt redelivered to a new holder, at its own seq) waits while the
   * client is still replayed to: out now, it could come before replay frames
   * of lower seqs, which the client would then skip as seen.
   */
  fromOwner (port: ClientPort, frame: string, seq?: number): void {
    const { audience } = this.#h
    const att = audience.attachment(port)
    if (att === undefined) return
    if (seq !== undefined && att.backlog !== null) (att.owed ??= []).push({ frame, seq })
    else audience.send(port, frame, seq)
  }

  /**
   * On a node where another node runs the CLI, a holder leaving makes no
   * other client here holder: that node picks the next one (any node's
   * client) and says so with `holder` frames.
   */
  leaving (port: ClientPort): void {
    const h = this.#h
    if (h.route === undefined || h.owned() || isFinal(h.record.status)) return
    const att = h.audience.attachment(port)
    if (att !== undefined) h.audience.unhold(att)
  }

  /**
   * On a client's node: the node its frames went to does not own the
   * session (any more), or did not confirm them; `frames` are handled anew,
   * in order, once the session is brought up to date.
   */
  ownerMoved (port: ClientPort, frames: ClientFrame[]): void {
    const h = this.#h
    void this.refresh().catch(() => {}).then(async () => {
      // Running on another node now: the client becomes its client (else its answers, handled
      // here, are refused), and its frames go there.
      const att = h.audience.attachment(port)
      if (att !== undefined && h.audience.has(port) && !h.owned() && !isFinal(h.record.status)) await this.routeClient(port, att.requested, true)
      for (const frame of frames) if (h.audience.has(port)) h.handleFrame(port, frame)
    })
  }

  /** Stops routing every client here; returns what each had sent that its owner did not confirm. */
  unroute (): Unconfirmed[] {
    const { route, audience } = this.#h
    if (route === undefined) return []
    return audience.ports.map((port) => ({ port, frames: route.unroute(port) })).filter((u) => u.frames.length > 0)
  }

  /** This node stopped owning the session: clients of other nodes attach wherever it runs next. */
  dropRemotes (): void {
    const h = this.#h
    for (const port of h.audience.remotes) h.audience.remove(port)
    h.route?.dropRemote(h.id)
  }

  /** Events another node appended: relayed to clients here as if appended here (status frames update the record as seen here). */
  #ingest (events: StoredEvent[]): void {
    const h = this.#h
    if (h.owned()) return // owned here since: the log is written here
    const wasFinal = isFinal(h.record.status)
    // A catch-up (the feed lost its subscription) may bring the CLI's stop and its next start at once.
    let ended = false
    h.events.ingest(events.map((e) => {
      const observerFrame = this.learn(e)
      ended ||= isFinal(h.record.status)
      return { ...e, observerFrame }
    }))
    // The CLI stopped on its node: clients here are nobody's remote clients any more, and
    // one that asked for control may start it here next.
    if (isFinal(h.record.status)) {
      const unconfirmed = this.unroute()
      h.promoteHolder()
      this.#handleAgain(unconfirmed)
    } else if (wasFinal) {
      void this.#rejoin()
    } else if (ended) {
      // Stopped and started again between two deliveries: clients here are still routed to the
      // CLI that stopped, whose node forgot them. Left so, they were clients of nobody. What
      // that CLI's node did not confirm goes where it runs now, once they are routed there.
      const unconfirmed = this.unroute()
      void this.#rejoin().then(() => { this.#handleAgain(unconfirmed) })
        .catch((err: unknown) => { h.log.error({ err }, 'handling again what the stopped CLI\'s node did not confirm failed') })
    }
  }

  /**
   * Another node started the CLI again: clients here become its clients, as
   * on attach, so its holder rules are theirs again. The one holding the
   * session here since the CLI stopped holds it no more until that node
   * says so: left holding, it was shown that CLI's prompts in full and its
   * answers, handled here, were refused (`unknown_request`). Each rejoins:
   * attached fresh, the controller among them took the session from the
   * client whose message had just started that CLI.
   */
  async #rejoin (): Promise<void> {
    const { audience } = this.#h
    const routing: Array<Promise<void>> = []
    for (const port of audience.ports) {
      const att = audience.attachment(port)
      if (att === undefined || !att.greeted || port.remote === true) continue
      if (audience.isHolder(port)) {
        audience.unhold(att)
        audience.send(port, gatewayFrame('holder', { holder: null, role: 'observer' }))
      }
      routing.push(this.routeClient(port, att.requested, true))
    }
    await Promise.all(routing)
  }

  /** Frames routed to an owner that stopped before confirming them: handled here, in order. */
  #handleAgain (unconfirmed: Unconfirmed[]): void {
    const h = this.#h
    for (const { port, frames } of unconfirmed) for (const frame of frames) if (h.audience.has(port)) h.handleFrame(port, frame)
  }
}
