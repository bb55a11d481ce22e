/**
 * The clients attached to one session and who holds it. Fan-out lives here:
 * the holder gets CLI control requests in full, everyone else a
 * `request_pending` notice with the same seq; a client still being replayed
 * to collects live frames in its backlog instead.
 */
import type { LogEvent } from './event-log.js'
import { gatewayFrame, isRecord, pendingNotice } from './frames.js'

/** A connected client as the session sees it. */
export interface ClientPort {
  readonly id: string
  send: (data: string | Buffer) => void
  /**
   * Null when more may be sent now, else a promise that settles once the client
   * has read its backlog (or is gone). Replays wait on it, so a client catching
   * up on a long history is not cut off as a slow consumer.
   */
  writable?: () => Promise<void> | null
}

export type Role = 'controller' | 'observer'

export interface Attachment {
  port: ClientPort
  requested: Role
  order: number
  /** Live frames that arrived while this client was being replayed to; null once live. */
  backlog: LogEvent[] | null
  /** Set once its hello is sent: notices for every client skip it before (hello states the same). */
  greeted: boolean
}

export class Audience {
  readonly #clients = new Map<ClientPort, Attachment>()
  #holder: Attachment | null = null
  #attachCount = 0

  get size (): number { return this.#clients.size }
  get holder (): Attachment | null { return this.#holder }

  /** Registers a client; it collects live frames in its backlog until its attach ends. */
  add (port: ClientPort, requested: Role): Attachment {
    const att: Attachment = { port, requested, order: ++this.#attachCount, backlog: [], greeted: false }
    this.#clients.set(port, att)
    return att
  }

  has (port: ClientPort): boolean { return this.#clients.has(port) }

  isHolder (port: ClientPort): boolean { return this.#holder?.port === port }

  /** Makes `att` the holder (the newest controller wins). */
  hold (att: Attachment): void { this.#holder = att }

  /**
   * Removes a client. When it held the session, the most recently attached
   * remaining controller takes over; returns that new holder (or null), or
   * undefined when the holder did not change.
   */
  remove (port: ClientPort): Attachment | null | undefined {
    const att = this.#clients.get(port)
    if (att === undefined) return undefined
    this.#clients.delete(port)
    if (this.#holder !== att) return undefined
    let next: Attachment | null = null
    for (const other of this.#clients.values()) {
      if (other.requested === 'controller' && (next === null || other.order > next.order)) next = other
    }
    this.#holder = next
    return next
  }

  broadcast (events: LogEvent[]): void {
    if (this.#clients.size === 0) return
    for (const event of events) {
      let shared: Buffer | null = null
      for (const att of this.#clients.values()) {
        if (att.backlog !== null) { att.backlog.push(event); continue }
        if (event.observerFrame !== undefined && att !== this.#holder) { att.port.send(event.observerFrame); continue }
        // One Buffer per frame, whatever the number of clients.
        shared ??= Buffer.from(event.frame)
        att.port.send(shared)
      }
    }
  }

  /** A stored event as this client should see it (observers get notices for control requests). */
  render (event: LogEvent, att: Attachment): string {
    if (att === this.#holder) return event.frame
    if (event.observerFrame !== undefined) return event.observerFrame
    if (!event.frame.includes('"control_request"')) return event.frame
    const msg = JSON.parse(event.frame) as Record<string, unknown>
    if (msg.type !== 'control_request') return event.frame
    return pendingNotice(event.seq, String(msg.request_id), isRecord(msg.request) ? msg.request : {})
  }

  /** A per-connection frame (no seq) for every greeted client. */
  sendAll (frame: string): void {
    for (const att of this.#clients.values()) if (att.greeted) att.port.send(frame)
  }

  /** Tells every greeted client (but `except`, whose hello said it) who holds the session now. */
  announceHolder (except: Attachment | null = null): void {
    const holder = this.#holder
    for (const att of this.#clients.values()) {
      if (att === except || !att.greeted) continue
      att.port.send(gatewayFrame('holder', { holder: holder?.port.id ?? null, role: att === holder ? 'controller' : 'observer' }))
    }
  }
}
