/**
 * The gateway's HTTP API as typed methods, and the factory of WebSocket
 * connections to its sessions. Runs in browsers and Node 20: it uses the
 * global (or given) fetch and WebSocket, nothing else.
 */
import type { ConnectOptions, PermissionDecision } from './connection-types.js'
import { GatewayRequestError } from './errors.js'
import type {
  AnswerResult, CreateSessionOptions, HistoryPage, PendingControlRequest, PendingPermission, RequestOptions, SessionInfo, SessionList, WsTicket
} from './rest-types.js'
import type { RecordedFrame } from './frames.js'
import { SessionConnection } from './session-connection.js'
import type { WebSocketCtor } from './websocket-like.js'

export interface GatewayClientOptions {
  /** The gateway's base URL, `http(s)://host:port` (a path prefix is kept). */
  url: string
  /** A GATEWAY_TOKENS token or a JWT. */
  token?: string
  /**
   * A newer credential, asked when a connection's JWT is about to end it
   * (the gateway's `credential` frame, with JWT_EXPIRY_ENDS_CONNECTIONS):
   * it replaces `token` for REST calls and later attaches, and is presented
   * on the connection that asked. Without it such a connection is closed at
   * the expiry (4401, an 'error'). Also asked, once per attach, when a
   * connection's credential is refused (401 on reconnect, 4401).
   */
  refreshToken?: () => Promise<string> | string
  /** Default: globalThis.fetch. */
  fetch?: typeof fetch
  /** Default: globalThis.WebSocket. In Node 20 pass the `ws` package's WebSocket (it also makes header auth possible). */
  WebSocket?: WebSocketCtor
}

export class GatewayClient {
  readonly url: string
  #token: string | undefined
  readonly #refresh: (() => Promise<string> | string) | undefined
  /** The refresh in flight: connections asking at once share it. */
  #refreshing: Promise<string | null> | null = null
  readonly #fetch: typeof fetch
  readonly #WebSocket: WebSocketCtor | undefined

  constructor (options: GatewayClientOptions) {
    this.url = options.url.replace(/\/+$/, '')
    this.#token = options.token
    this.#refresh = options.refreshToken
    if (typeof (options.fetch ?? globalThis.fetch) !== 'function') throw new TypeError('GatewayClient: no fetch available; pass options.fetch')
    // Bound: a browser's fetch called as a method of another object throws "Illegal invocation".
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis)
    this.#WebSocket = options.WebSocket ?? (globalThis as { WebSocket?: WebSocketCtor }).WebSocket
  }

  // Every REST method takes `{ signal }` last: aborting rejects the call with the signal's reason.

  /** POST /v1/sessions: creates a session and starts its CLI. */
  createSession (options: CreateSessionOptions = {}, request: RequestOptions = {}): Promise<SessionInfo> {
    return this.#request('POST', '/v1/sessions', options, request.signal)
  }

  /** GET /v1/sessions: the caller's sessions, newest first; pass `next_cursor` back as `cursor`. */
  listSessions (query: { limit?: number, cursor?: string } = {}, request: RequestOptions = {}): Promise<SessionList> {
    return this.#request('GET', `/v1/sessions${queryString(query)}`, undefined, request.signal)
  }

  /** GET /v1/sessions/:id. */
  getSession (id: string, request: RequestOptions = {}): Promise<SessionInfo> {
    return this.#request('GET', `/v1/sessions/${encodeURIComponent(id)}`, undefined, request.signal)
  }

  /** DELETE /v1/sessions/:id: stops the CLI (history is kept; a later message resumes it). Resolves with the session. */
  stopSession (id: string, request: RequestOptions = {}): Promise<SessionInfo> {
    return this.#request('DELETE', `/v1/sessions/${encodeURIComponent(id)}`, undefined, request.signal)
  }

  /** GET /v1/sessions/:id/events: one page of recorded frames after `after`. */
  history (id: string, query: { after?: number, limit?: number } = {}, request: RequestOptions = {}): Promise<HistoryPage> {
    return this.#request('GET', `/v1/sessions/${encodeURIComponent(id)}/events${queryString(query)}`, undefined, request.signal)
  }

  /** Every recorded frame after `after`, page by page (`signal` aborts the page being read). */
  async * historyAll (id: string, after = 0, pageSize = 1000, request: RequestOptions = {}): AsyncGenerator<RecordedFrame> {
    let from = after
    for (;;) {
      const page = await this.history(id, { after: from, limit: pageSize }, request)
      yield * page.events
      if (!page.has_more || page.next_after === null) return
      from = page.next_after
    }
  }

  /** GET /v1/permissions: every pending can_use_tool prompt across the caller's sessions. */
  async pendingPermissions (request: RequestOptions = {}): Promise<PendingPermission[]> {
    return (await this.#request<{ permissions: PendingPermission[] }>('GET', '/v1/permissions', undefined, request.signal)).permissions
  }

  /** GET /v1/sessions/:id/permissions: one session's pending control requests, in full. */
  async pendingRequests (id: string, request: RequestOptions = {}): Promise<PendingControlRequest[]> {
    return (await this.#request<{ requests: PendingControlRequest[] }>('GET', `/v1/sessions/${encodeURIComponent(id)}/permissions`, undefined, request.signal)).requests
  }

  /** POST /v1/sessions/:id/permissions/:request_id: answers a prompt without holding the session (first answer wins). */
  answerPermission (sessionId: string, requestId: string, decision: PermissionDecision, request: RequestOptions = {}): Promise<AnswerResult> {
    return this.#request('POST', `/v1/sessions/${encodeURIComponent(sessionId)}/permissions/${encodeURIComponent(requestId)}`, decision, request.signal)
  }

  /** POST /v1/sessions/:id/ws-ticket: a single-use, 30 s credential for one upgrade. */
  createTicket (sessionId: string, request: RequestOptions = {}): Promise<WsTicket> {
    return this.#request('POST', `/v1/sessions/${encodeURIComponent(sessionId)}/ws-ticket`, undefined, request.signal)
  }

  /** The token REST calls and new attaches use now. */
  get token (): string | undefined { return this.#token }

  /** True when a refreshToken was given (refreshedToken can renew). */
  get canRefresh (): boolean { return this.#refresh !== undefined }

  /**
   * Asks `refreshToken` for a newer credential (one call for every caller
   * waiting) and uses it from now on; null without `refreshToken`. Rejects
   * with what `refreshToken` threw.
   */
  async refreshedToken (): Promise<string | null> {
    const refresh = this.#refresh
    if (refresh === undefined) return null
    this.#refreshing ??= (async () => {
      try {
        this.#token = await refresh()
        return this.#token
      } finally {
        this.#refreshing = null
      }
    })()
    return await this.#refreshing
  }

  /** Attaches to a session over WebSocket; the connection reconnects and resumes by itself until close(). */
  connect (sessionId: string, options: ConnectOptions = {}): SessionConnection {
    const WebSocketClass = this.#WebSocket
    if (WebSocketClass === undefined) throw new TypeError('GatewayClient: no WebSocket available; pass options.WebSocket (in Node 20: the ws package)')
    return new SessionConnection(sessionId, options, {
      url: this.url,
      WebSocket: WebSocketClass,
      client: this
    })
  }

  async #request<T> (method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
    const headers: Record<string, string> = {}
    if (this.#token !== undefined) headers.authorization = `Bearer ${this.#token}`
    if (body !== undefined) headers['content-type'] = 'application/json'
    const res = await this.#fetch(this.url + path, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }), ...(signal === undefined ? {} : { signal }) })
    const text = await res.text()
    let parsed: unknown
    try {
      parsed = text === '' ? null : JSON.parse(text)
    } catch {
      parsed = null
    }
    if (!res.ok) {
      const err = (parsed ?? {}) as { code?: unknown, message?: unknown }
      const retryAfter = Number(res.headers.get('retry-after'))
      throw new GatewayRequestError(
        res.status,
        typeof err.code === 'string' ? err.code : `http_${res.status}`,
        typeof err.message === 'string' ? err.message : `${method} ${path}: HTTP ${res.status}`,
        Number.isFinite(retryAfter) && res.headers.get('retry-after') !== null ? retryAfter : null
      )
    }
    return parsed as T
  }
}

function queryString (query: Record<string, string | number | undefined>): string {
  const parts = Object.entries(query)
    .filter((entry): entry is [string, string | number] => entry[1] !== undefined)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
  return parts.length === 0 ? '' : `?${parts.join('&')}`
}
