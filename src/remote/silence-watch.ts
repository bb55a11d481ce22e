/**
 * Noticing a gateway that vanished without closing the connection (its host
 * powered off, a NAT that forgot the flow: no FIN, no RST). Such a socket
 * never closes, and the host would wait for ever; so a connection nothing
 * arrives on is pinged, then dropped (a reconnect by seq follows).
 */
import WebSocket from 'ws'

/**
 * A connection nothing arrives on is pinged after `pingAfterMs` and given up
 * after `deadAfterMs` (the typed client's 45 s, three gateway keep_alive
 * ticks).
 */
export const SILENCE_DEFAULTS = { pingAfterMs: 15_000, deadAfterMs: 45_000 }
/** Payload of the liveness pings (not a number: InFlight reads numeric pongs). */
const ALIVE_PING = 'alive'

export interface SilenceWatch {
  bounds: typeof SILENCE_DEFAULTS
  /** False once `ws` is no longer the connection in use: the watch ends. */
  isCurrent: (ws: WebSocket) => boolean
  /** When anything (a frame, a ping, a pong) last arrived on the connection in use, ms since the epoch. */
  lastHeard: () => number
  debug: (message: string) => void
}

/** Pings `ws` while it is silent, and terminates it (its close starts the reconnect) once silent for too long. */
export function watchSilence (ws: WebSocket, watch: SilenceWatch): void {
  const { pingAfterMs, deadAfterMs } = watch.bounds
  const timer = setTimeout(() => {
    if (!watch.isCurrent(ws)) return
    const silent = Date.now() - watch.lastHeard()
    if (silent >= deadAfterMs) {
      watch.debug(`nothing from the gateway for ${silent} ms: dropping the connection`)
      ws.terminate()
      return
    }
    if (silent >= pingAfterMs && ws.readyState === WebSocket.OPEN) ws.ping(ALIVE_PING)
    watchSilence(ws, watch)
  }, Math.min(pingAfterMs, deadAfterMs))
  timer.unref()
}
