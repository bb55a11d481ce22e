/**
 * Keeps one WebSocket to a session open: builds each attach's URL and
 * credentials (a fresh ticket per attach in ticket mode), watches for
 * silence (keep_alive watchdog), reads close codes (close-policy.ts) and
 * retries with backoff. It knows nothing of frames: SessionConnection gets
 * the raw messages and says when an attach succeeded (its hello).
 */
import { backoffDelay, type BackoffSettings } from './backoff.js'
import { closeVerdict } from './close-policy.js'
import { ConnectionError, GatewayRequestError } from './errors.js'
import type { GatewayClient } from './gateway-client.js'
import { OPEN, type WebSocketCtor, type WebSocketLike } from './websocket-like.js'

/** HTTP statuses of a refused upgrade (or ticket) that a retry would only repeat. */
const FATAL_STATUSES = new Set([400, 401, 403, 404])
const SUBPROTOCOL = 'claude-gateway.v1'
/** The gateway's close when the credential a socket lives by was revoked or expired (PROTOCOL.md). */
const CREDENTIAL_CLOSE = 4401

export interface LinkConfig {
  url: string
  sessionId: string
  WebSocket: WebSocketCtor
  client: GatewayClient
  auth: 'header' | 'subprotocol' | 'ticket'
  /** null: never reconnect. */
  backoff: BackoffSettings | null
  keepAliveTimeoutMs: number
}

export interface LinkHooks {
  /** The query of the next attach (role, after). */
  query: () => URLSearchParams
  message: (data: unknown) => void
  /** The current socket is gone, whatever the reason. */
  down: () => void
  /** A new attempt is scheduled. */
  retrying: () => void
  /** Stop for good: this error explains why. */
  fail: (err: Error) => void
  /** Worth reporting, but the link carries on. */
  warn: (err: Error) => void
}

export class SocketLink {
  readonly #c: LinkConfig
  readonly #hooks: LinkHooks
  #socket: WebSocketLike | null = null
  /** Bumped per socket; events of an older socket are ignored. */
  #gen = 0
  #attempts = 0
  #retryAfterMs: number | null = null
  #reconnectTimer: ReturnType<typeof setTimeout> | null = null
  #watchdog: ReturnType<typeof setTimeout> | null = null
  #lastFrameAt = 0
  #closed = false
  /** A refusal of the credential (401, 4401) was answered with one refreshToken call since the last hello. */
  #renewed = false
  /** The ticket or probe request in flight: aborted when the link moves on or it goes unanswered (#http). */
  #http: AbortController | null = null

  constructor (config: LinkConfig, hooks: LinkHooks) {
    this.#c = config
    this.#hooks = hooks
  }

  start (): void {
    void this.#open()
  }

  /** The attach succeeded (hello): the next failure starts the backoff from the beginning. */
  attached (): void {
    this.#attempts = 0
    this.#renewed = false
  }

  /** The gateway asked to wait this long before the next attempt (hello `unavailable`). */
  retryAfter (ms: number | null): void {
    this.#retryAfterMs = ms
  }

  /** Writes on the current socket; false if there is none open. */
  send (text: string): boolean {
    const socket = this.#socket
    if (socket === null || socket.readyState !== OPEN) return false
    socket.send(text)
    return true
  }

  /** Drops the current socket and attaches again at once (a take-over). */
  restart (): void {
    if (this.#closed) return
    this.#abortHttp()
    this.#drop()
    this.#clearReconnect()
    void this.#open()
  }

  close (): void {
    if (this.#closed) return
    this.#closed = true
    this.#abortHttp()
    this.#drop(1000)
    this.#clearReconnect()
  }

  async #open (): Promise<void> {
    const gen = ++this.#gen
    const query = this.#hooks.query()
    let protocols = [SUBPROTOCOL]
    let init: { headers: Record<string, string> } | undefined
    if (this.#c.auth === 'ticket') {
      try {
        query.set('ticket', (await this.#request((signal) => this.#c.client.createTicket(this.#c.sessionId, { signal }))).ticket)
      } catch (err) {
        if (gen === this.#gen && !this.#closed) this.#refused(err)
        return
      }
      if (gen !== this.#gen || this.#closed) return
    } else if (this.#c.client.token !== undefined) {
      // Read at each attach: a refreshed credential (GatewayClient.refreshedToken) is used from then on.
      const token = this.#c.client.token
      if (this.#c.auth === 'subprotocol') protocols = [SUBPROTOCOL, `bearer.${token}`]
      else init = { headers: { authorization: `Bearer ${token}` } }
    }
    const url = `${this.#c.url.replace(/^http/, 'ws')}/v1/sessions/${encodeURIComponent(this.#c.sessionId)}/ws?${query.toString()}`
    let socket: WebSocketLike
    try {
      socket = new this.#c.WebSocket(url, protocols, init)
    } catch (err) {
      // A bad URL throws here, possibly inside connect(): reported once the caller could listen.
      queueMicrotask(() => { if (gen === this.#gen && !this.#closed) this.#hooks.fail(err instanceof Error ? err : new Error(String(err))) })
      return
    }
    this.#socket = socket
    let opened = false
    this.#lastFrameAt = Date.now()
    this.#armWatchdog(gen)
    socket.addEventListener('open', () => { opened = true })
    socket.addEventListener('message', (event) => {
      if (gen !== this.#gen) return
      this.#lastFrameAt = Date.now()
      this.#hooks.message(event.data)
    })
    socket.addEventListener('error', () => {}) // a 'close' always follows
    socket.addEventListener('close', (event) => {
      if (gen !== this.#gen) return
      this.#socket = null
      this.#stopWatchdog()
      this.#hooks.down()
      if (this.#closed) return
      if (!opened) void this.#probeRefusal(gen)
      else this.#onClose(event.code, event.reason)
    })
  }

  /**
   * The upgrade failed before the socket opened. A browser does not say why
   * (the HTTP status of a refused upgrade is hidden from scripts), so the
   * session is asked for over HTTP with the same credentials: an answer the
   * upgrade would repeat (401, 403, 404, 400) ends the link with that error;
   * anything else (429 limits, network trouble) is retried.
   */
  async #probeRefusal (gen: number): Promise<void> {
    try {
      await this.#request((signal) => this.#c.client.getSession(this.#c.sessionId, { signal }))
    } catch (err) {
      if (gen === this.#gen && !this.#closed) this.#refused(err)
      return
    }
    if (gen === this.#gen && !this.#closed) this.#scheduleReconnect()
  }

  /**
   * An HTTP request on the way to a socket, given up after
   * keepAliveTimeoutMs like a silent socket: on a network that dropped it
   * without a word it would otherwise hold the reconnects for as long as
   * fetch waits (minutes in Node, unbounded in browsers).
   */
  async #request<T> (call: (signal: AbortSignal) => Promise<T>): Promise<T> {
    this.#abortHttp()
    const controller = new AbortController()
    this.#http = controller
    const timer = setTimeout(() => controller.abort(new Error(`No HTTP answer within ${this.#c.keepAliveTimeoutMs} ms`)), this.#c.keepAliveTimeoutMs)
    try {
      return await call(controller.signal)
    } finally {
      clearTimeout(timer)
      if (this.#http === controller) this.#http = null
    }
  }

  #abortHttp (): void {
    this.#http?.abort(new Error('The link moved on'))
    this.#http = null
  }

  /** An HTTP error on the way to a socket (ticket or probe): fatal for refusals a retry repeats. */
  #refused (err: unknown): void {
    if (err instanceof GatewayRequestError && err.statusCode === 401 && this.#renew(err)) return
    if (err instanceof GatewayRequestError && FATAL_STATUSES.has(err.statusCode)) {
      this.#hooks.fail(err)
      return
    }
    if (err instanceof GatewayRequestError && err.retryAfterSeconds !== null) this.#retryAfterMs = err.retryAfterSeconds * 1000
    this.#scheduleReconnect()
  }

  #onClose (code: number, reason: string): void {
    const verdict = closeVerdict(code)
    if (verdict === 'stop') {
      const err = new ConnectionError('policy_close', `The gateway closed the connection with ${code}${reason === '' ? '' : ` (${reason})`}`, code)
      if (code !== CREDENTIAL_CLOSE || !this.#renew(err)) this.#hooks.fail(err)
      return
    }
    if (code === 1009) this.#hooks.warn(new ConnectionError('frame_too_large', 'A frame sent was over the gateway\'s WS_MAX_PAYLOAD_BYTES; reconnecting', code))
    if (verdict === 'reconnect') this.#retryAfterMs = null
    this.#scheduleReconnect()
  }

  /**
   * The credential was refused (an expired JWT after a long drop or a
   * sleep, a revoked one): asks refreshToken once per hello for a newer one
   * and tries again with it; false (the caller gives up with `err`) when
   * that was done already or there is no refreshToken. If it throws, `err` ends the link.
   */
  #renew (err: Error): boolean {
    if (this.#renewed || !this.#c.client.canRefresh) return false
    this.#renewed = true
    this.#hooks.retrying()
    const gen = this.#gen
    const current = (): boolean => gen === this.#gen && !this.#closed
    this.#c.client.refreshedToken().then((token) => {
      if (!current()) return
      if (token === null) this.#hooks.fail(err)
      else this.#scheduleReconnect()
    }, () => { if (current()) this.#hooks.fail(err) })
    return true
  }

  #scheduleReconnect (): void {
    if (this.#closed) return
    const backoff = this.#c.backoff
    if (backoff === null) {
      this.#hooks.fail(new ConnectionError('reconnect_disabled', 'The connection dropped and reconnect is off'))
      return
    }
    const attempt = this.#attempts++
    if (attempt >= backoff.maxAttempts) {
      this.#hooks.fail(new ConnectionError('gave_up', `No hello after ${attempt} attempts`))
      return
    }
    const delay = Math.max(backoffDelay(attempt, backoff), this.#retryAfterMs ?? 0)
    this.#retryAfterMs = null
    this.#hooks.retrying()
    this.#clearReconnect()
    this.#reconnectTimer = setTimeout(() => {
      this.#reconnectTimer = null
      void this.#open()
    }, delay)
  }

  /** Lets go of the current socket: its later events are ignored. Without a code it is cut (terminate) where possible. */
  #drop (code?: number): void {
    const socket = this.#socket
    this.#gen++
    this.#socket = null
    this.#stopWatchdog()
    if (socket === null) return
    this.#hooks.down()
    if (code === undefined && typeof socket.terminate === 'function') socket.terminate()
    else socket.close(code)
  }

  #clearReconnect (): void {
    if (this.#reconnectTimer !== null) clearTimeout(this.#reconnectTimer)
    this.#reconnectTimer = null
  }

  /** Checks, when due, that a frame arrived within keepAliveTimeoutMs; a silent socket is dropped and replaced. */
  #armWatchdog (gen: number): void {
    this.#stopWatchdog()
    const due = this.#lastFrameAt + this.#c.keepAliveTimeoutMs - Date.now()
    this.#watchdog = setTimeout(() => {
      this.#watchdog = null
      if (gen !== this.#gen || this.#closed) return
      if (Date.now() - this.#lastFrameAt < this.#c.keepAliveTimeoutMs) {
        this.#armWatchdog(gen)
        return
      }
      this.#drop()
      this.#scheduleReconnect()
    }, Math.max(0, due))
  }

  #stopWatchdog (): void {
    if (this.#watchdog !== null) clearTimeout(this.#watchdog)
    this.#watchdog = null
  }
}
