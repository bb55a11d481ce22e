/**
 * One timer for every WebSocket client (the ws heartbeat pattern): each tick
 * sends a `keep_alive` frame and a ping; a client that has not answered the
 * previous ping is dropped.
 *
 * The pong listener is one function shared by every socket (ws calls it with
 * the socket as `this`), and what is waited on is kept in one WeakSet holding
 * only the sockets pinged and not yet answered: an idle client costs no
 * closure or field of its own here.
 */
import type { WebSocket } from 'ws'
import type { WsClient } from './ws-client.js'

const KEEP_ALIVE = Buffer.from('{"type":"keep_alive"}')

/** Sockets pinged by a tick whose pong has not come back yet. */
const unanswered = new WeakSet<WebSocket>()

function onPong (this: WebSocket): void { unanswered.delete(this) }

export class Heartbeat {
  readonly #clients = new Set<WsClient>()
  readonly #timer: NodeJS.Timeout

  constructor (intervalMs: number) {
    this.#timer = setInterval(() => this.#tick(), intervalMs)
    this.#timer.unref()
  }

  get size (): number { return this.#clients.size }

  add (client: WsClient): void {
    this.#clients.add(client)
    client.socket.on('pong', onPong)
  }

  delete (client: WsClient): void { this.#clients.delete(client) }

  /** Every client currently tracked (used at shutdown). */
  clients (): WsClient[] { return [...this.#clients] }

  stop (): void { clearInterval(this.#timer) }

  #tick (): void {
    for (const client of this.#clients) {
      const socket = client.socket
      if (unanswered.has(socket)) {
        this.#clients.delete(client)
        socket.terminate()
        continue
      }
      unanswered.add(socket)
      socket.ping()
      client.send(KEEP_ALIVE)
    }
  }
}
