/**
 * A `ws` WebSocket constructor for the typed client (src/client) that keeps
 * every socket the client builds, so a test can cut one (`terminate()`: the
 * network dropping it, no close frame) and watch the client reconnect.
 */
import WebSocket from 'ws'
import type { WebSocketCtor } from '../../src/client/index.js'

export function trackedWebSocket (): { ctor: WebSocketCtor, built: WebSocket[] } {
  const built: WebSocket[] = []
  class Tracked extends WebSocket {
    constructor (url: string, protocols?: string | string[], options?: { headers?: Record<string, string> }) {
      super(url, protocols, options)
      built.push(this)
    }
  }
  return { ctor: Tracked as unknown as WebSocketCtor, built }
}
