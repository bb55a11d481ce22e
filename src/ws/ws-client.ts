/**
 * A WebSocket client as a session's `ClientPort`. Sending never waits: a
 * client that does not read falls behind, and once its unsent backlog passes
 * `maxBufferedBytes` it is closed with 4008 so it cannot delay anyone else
 * or grow the gateway's memory. It reconnects with `?after=<last seq>`.
 */
import { randomUUID } from 'node:crypto'
import type { WebSocket } from 'ws'
import { closeCodes } from '../errors.js'
import type { ClientPort } from '../session/session.js'

export class WsClient implements ClientPort {
  readonly id = randomUUID()
  readonly socket: WebSocket
  readonly #maxBuffered: number
  /** Cleared on each heartbeat; set again by the peer's pong. */
  alive = true
  #closed = false

  constructor (socket: WebSocket, maxBufferedBytes: number) {
    this.socket = socket
    this.#maxBuffered = maxBufferedBytes
    socket.on('pong', () => { this.alive = true })
    socket.once('close', () => { this.#closed = true })
  }

  get closed (): boolean { return this.#closed }

  send (data: string | Buffer): void {
    if (this.#closed) return
    if (this.socket.bufferedAmount > this.#maxBuffered) {
      this.close(closeCodes.slowConsumer, 'slow consumer: reconnect with ?after=<last seq>')
      return
    }
    this.socket.send(data, { binary: false })
  }

  close (code: number, reason: string): void {
    if (this.#closed) return
    this.#closed = true
    this.socket.close(code, reason)
    // A peer that does not read will not answer the close handshake either.
    const timer = setTimeout(() => this.socket.terminate(), 2000)
    timer.unref()
    this.socket.once('close', () => clearTimeout(timer))
  }
}
