/**
 * A WebSocket client as a session's `ClientPort`. Sending never waits: a
 * client that does not read falls behind, and once its unsent backlog passes
 * `maxBufferedBytes` it is closed with 4008 so it cannot delay anyone else
 * or grow the gateway's memory. It reconnects with `?after=<last seq>`.
 *
 * Frames sent in one tick (a committed batch) leave in one socket write: the
 * socket is corked at the first send and uncorked on the next tick, instead
 * of one writev system call per frame. Same bytes, same order.
 */
import { randomUUID } from 'node:crypto'
import type { Socket } from 'node:net'
import type { WebSocket } from 'ws'
import { closeCodes } from '../errors.js'
import type { ClientPort } from '../session/session.js'

/** A corked socket is flushed early once this much waits in it. */
const FLUSH_BYTES = 64 * 1024

export class WsClient implements ClientPort {
  readonly id = randomUUID()
  readonly socket: WebSocket
  readonly #maxBuffered: number
  /** Cleared on each heartbeat; set again by the peer's pong. */
  alive = true
  #closed = false
  #corked = false

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
    const raw = this.#cork()
    this.socket.send(data, { binary: false })
    // Large batches go out in slices, so what waits in user space stays small.
    if (raw !== null && raw.writableLength >= FLUSH_BYTES) {
      raw.uncork()
      raw.cork()
    }
  }

  /** Corks the socket until the next tick (once per tick); the corked socket, or null. */
  #cork (): Socket | null {
    // ws keeps its net.Socket in `_socket` (no public accessor); without it, send uncorked.
    const raw = (this.socket as unknown as { _socket?: Socket | null })._socket
    if (raw == null || raw.destroyed) return null
    if (this.#corked) return raw
    this.#corked = true
    raw.cork()
    process.nextTick(() => {
      this.#corked = false
      raw.uncork()
    })
    return raw
  }

  /** Null unless the socket's buffer is past its high-water mark; then settles on 'drain' (or close). */
  writable (): Promise<void> | null {
    const raw = (this.socket as unknown as { _socket?: Socket | null })._socket
    if (this.#closed || raw == null || raw.destroyed || !raw.writableNeedDrain) return null
    return new Promise((resolve) => {
      const done = (): void => {
        raw.off('drain', done)
        raw.off('close', done)
        resolve()
      }
      raw.on('drain', done)
      raw.on('close', done)
    })
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
