/**
 * One timer for every WebSocket client (the ws heartbeat pattern): each tick
 * sends a `keep_alive` frame and a ping; a client that has not answered the
 * previous ping is dropped.
 */
import type { WsClient } from './ws-client.js'

const KEEP_ALIVE = Buffer.from('{"type":"keep_alive"}')

export class Heartbeat {
  readonly #clients = new Set<WsClient>()
  readonly #timer: NodeJS.Timeout

  constructor (intervalMs: number) {
    this.#timer = setInterval(() => this.#tick(), intervalMs)
    this.#timer.unref()
  }

  get size (): number { return this.#clients.size }

  add (client: WsClient): void { this.#clients.add(client) }
  delete (client: WsClient): void { this.#clients.delete(client) }

  /** Every client currently tracked (used at shutdown). */
  clients (): WsClient[] { return [...this.#clients] }

  stop (): void { clearInterval(this.#timer) }

  #tick (): void {
    for (const client of this.#clients) {
      if (!client.alive) {
        this.#clients.delete(client)
        client.socket.terminate()
        continue
      }
      client.alive = false
      client.socket.ping()
      client.send(KEEP_ALIVE)
    }
  }
}
