/**
 * What claude-remote sends the gateway, across connections: lines written
 * while no connection is attached wait, in order, for the next hello; lines
 * a dead connection may have taken with it (in-flight.ts) go again once the
 * new connection's replay has caught up (an answer given meanwhile is in
 * that replay, so nothing answered is sent twice).
 */
import type WebSocket from 'ws'
import { InFlight } from './in-flight.js'

/** A line for the gateway, with what it takes to send it again if the connection dies with it. */
export interface Outgoing {
  line: string
  requestId?: string | undefined
  uuid?: string | undefined
}

export class GatewayOutbox {
  readonly #socket: () => WebSocket | null
  readonly #debug: (message: string) => void
  readonly #queue: Outgoing[] = []
  /** Control requests and uuid'd user lines a dropped connection may have lost. */
  readonly #inFlight = new InFlight()
  /** After a reconnect: lost lines are sent again once the replay reaches this seq (null: nothing to wait for). */
  #resendAt: number | null = null

  /** `socket`: the attached connection lines may go out on now, or null. */
  constructor (deps: { socket: () => WebSocket | null, debug: (message: string) => void }) {
    this.#socket = deps.socket
    this.#debug = deps.debug
  }

  /** Sends `line` now if attached, else queues it for the next hello. */
  send (line: string, track: Omit<Outgoing, 'line'> = {}): void {
    const out = { line, ...track }
    const ws = this.#socket()
    if (ws !== null) this.#transmit(ws, out)
    else this.#queue.push(out)
  }

  /** True when `line` waits in the queue (the hello will send it). */
  isQueued (line: string): boolean {
    return this.#queue.some((out) => out.line === line)
  }

  /** The ids of the control requests waiting in the queue, in order. */
  queuedRequestIds (): string[] {
    return this.#queue.flatMap((out) => out.requestId === undefined ? [] : [out.requestId])
  }

  /**
   * A new connection said hello: what went out on earlier ones unconfirmed
   * waits until the replay reaches `resendAt` (-1: nothing will be
   * replayed); the queued lines go now, in order.
   */
  attached (ws: WebSocket, resendAt: number): void {
    this.#inFlight.connected()
    this.#resendAt = resendAt
    for (const out of this.#queue.splice(0)) this.#transmit(ws, out)
  }

  /** Once the replay has reached `seenSeq` ≥ the hello's last seq (or `force`: it will not): what the old connection may have lost goes again. */
  resendIfCaughtUp (seenSeq: number, force = false): void {
    if (this.#resendAt === null || (!force && seenSeq < this.#resendAt)) return
    const ws = this.#socket()
    if (ws === null) return
    this.#resendAt = null
    for (const { line, requestId, uuid } of this.#inFlight.toResend()) {
      this.#debug(`sending again what the dropped connection may have lost: ${requestId ?? `user line ${String(uuid)}`}`)
      this.#transmit(ws, { line, requestId: requestId ?? undefined, uuid: uuid ?? undefined })
    }
  }

  /** The host's request `id` was given up on: not sent, nor sent again, any more. */
  withdraw (id: string): void {
    const at = this.#queue.findIndex((out) => out.requestId === id)
    if (at >= 0) this.#queue.splice(at, 1)
    this.#inFlight.answered(id)
  }

  /** A pong arrived with this payload. */
  pong (payload: string): void {
    this.#inFlight.pong(payload)
  }

  /** The request's answer (or a refusal of it) arrived. */
  answered (id: string): void {
    this.#inFlight.answered(id)
  }

  /** True when a `duplicate_request_id` refusal of `id` only says the original is still in flight. */
  isResent (id: string): boolean {
    return this.#inFlight.isResent(id)
  }

  #transmit (ws: WebSocket, out: Outgoing): void {
    ws.send(out.line)
    if (out.requestId !== undefined) this.#inFlight.requestSent(out.requestId, out.line)
    // The pong to this ping says the gateway has read the line: it need not be sent again.
    else if (out.uuid !== undefined) ws.ping(this.#inFlight.userSent(out.uuid, out.line))
  }
}
