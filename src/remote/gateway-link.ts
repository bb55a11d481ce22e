/**
 * claude-remote's controller WebSocket to the gateway, kept open: it is
 * reopened after every drop (with jittered backoff, see reconnect-backoff.ts)
 * until claude-remote ends or the gateway stays unreachable too long, and a
 * connection that goes silent is dropped (silence-watch.ts). What the
 * frames mean is the bridge's call; when a close or refusal is final,
 * session-attach.ts's.
 */
import WebSocket from 'ws'
import { rawText } from './frames.js'
import { ReconnectBackoff } from './reconnect-backoff.js'
import { type SILENCE_DEFAULTS, watchSilence } from './silence-watch.js'

/** Without a hello for this long, the gateway is considered gone. */
const GIVE_UP_MS = 120_000

export interface LinkEvents {
  /** A text frame on the connection in use. */
  message: (text: string) => void
  /** A pong on the connection in use, its payload as text. */
  pong: (payload: string) => void
  /** The upgrade was refused with this HTTP status: true when that is final (no reconnect). */
  refused: (status: number) => boolean
  /** The connection in use closed: false when no reconnect must follow. */
  closed: (code: number, reason: string) => boolean
  /** No hello for GIVE_UP_MS (said on stderr already): no reconnect follows. */
  gaveUp: () => void
}

export interface LinkDeps {
  /** The URL to open now (its `after` moves with what the host was given). */
  url: () => string
  /** The token to open it with now. */
  token: () => string
  silence: typeof SILENCE_DEFAULTS
  /** How long without a connection before giving up (GIVE_UP_MS unless a test shortens it). */
  giveUpMs?: number | undefined
  /** The reconnect jitter's source, [0, 1). */
  random?: (() => number) | undefined
  io: { warn: (message: string) => void, debug: (message: string) => void }
  events: LinkEvents
}

export class GatewayLink {
  readonly #deps: LinkDeps
  readonly #backoff: ReconnectBackoff
  #ws: WebSocket | null = null
  /** The connection in use said hello: lines may go out on it. */
  #live = false
  #lastHeard = 0
  #downSince = 0
  #closed = false

  constructor (deps: LinkDeps) {
    this.#deps = deps
    this.#backoff = new ReconnectBackoff(deps.random)
  }

  /** The connection in use when it has said hello and is open, else null (lines wait). */
  get socket (): WebSocket | null {
    const ws = this.#ws
    return this.#live && ws !== null && ws.readyState === WebSocket.OPEN ? ws : null
  }

  /** Opens the first connection. */
  start (): void {
    this.#downSince = Date.now()
    this.#connect()
  }

  /** The connection in use said hello: lines may go out on it, and the next drop starts the backoff afresh. */
  attached (): WebSocket {
    this.#live = true
    this.#backoff.reset()
    return this.#ws as WebSocket
  }

  /** The gateway asked to be retried no sooner than `ms` from now (hello `retry_after_ms`). */
  retryAfter (ms: number): void {
    this.#backoff.atLeast(ms)
  }

  /** No more connections; the one in use, if any, is closed normally. */
  close (): void {
    this.#closed = true
    const ws = this.#ws
    this.#ws = null
    ws?.close(1000)
  }

  #connect (): void {
    if (this.#closed) return
    const { io, events } = this.#deps
    const url = this.#deps.url()
    io.debug(`connecting ${url}`)
    const ws = new WebSocket(url, ['claude-gateway.v1'], {
      headers: { authorization: `Bearer ${this.#deps.token()}` },
      // CLI lines are unbounded (a Write of a large file): the gateway bounds them, not this client.
      maxPayload: 1024 * 1024 * 1024,
      handshakeTimeout: this.#deps.silence.deadAfterMs
    })
    this.#ws = ws
    this.#lastHeard = Date.now()
    watchSilence(ws, { bounds: this.#deps.silence, isCurrent: (w) => this.#ws === w, lastHeard: () => this.#lastHeard, debug: io.debug })
    ws.on('unexpected-response', (_req, res) => {
      const status = res.statusCode ?? 0
      res.resume()
      if (events.refused(status)) { this.#closed = true; return }
      ws.terminate()
    })
    ws.on('message', (data: WebSocket.RawData) => {
      if (this.#ws !== ws) return
      this.#lastHeard = Date.now()
      events.message(rawText(data))
    })
    ws.on('ping', () => { if (this.#ws === ws) this.#lastHeard = Date.now() })
    ws.on('pong', (data: Buffer) => {
      if (this.#ws !== ws) return
      this.#lastHeard = Date.now()
      events.pong(data.toString('utf8'))
    })
    ws.on('error', (err) => io.debug(`websocket error: ${err.message}`))
    ws.on('close', (code, reason) => {
      if (this.#ws !== ws) return
      this.#ws = null
      if (this.#live) this.#downSince = Date.now()
      this.#live = false
      io.debug(`connection closed (${code})`)
      if (!events.closed(code, reason.toString('utf8'))) { this.#closed = true; return }
      this.#reconnectLater()
    })
  }

  #reconnectLater (): void {
    if (this.#closed) return
    const giveUpMs = this.#deps.giveUpMs ?? GIVE_UP_MS
    if (Date.now() - this.#downSince > giveUpMs) {
      this.#deps.io.warn(`lost the gateway for more than ${giveUpMs / 1000} s: giving up`)
      this.#closed = true
      this.#deps.events.gaveUp()
      return
    }
    const wait = this.#backoff.next()
    this.#deps.io.debug(`reconnecting in ${Math.round(wait)} ms`)
    setTimeout(() => this.#connect(), wait)
  }
}
