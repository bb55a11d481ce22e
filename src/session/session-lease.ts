/**
 * This node's lease on one session: the right to run its CLI and write its
 * log and record. Taking it (frames that need the CLI wait for that, in
 * arrival order, and go to the node that holds it when this one may not),
 * giving it up once the CLI has stopped, and losing it to another node
 * (fenced).
 */
import type { Logger } from 'pino'
import { errorTable } from '../errors.js'
import { controlErrorFrame } from '../control/control-error.js'
import type { ClientFrame } from '../protocol/client-frames.js'
import { isRecord } from '../protocol/is-record.js'
import { type EventStore, type Lease, type SessionRecord, isFinal } from '../store/store.js'
import type { Audience, ClientPort } from './audience.js'
import type { ConversationSaves } from './conversation-saves.js'
import type { EventLog } from './event-log.js'
import { isInit } from './followed-frames.js'
import { errorFrame } from './frames.js'
import type { RecordWriter } from './record-writer.js'
import type { SessionDeps, SessionOwnership, SessionRoute } from './session-deps.js'
import type { SessionFollower } from './session-follower.js'

/** Events read from the start of a log to find the CLI's init when a taken-over record does not say resumable. */
const INIT_SCAN = 100
/**
 * How often a frame that needs the CLI tries the lease again after it was
 * refused and then nobody held it (its holder released it in between): each
 * try follows a store round trip that showed the lease move, so a few suffice.
 */
const OWN_RETRIES = 3

export interface LeaseHost {
  readonly id: string
  readonly record: SessionRecord
  readonly events: EventLog
  readonly audience: Audience
  readonly log: Logger
  readonly store: EventStore
  readonly ownership: SessionOwnership
  /** Other nodes (absent: one node). */
  readonly route: SessionRoute | undefined
  readonly conversation: SessionDeps<unknown>['conversation']
  readonly follower: SessionFollower
  readonly writes: RecordWriter
  readonly saves: ConversationSaves
  /** True while a CLI runs here. */
  cliRunning: () => boolean
  /** Handles a client frame (Session.handleFrame). */
  handleFrame: (port: ClientPort, frame: ClientFrame) => void
  /** Records an end the previous owner never recorded (Session.markLost). */
  markLost: () => Promise<void>
  /** The next client that asked for control holds the session, if there is one. */
  promoteHolder: () => void
  /** Fenced: the CLI here is ended without its end being recorded (its output can no longer be stored). */
  endCli: () => void
  /** Fenced: clients have been told; the session object is to be forgotten. */
  fenced: () => void
}

export class SessionLease {
  readonly #h: LeaseHost
  /** This node's lease on the session: while set, it may run the CLI and write the log and record. */
  #lease: Lease | null
  /** An acquisition in flight (`own`), shared by concurrent callers. */
  #owning: Promise<boolean> | null = null
  /** Client frames that wait for `own` to settle, in arrival order. */
  #waiting: Array<{ port: ClientPort, frame: ClientFrame }> | null = null
  /** How often each frame was tried here again after its owner turned out to be nobody (`#toOwner`). */
  #ownRetries: WeakMap<ClientFrame, number> | null = null
  /** Set once fenced: another node owns the session; the session object is dropped. */
  #gone = false
  /** A `disown` in progress (close waits for its release to reach the store before the store closes). */
  #disowning: Promise<void> | null = null
  /** A confirmation of the lease after a pause (`#confirm`), shared by the frames and calls that wait for it. */
  #confirming: Promise<boolean> | null = null

  /** `lease`: this node's lease when it owns the session (created or taken here), else null. */
  constructor (host: LeaseHost, lease: Lease | null) {
    this.#h = host
    this.#lease = lease
  }

  get lease (): Lease | null { return this.#lease }
  get owned (): boolean { return this.#lease !== null }
  get gone (): boolean { return this.#gone }
  get disowning (): Promise<void> | null { return this.#disowning }

  /**
   * Takes the session's lease for this node, if no other live node holds
   * it. Before it says yes, the session is brought up to date with the store
   * (record, and events another node appended meanwhile, which attached
   * clients receive), and an end the previous owner never recorded (it died)
   * is recorded as `lost`. Concurrent calls share one acquisition.
   */
  async own (): Promise<boolean> {
    if (this.#lease !== null) return true
    if (this.#gone) return false
    this.#owning ??= this.#acquire().then(
      (owned) => { this.#owning = null; this.#settleWaiting(owned); return owned },
      (err: unknown) => { this.#owning = null; this.#settleWaiting(false); throw err })
    return await this.#owning
  }

  /**
   * Takes a client frame that cannot be handled here now; true when it did.
   * While the lease is being taken, frames wait for it; a frame of a client
   * routed to the owner goes there; one that needs the CLI, which no node
   * here runs, takes the lease first.
   */
  intercept (port: ClientPort, frame: ClientFrame): boolean {
    const h = this.#h
    if (this.#waiting !== null) { this.#waiting.push({ port, frame }); return true }
    // While the lease is being taken, frames wait for it (own() hands them on, in order).
    if (this.#owning !== null) { this.#waiting = [{ port, frame }]; return true }
    // Paused past the lease (SIGSTOP, a VM freeze), this node may have lost it without knowing
    // yet: what clients sent meanwhile (a routed message waiting in its inbox) must not reach
    // the CLI before the lease is confirmed, or it runs here as well as where the session moved.
    if (this.#lease !== null && h.ownership.fresh?.(this.#lease) === false) {
      this.#waiting = [{ port, frame }]
      void this.#confirm(this.#lease)
      return true
    }
    if (this.#lease === null && !h.cliRunning()) {
      // A client routed to the node that runs the CLI: everything it sends goes there.
      if (h.route?.frame(port, frame) === true) return true
      if (startsCli(frame)) {
        // The CLI may start only on the node that holds the lease: take it first, holding
        // this and every later frame (any client's) in order until that is settled.
        this.#waiting = [{ port, frame }]
        this.own().catch((err: unknown) => {
          h.log.warn({ err: (err as Error).message }, 'could not take the session lease')
        })
        return true
      }
    }
    return false
  }

  /**
   * True when this node holds the lease and may act on the session now. A
   * lease that may have lapsed while this node was paused is confirmed with
   * the store first, as client frames are (`intercept`): false, and the
   * session fenced, when another node took it. HTTP requests made on this
   * node wait for it (owner-calls.ts), or they would run on a fenced CLI.
   */
  async confirmed (): Promise<boolean> {
    const lease = this.#lease
    if (lease === null) return false
    if (this.#h.ownership.fresh?.(lease) !== false) return true
    await this.#confirm(lease)
    return this.#lease === lease
  }

  /**
   * Gives the lease up once the CLI has stopped and everything is stored,
   * so that any node may start the session next. Kept if a CLI started again meanwhile.
   */
  async disown (): Promise<void> {
    const running = this.#giveUp()
    this.#disowning = running
    try {
      await running
    } finally {
      if (this.#disowning === running) this.#disowning = null
    }
  }

  /** The lease to release at close, now no longer this node's (null when none, or fenced). */
  surrender (): Lease | null {
    const lease = this.#lease
    if (lease === null || this.#gone) return null
    this.#lease = null
    return lease
  }

  /**
   * The store refused a write, or a renewal found the lease taken: another
   * node owns the session now. The CLI is ended (its output can no longer be
   * stored), clients are told to reconnect, and the manager forgets the session.
   */
  fence (): void {
    const h = this.#h
    if (this.#gone) return
    this.#gone = true
    const lease = this.#lease
    this.#lease = null
    if (lease !== null) h.ownership.forget(lease)
    h.log.warn({ epoch: lease?.epoch }, 'session fenced: another node owns it now; its CLI here is stopped')
    h.endCli()
    h.follower.stop()
    h.follower.dropRemotes()
    h.audience.endAll('session_moved', 'the session moved to another gateway node: reconnect with ?after=<last seq>')
    for (const { port, frame } of this.#waiting ?? []) this.#refuseElsewhere(port, frame)
    this.#waiting = null
    h.fenced()
  }

  async #acquire (): Promise<boolean> {
    const h = this.#h
    const lease = await h.ownership.acquire(h.id, () => this.fence())
    if (lease === null) return false
    try {
      const fresh = await h.store.getSession(h.id)
      if (fresh !== null) h.follower.adopt(fresh)
      await h.events.catchUp((e) => h.follower.learn(e))
      // A record saved late (or never: its node died) may not say yet that the CLI stored the
      // conversation; the log's first turn does. Trimmed logs hold a long past: resumable too.
      if (!h.record.resumable && h.events.lastSeq > 0) {
        const head = await h.store.read(h.id, 0, INIT_SCAN)
        if (head.some(isInit) || (head[0]?.seq ?? 1) > 1) h.record.resumable = true
      }
      // The CLI resumes from its own file: bring the copy another node saved, if this one's is older.
      if (h.record.resumable) await h.conversation?.restore()
    } catch (err) {
      h.ownership.forget(lease)
      void h.ownership.release(lease).catch(() => {})
      throw err
    }
    h.events.unfence()
    this.#lease = lease
    h.follower.stop()
    // Owned here now: no client here is another node's any more (frames the old owner did
    // not confirm are handled here, after the lease is taken: settleWaiting runs them).
    for (const { port, frames } of h.follower.unroute()) {
      this.#waiting ??= []
      for (const frame of frames) this.#waiting.push({ port, frame })
    }
    if (!isFinal(h.record.status) && !h.cliRunning()) await h.markLost()
    h.promoteHolder()
    return true
  }

  /**
   * Confirms a lease that may have lapsed while this node was paused: the
   * frames held meanwhile are handled once it is still this node's, and
   * refused when another node took it (fenced). A store that does not answer
   * leaves it as before the pause: the append fencing stops a stale writer.
   */
  async #confirm (lease: Lease): Promise<void> {
    this.#confirming ??= this.#reclaim(lease).finally(() => { this.#confirming = null })
    const held = await this.#confirming
    if (this.#gone) return
    if (!held && this.#lease === lease) { this.fence(); return }
    this.#settleWaiting(this.#lease !== null)
  }

  /** Whether the store says `lease` is still this node's (true when it does not answer). */
  async #reclaim (lease: Lease): Promise<boolean> {
    try {
      return await this.#h.ownership.reclaim(lease)
    } catch (err) {
      this.#h.log.warn({ err: (err as Error).message }, 'could not confirm the session lease after a pause')
      return true
    }
  }

  /**
   * Frames held while the lease was being taken, in arrival order: handled
   * here when this node got it, else sent to the node that holds it.
   */
  #settleWaiting (owned: boolean): void {
    const waiting = this.#waiting
    this.#waiting = null
    for (const { port, frame } of waiting ?? []) {
      if (owned || !startsCli(frame)) this.#h.handleFrame(port, frame)
      else void this.#toOwner(port, frame)
    }
  }

  /**
   * A frame that needs the CLI, which another node runs: the client becomes
   * a client of that node's session (src/cluster/router.ts) and the frame
   * goes there. With nobody holding the lease any more, the node that held
   * it released it after it refused this one (typically the node that just
   * recorded the session `lost`): the frame is handled here again, so the
   * CLI resumes here (or it goes to whoever took the lease meanwhile). Without
   * other nodes, or after OWN_RETRIES such turns, it is refused (`session_elsewhere`).
   * The client rejoins that node's session: it was attached here before the
   * other node took the lease (a fresh attach there was made at its hello),
   * so attached fresh, as a controller it took the session from the holder.
   */
  async #toOwner (port: ClientPort, frame: ClientFrame): Promise<void> {
    const h = this.#h
    const route = h.route
    const att = h.audience.attachment(port)
    let owner: string | null = null
    try {
      owner = route === undefined || att === undefined ? null : await route.owner(h.id)
    } catch (err) {
      h.log.warn({ err: (err as Error).message }, 'could not look up the session\'s owner')
    }
    if (route === undefined || att === undefined || !h.audience.has(port)) {
      this.#refuseElsewhere(port, frame)
      return
    }
    if (owner === null || owner === route.node) {
      const tries = this.#ownRetries?.get(frame) ?? 0
      if (tries >= OWN_RETRIES || this.#gone) {
        if (!this.#gone) h.log.warn({ tries }, 'the session lease was refused again and again while no other node held it; frame refused')
        this.#refuseElsewhere(port, frame)
        return
      }
      this.#ownRetries ??= new WeakMap()
      this.#ownRetries.set(frame, tries + 1)
      // As if it had just arrived: behind any frame that came meanwhile, and along the same
      // route if one of those was sent to a node that took the lease in between.
      h.handleFrame(port, frame)
      return
    }
    route.attach(owner, h.id, port, att.requested, { rejoin: true })
    route.frame(port, frame)
  }

  async #giveUp (): Promise<void> {
    const h = this.#h
    await h.writes.settle(5000)
    await h.saves.save()
    const lease = this.#lease
    if (lease === null || h.cliRunning() || this.#owning !== null || this.#waiting !== null) return
    this.#lease = null
    h.follower.dropRemotes()
    // Another node may run it next: clients here follow it through the store.
    if (h.audience.size > 0) h.follower.follow()
    try {
      await h.ownership.release(lease)
    } catch (err) {
      // It lapses by itself within SESSION_LEASE_MS.
      h.log.warn({ err: (err as Error).message }, 'could not release the session lease')
    }
  }

  /** A frame that needs the CLI while another node runs it (or the lease could not be taken). */
  #refuseElsewhere (port: ClientPort, frame: ClientFrame): void {
    const { message } = errorTable.session_elsewhere
    this.#h.audience.send(port, frame.type === 'control_request'
      ? controlErrorFrame(frame.request_id, 'session_elsewhere', message)
      : errorFrame('session_elsewhere', message))
  }
}

/** Client frames that start a stopped CLI (a user message, the holder's initialize). */
function startsCli (frame: ClientFrame): boolean {
  return frame.type === 'user' || (frame.type === 'control_request' && isRecord(frame.request) && frame.request.subtype === 'initialize')
}
