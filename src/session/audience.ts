/**
 * The clients attached to one session and who holds it. Fan-out lives here:
 * the holder gets CLI control requests in full, everyone else a
 * `request_pending` notice with the same seq; a client still being replayed
 * to collects live frames in its backlog instead. That backlog counts against
 * the client's byte budget together with what its connection has not sent
 * yet, so a client that stalls during its replay is ended like any other slow
 * consumer instead of making the gateway hold its live frames without bound.
 */
import { type MetricsSink, frameBytes, noopMetrics } from '../metrics/sink.js'
import { isRecord } from '../protocol/is-record.js'
import type { LogEvent } from './event-log.js'
import { gatewayFrame, pendingNotice } from './frames.js'

/** A recorded frame as a broadcast hands it to clients: its seq, its text and, usually, that text's UTF-8 bytes. */
export interface RecordedFrame {
  readonly seq: number
  readonly frame: string
  readonly bytes?: Buffer | undefined
}

/** A connected client as the session sees it. */
export interface ClientPort {
  readonly id: string
  /** `seq` is given for recorded frames (an event stream uses it as the event id), not for per-connection ones. */
  send: (data: string | Buffer, seq?: number) => void
  /**
   * Sends one committed batch of recorded frames, in order, as `send` would
   * one by one (a frame's `bytes`, when set, are its UTF-8 encoding). A port
   * that can write a batch at once has this; a broadcast gives every such
   * client the same array, so what the port builds from it can be built once
   * for all of them.
   */
  sendFrames?: (frames: readonly RecordedFrame[]) => void
  /**
   * Null when more may be sent now, else a promise that settles once the client
   * has read what waits for it (or is ended or gone). Replays wait on it, so a
   * client catching up on a long history is not cut off as a slow consumer.
   */
  writable?: () => Promise<void> | null
  /**
   * Bytes sent to this client and not yet written out (its own queue and its
   * socket's buffer). With `maxBufferedBytes`, the session counts them
   * together with the live frames it holds for the client during a replay:
   * one budget per client.
   */
  buffered?: () => number
  /**
   * The client's byte budget (WS_MAX_BUFFERED_BYTES). A port past it ends
   * itself as `slow_consumer` when sent more; the session ends it when the
   * live frames it holds for it during a replay take it past.
   */
  readonly maxBufferedBytes?: number
  /**
   * Ends the connection, dropping whatever is still unsent so the reason
   * arrives next: a WebSocket close code (errors.ts `endCloseCodes`), an
   * event stream's final `end` event. Sends are dropped from then on and
   * `writable()` settles. No-op once ended. The session still detaches the
   * client when its connection closes, as for any other close.
   */
  end?: (reason: EndReason, message: string) => void
  /** True once ended (by `end` or by the port itself) or closed by the peer. */
  readonly ended?: boolean
  /**
   * A client of another gateway node (src/cluster/remote-port.ts): its node
   * relays recorded frames from the store itself, so broadcasts skip it;
   * frames sent to it alone still reach it.
   */
  readonly remote?: boolean
}

/**
 * Why the gateway ended a client's connection. docs/PROTOCOL.md lists each
 * with its WebSocket close code and event-stream `end` event.
 */
export type EndReason = 'slow_consumer' | 'store_unavailable' | 'shutting_down' | 'session_moved' | 'credential_revoked' | 'credential_expired'

export type Role = 'controller' | 'observer'

const SLOW_CONSUMER = 'slow consumer: frames held during the replay passed the byte budget; resume after the last seq'

export interface Attachment {
  port: ClientPort
  requested: Role
  order: number
  /** Live frames that arrived while this client was being replayed to; null once live. */
  backlog: LogEvent[] | null
  /** UTF-8 bytes of the frames in `backlog`: held and not yet sent. */
  backlogBytes: number
  /** Set when the session ended the client as a slow consumer: its backlog is dropped and no longer grows. */
  ended: boolean
  /** Set once its hello is sent: notices for every client skip it before (hello states the same). */
  greeted: boolean
  /**
   * Recorded frames sent to this client alone while it is replayed to (prompts
   * the node running the CLI redelivers): sent once its replay and backlog are,
   * since one at a seq the replay has not reached would make the client skip
   * the frames before it as seen.
   */
  owed: Array<{ frame: string, seq: number }> | null
}

export class Audience {
  readonly #clients = new Map<ClientPort, Attachment>()
  readonly #metrics: Pick<MetricsSink, 'framesOut'>
  #holder: Attachment | null = null
  #attachCount = 0

  /** Every frame the session sends a client goes through here (`send`, or in bulk), counted in `metrics`. */
  constructor (metrics: Pick<MetricsSink, 'framesOut'> = noopMetrics) {
    this.#metrics = metrics
  }

  get size (): number { return this.#clients.size }
  get holder (): Attachment | null { return this.#holder }

  /** Attached clients by the role they have now: the holder is the controller, everyone else observes. */
  get roles (): { controller: number, observer: number } {
    const controller = this.#holder === null ? 0 : 1
    return { controller, observer: this.#clients.size - controller }
  }

  /** One frame for one client; `seq` when the frame is recorded. */
  send (port: ClientPort, data: string | Buffer, seq?: number): void {
    this.#metrics.framesOut(1, frameBytes(data))
    port.send(data, seq)
  }

  /** Registers a client; it collects live frames in its backlog until its attach ends. */
  add (port: ClientPort, requested: Role): Attachment {
    const att: Attachment = { port, requested, order: ++this.#attachCount, backlog: [], backlogBytes: 0, ended: false, greeted: false, owed: null }
    this.#clients.set(port, att)
    return att
  }

  /** Attached and not ended: a replay to an ended client stops (it is detached when its connection closes). */
  has (port: ClientPort): boolean {
    const att = this.#clients.get(port)
    return att !== undefined && !att.ended && port.ended !== true
  }

  isHolder (port: ClientPort): boolean { return this.#holder?.port === port }

  /** Makes `att` the holder (the newest controller wins). */
  hold (att: Attachment): void { this.#holder = att }

  /** `att` holds the session no more (its owner on another node says so); nobody does here. */
  unhold (att: Attachment): void { if (this.#holder === att) this.#holder = null }

  /**
   * With nobody holding the session, the most recently attached greeted
   * client that asked for control takes it (it was kept an observer while
   * another node ran the CLI). Returns the new holder, or null.
   */
  promote (): Attachment | null {
    if (this.#holder !== null) return null
    let next: Attachment | null = null
    for (const att of this.#clients.values()) {
      if (att.requested === 'controller' && att.greeted && !att.ended && (next === null || att.order > next.order)) next = att
    }
    this.#holder = next
    return next
  }

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
    let frames = 0
    let bytes = 0
    let batchBytes = -1
    // Observers see other renderings of some frames (control requests): those go frame by frame.
    const variants = events.some((e) => e.observerFrame !== undefined)
    let rest: Attachment[] | null = null
    for (const att of this.#clients.values()) {
      if (att.port.remote === true) continue
      if (att.backlog === null && att.port.sendFrames !== undefined && (!variants || att === this.#holder)) {
        // The same array to every client: a WebSocket client frames the batch once for all of them (ws-client.ts).
        att.port.sendFrames(events)
        frames += events.length
        if (batchBytes < 0) batchBytes = events.reduce((sum, e) => sum + utf8Bytes(e), 0)
        bytes += batchBytes
      } else {
        (rest ??= []).push(att)
      }
    }
    if (rest !== null) {
      for (const event of events) {
        let frameBytes: number | null = null
        let observerBytes: number | null = null
        for (const att of rest) {
          if (att.backlog !== null) { this.#hold(att, event); continue }
          if (event.observerFrame !== undefined && att !== this.#holder) {
            att.port.send(event.observerFrame, event.seq)
            frames++
            bytes += observerBytes ??= Buffer.byteLength(event.observerFrame)
            continue
          }
          // The same string to every client: a WebSocket client frames it once for all of them (ws-client.ts).
          att.port.send(event.frame, event.seq)
          frames++
          bytes += frameBytes ??= utf8Bytes(event)
        }
      }
    }
    // Once per batch, not per frame and client.
    if (frames > 0) this.#metrics.framesOut(frames, bytes)
  }

  /**
   * Keeps a live frame for a client still being replayed to, within its
   * budget: past it, the client is ended as a slow consumer and what it held
   * is dropped at once (in place, so a replay iterating the array stops too).
   */
  #hold (att: Attachment, event: LogEvent): void {
    const backlog = att.backlog as LogEvent[]
    if (att.ended || att.port.ended === true) return
    backlog.push(event)
    att.backlogBytes += utf8Bytes(event)
    const { port } = att
    if (port.maxBufferedBytes === undefined || port.end === undefined) return
    if (att.backlogBytes + (port.buffered?.() ?? 0) <= port.maxBufferedBytes) return
    att.ended = true
    backlog.length = 0
    att.backlogBytes = 0
    port.end('slow_consumer', SLOW_CONSUMER)
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

  /** Every attached client. */
  get ports (): ClientPort[] { return [...this.#clients.keys()] }

  /** Clients of other nodes (attached through the owner's router). */
  get remotes (): ClientPort[] {
    return [...this.#clients.keys()].filter((port) => port.remote === true)
  }

  /** The attachment of `port`, if attached. */
  attachment (port: ClientPort): Attachment | undefined {
    return this.#clients.get(port)
  }

  /** Ends every client's connection (ClientPort.end) with `reason`. */
  endAll (reason: EndReason, message: string): void {
    for (const att of [...this.#clients.values()]) att.port.end?.(reason, message)
  }

  /** A per-connection frame (no seq) for every greeted client. */
  sendAll (frame: string): void {
    for (const att of this.#clients.values()) if (att.greeted) this.send(att.port, frame)
  }

  /** Tells every greeted client (but `except`, whose hello said it) who holds the session now. */
  announceHolder (except: Attachment | null = null): void {
    const holder = this.#holder
    for (const att of this.#clients.values()) {
      if (att === except || !att.greeted) continue
      this.send(att.port, gatewayFrame('holder', { holder: holder?.port.id ?? null, role: att === holder ? 'controller' : 'observer' }))
    }
  }
}

/** A frame's UTF-8 length, from its bytes when it has them. */
export function utf8Bytes (event: RecordedFrame): number {
  return event.bytes?.length ?? Buffer.byteLength(event.frame)
}
