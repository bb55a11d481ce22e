/**
 * One client's attachment to one session over WebSocket, kept alive across
 * drops: it reconnects with backoff, resumes with `after=<last seq>` and
 * delivers every recorded frame exactly once, in seq order (frames at or
 * below the last seq delivered are dropped, so a replay overlapping what was
 * seen cannot duplicate). It tracks the session's role/holder, status, turn
 * and open prompts from the frames, and sends user messages, control
 * requests and permission answers so that a drop loses none of them
 * (outbox.ts). The socket itself, its auth, watchdog, close codes and
 * backoff: socket-link.ts.
 */
import { backoffSettings } from './backoff.js'
import type {
  ConnectOptions, ConnectionEvents, ConnectionState, PermissionDecision, PermissionRequest, TurnState
} from './connection-types.js'
import { Emitter } from './emitter.js'
import { ConnectionError, ControlRequestError } from './errors.js'
import type { ContentBlock, GatewayErrorFrame, HelloFrame, LiveFrame, RecordedFrame, Role } from './frames.js'
import type { GatewayClient } from './gateway-client.js'
import { Outbox } from './outbox.js'
import { allowDecision, alwaysAllowDecision, denyDecision, permissionAnswerFrame, permissionFromControlRequest, permissionFromPending } from './permissions.js'
import { MAX_TIMER_MS, refreshDelay } from './refresh-delay.js'
import { uuid } from './uuid.js'
import { SocketLink } from './socket-link.js'
import type { WebSocketCtor } from './websocket-like.js'

/** Three of the gateway's default keep_alive ticks (KEEPALIVE_INTERVAL_MS = 15 s). */
const KEEP_ALIVE_TIMEOUT_MS = 45_000

/** What GatewayClient.connect hands a connection. */
export interface ConnectionDeps {
  url: string
  WebSocket: WebSocketCtor
  client: GatewayClient
}

type Frame = Record<string, unknown> & { type?: unknown, subtype?: unknown }

export class SessionConnection {
  readonly sessionId: string
  readonly #options: ConnectOptions
  readonly #deps: ConnectionDeps
  readonly #events = new Emitter<ConnectionEvents>()
  readonly #outbox = new Outbox()
  readonly #pending = new Map<string, PermissionRequest>()
  /** Prompts onPermission was called for (so a redelivery does not call it twice). */
  readonly #asked = new Set<string>()
  #wantRole: Role
  #state: ConnectionState = 'connecting'
  #role: Role | null = null
  #holder: string | null = null
  #clientId: string | null = null
  #status: string | null = null
  #turn: TurnState | null = null
  #store: 'ok' | 'degraded' = 'ok'
  #lastSeq: number
  /** False until the first hello: the first attach uses options.after, every later one the last seq. */
  #attached = false
  readonly #link: SocketLink
  /** Hellos so far: which attach the outbox sent on. */
  #attaches = 0
  /** This connection's hello: seqs announced missing, and where its replay ends (resends wait for it). */
  #announced: Array<[number, number]> = []
  #catchUpAt: number | null = null
  #helloPending: Set<string> = new Set()
  /** Asks for a newer credential before the gateway's deadline for this connection's (its `credential` frame). */
  #refreshTimer: ReturnType<typeof setTimeout> | null = null

  constructor (sessionId: string, options: ConnectOptions, deps: ConnectionDeps) {
    this.sessionId = sessionId
    this.#options = options
    this.#deps = deps
    this.#wantRole = options.role ?? 'controller'
    const auth = options.auth ?? (typeof (globalThis as { document?: unknown }).document !== 'undefined' ? 'subprotocol' : 'header')
    this.#lastSeq = typeof options.after === 'number' ? Math.max(0, options.after) : 0
    this.#link = new SocketLink({
      ...deps,
      sessionId,
      auth,
      backoff: options.reconnect === false ? null : backoffSettings(options.reconnect),
      keepAliveTimeoutMs: options.keepAliveTimeoutMs ?? KEEP_ALIVE_TIMEOUT_MS
    }, {
      query: () => {
        const query = new URLSearchParams({ role: this.#wantRole })
        if (this.#attached || options.after !== 'live') query.set('after', String(this.#lastSeq))
        return query
      },
      message: (data) => this.#onMessage(data),
      down: () => this.#outbox.detach(),
      retrying: () => this.#setState(this.#attached ? 'reconnecting' : 'connecting'),
      fail: (err) => this.#fail(err),
      warn: (err) => {
        // Not resent: the next connection would be closed the same way.
        if (err instanceof ConnectionError && err.code === 'frame_too_large') this.#outbox.tooLarge()
        this.#emit('error', err)
      }
    })
    this.#link.start()
  }

  get state (): ConnectionState { return this.#state }
  /** This client's role now (from hello and holder frames); null before the first hello. */
  get role (): Role | null { return this.#role }
  /** The client id holding the session, or null. */
  get holder (): string | null { return this.#holder }
  /** This client's id on its current (or last) connection. */
  get clientId (): string | null { return this.#clientId }
  get status (): string | null { return this.#status }
  get turnState (): TurnState | null { return this.#turn }
  get store (): 'ok' | 'degraded' { return this.#store }
  /** The highest seq delivered to 'frame' listeners. */
  get lastSeq (): number { return this.#lastSeq }
  /** Open can_use_tool prompts by request id. */
  get pending (): ReadonlyMap<string, PermissionRequest> { return this.#pending }

  /** Adds a listener; returns the function that removes it. */
  on<K extends keyof ConnectionEvents> (event: K, listener: (payload: ConnectionEvents[K]) => void): () => void {
    return this.#events.on(event, listener)
  }

  /**
   * Sends a user message (a new turn, or queued by the CLI behind the running
   * one). Returns its uuid: generated unless given. While no connection is
   * open the message queues and goes out after the next hello; one that may
   * have been lost with a connection is sent again after the replay, and the
   * gateway forwards each uuid once.
   */
  send (content: string | ContentBlock[], options: { uuid?: string } = {}): string {
    if (this.#state === 'closed') throw new ConnectionError('closed', 'The connection is closed')
    const id = options.uuid ?? uuid()
    this.#outbox.user(id, JSON.stringify({ type: 'user', message: { role: 'user', content }, parent_tool_use_id: null, uuid: id }))
    return id
  }

  /** Interrupts the running turn; resolves on the CLI's control_response. */
  async interrupt (): Promise<void> {
    await this.request('interrupt')
  }

  async setModel (model: string): Promise<void> {
    await this.request('set_model', { model })
  }

  async setPermissionMode (mode: string): Promise<void> {
    await this.request('set_permission_mode', { mode })
  }

  /**
   * Any control request the gateway forwards (CLIENT_CONTROL_ALLOW): resolves
   * with the CLI's response payload, rejects with a ControlRequestError.
   */
  request (subtype: string, fields: Record<string, unknown> = {}): Promise<Record<string, unknown> | undefined> {
    if (this.#state === 'closed') return Promise.reject(new ControlRequestError('', 'connection_closed', 'The connection is closed'))
    const requestId = uuid()
    return this.#outbox.call(requestId, JSON.stringify({ type: 'control_request', request_id: requestId, request: { ...fields, subtype } }))
  }

  allow (requestId: string, options: { updatedInput?: Record<string, unknown>, updatedPermissions?: unknown[] } = {}): void {
    this.#answer(requestId, allowDecision(options.updatedInput, options.updatedPermissions))
  }

  deny (requestId: string, message: string, options: { interrupt?: boolean } = {}): void {
    this.#answer(requestId, denyDecision(message, options.interrupt))
  }

  /** Allows and grants the request's permission_suggestions (unknown to an observer: then a plain allow). */
  alwaysAllow (requestId: string): void {
    const request = this.#pending.get(requestId)
    this.#answer(requestId, request === undefined ? allowDecision() : alwaysAllowDecision(request))
  }

  /** Attaches again as controller, which makes this client the holder (the newest controller wins). */
  takeOver (): void {
    this.#wantRole = 'controller'
    if (this.#state === 'closed') return
    this.#setState(this.#attached ? 'reconnecting' : 'connecting')
    this.#link.restart()
  }

  /** Ends the connection for good: no reconnect; pending control requests reject with `connection_closed`. */
  close (): void {
    if (this.#state === 'closed') return
    this.#clearRefresh()
    this.#link.close()
    this.#outbox.rejectAll((id) => new ControlRequestError(id, 'connection_closed', 'The connection was closed'))
    this.#setState('closed')
  }

  #fail (err: Error): void {
    this.#emit('error', err)
    this.close()
  }

  // ---- receiving ----

  #onMessage (data: unknown): void {
    if (typeof data !== 'string') return
    let frame: unknown
    try {
      frame = JSON.parse(data)
    } catch {
      return
    }
    if (typeof frame !== 'object' || frame === null || Array.isArray(frame)) return
    const f = frame as Frame
    if (typeof f.seq === 'number') this.#onRecorded(f as Frame & { seq: number })
    else this.#onLive(f)
  }

  #onRecorded (frame: Frame & { seq: number }): void {
    if (frame.seq <= this.#lastSeq) {
      // A prompt handed out again (a new holder, a reconnect): same seq, not a new frame.
      if (frame.type === 'control_request') this.#onRedelivered(frame)
      return
    }
    if (frame.seq > this.#lastSeq + 1 && this.#attached) this.#noteGap(this.#lastSeq + 1, frame.seq - 1)
    this.#lastSeq = frame.seq
    const after = this.#apply(frame)
    this.#emit('frame', frame as unknown as RecordedFrame)
    for (const fn of after) fn()
    if (this.#catchUpAt !== null && this.#lastSeq >= this.#catchUpAt) this.#caughtUp()
  }

  /** Updates what the frame changes; returns the events to emit once the frame itself was delivered. */
  #apply (frame: Frame & { seq: number }): Array<() => void> {
    if (frame.type === 'system' && frame.subtype === 'session_state_changed' && typeof frame.state === 'string') {
      const turn = frame.state as TurnState
      this.#turn = turn
      return [() => this.#emit('turn', turn)]
    }
    if (frame.type === 'control_request') {
      const request = permissionFromControlRequest(frame, true)
      if (request === null) return []
      this.#pending.set(request.requestId, request)
      // Replayed, and not pending at the hello: answered already (its permission_resolved follows), nothing to ask.
      const answered = this.#catchUpAt !== null && frame.seq <= this.#catchUpAt && !this.#helloPending.has(request.requestId)
      return answered ? [() => this.#emit('permission', request)] : [() => this.#emit('permission', request), () => this.#ask(request)]
    }
    if (frame.type === 'control_response' && typeof frame.response === 'object' && frame.response !== null) {
      this.#outbox.settle(frame.response)
      return []
    }
    if (frame.type !== 'gateway') return []
    const requestId = typeof frame.request_id === 'string' ? frame.request_id : ''
    switch (frame.subtype) {
      case 'status': {
        const status = String(frame.status)
        this.#status = status
        return [() => this.#emit('status', status)]
      }
      case 'request_pending': {
        const request = permissionFromPending(frame as never)
        if (request === null || this.#pending.has(requestId)) return []
        this.#pending.set(requestId, request)
        return [() => this.#emit('permission', request)]
      }
      case 'permission_resolved':
        return [this.#resolve(requestId, String(frame.decision), typeof frame.by === 'string' ? frame.by : null)]
      case 'request_resolved':
        this.#outbox.resolved(requestId)
        return []
      case 'user_message':
        if (typeof frame.uuid === 'string') this.#outbox.confirmUser(frame.uuid)
        return []
      case 'cli_problem':
        return [() => this.#emit('problem', frame as never)]
      default:
        return []
    }
  }

  #resolve (requestId: string, decision: string, by: string | null): () => void {
    this.#pending.delete(requestId)
    this.#asked.delete(requestId)
    this.#outbox.resolved(requestId)
    return () => this.#emit('permissionResolved', { requestId, decision, by })
  }

  #onRedelivered (frame: Frame & { seq: number }): void {
    this.#emit('message', frame as unknown as LiveFrame)
    const request = permissionFromControlRequest(frame, true)
    if (request === null || this.#outbox.resendAnswer(request.requestId)) return
    const known = this.#pending.get(request.requestId)
    this.#pending.set(request.requestId, request)
    if (known === undefined || !known.canAnswer) this.#emit('permission', request)
    this.#ask(request)
  }

  #onLive (frame: Frame): void {
    if (frame.type === 'control_response' && typeof frame.response === 'object' && frame.response !== null) {
      this.#outbox.settle(frame.response)
    } else if (frame.type === 'gateway') {
      switch (frame.subtype) {
        case 'hello':
          this.#onHello(frame as unknown as HelloFrame)
          return
        case 'holder':
          this.#setRole(frame.role === 'controller' ? 'controller' : 'observer', typeof frame.holder === 'string' ? frame.holder : null)
          break
        case 'store':
          this.#setStore(frame.state === 'degraded' ? 'degraded' : 'ok')
          break
        case 'gap':
          if (typeof frame.missing_from === 'number' && typeof frame.missing_to === 'number') this.#noteGap(frame.missing_from, frame.missing_to)
          break
        case 'credential':
          this.#refreshBefore(typeof frame.expires_at === 'string' ? Date.parse(frame.expires_at) : Number.NaN)
          break
        case 'error': {
          this.#emit('message', frame as unknown as LiveFrame)
          const requestId = frame.request_id
          const expected = typeof requestId === 'string' && this.#outbox.wasResent(requestId) && (frame.code === 'already_resolved' || frame.code === 'unknown_request')
          if (!expected) this.#emit('error', frame as unknown as GatewayErrorFrame)
          return
        }
      }
    }
    this.#emit('message', frame as unknown as LiveFrame)
  }

  /**
   * The gateway ends this connection at `expiresAt` unless it gets a newer
   * credential: asked of the client a fifth of the time left before it (at
   * most a minute), then presented. Nothing is armed without a deadline.
   */
  #refreshBefore (expiresAt: number): void {
    this.#clearRefresh()
    if (!Number.isFinite(expiresAt)) return
    const delay = refreshDelay(expiresAt, Date.now())
    this.#refreshTimer = setTimeout(() => {
      this.#refreshTimer = null
      // A deadline beyond one timer's reach (MAX_TIMER_MS): wait again rather than renew weeks early.
      if (delay === MAX_TIMER_MS) { this.#refreshBefore(expiresAt); return }
      this.#deps.client.refreshedToken().then((token) => {
        if (token !== null && this.#state !== 'closed') this.#link.send(JSON.stringify({ type: 'credential', token }))
      }, (err: unknown) => {
        this.#emit('error', err instanceof Error ? err : new Error(String(err)))
      })
    }, delay)
  }

  #clearRefresh (): void {
    if (this.#refreshTimer !== null) clearTimeout(this.#refreshTimer)
    this.#refreshTimer = null
  }

  #onHello (hello: HelloFrame): void {
    this.#clientId = hello.client_id
    this.#announced = hello.missing ?? (typeof hello.missing_from === 'number' && typeof hello.missing_to === 'number' ? [[hello.missing_from, hello.missing_to]] : [])
    if (hello.resume === 'unavailable') {
      // The gateway closes with 1013 next: retry with the same after once retry_after_ms has passed.
      this.#link.retryAfter(hello.retry_after_ms ?? null)
      this.#emit('message', hello)
      return
    }
    if (hello.resume === 'none') this.#lastSeq = Math.max(this.#lastSeq, hello.last_seq)
    this.#attached = true
    this.#link.attached()
    this.#catchUpAt = hello.last_seq
    this.#helloPending = new Set(hello.pending_requests)
    this.#setRole(hello.role, hello.holder)
    if (hello.status !== this.#status) {
      this.#status = hello.status
      this.#emit('status', hello.status)
    }
    this.#setStore(hello.store)
    this.#emit('message', hello)
    if (hello.resume === 'gap' && this.#announced.length > 0) this.#emit('gap', { missing: this.#announced.map(([a, b]): [number, number] => [a, b]) })
    this.#outbox.attach(++this.#attaches, (text) => this.#link.send(text))
    this.#setState('open')
    if (this.#lastSeq >= this.#catchUpAt) this.#caughtUp()
  }

  /** The replay reached the hello's last_seq: resend what may have been lost, forget prompts that ended unseen. */
  #caughtUp (): void {
    const upTo = this.#catchUpAt ?? 0
    this.#catchUpAt = null
    this.#outbox.resendUnconfirmed()
    for (const request of [...this.#pending.values()]) {
      // Open before the hello but not pending at it: it ended in seqs history no longer has.
      if (request.seq <= upTo && !this.#helloPending.has(request.requestId)) this.#resolve(request.requestId, 'unknown', null)()
    }
  }

  #noteGap (from: number, to: number): void {
    if (this.#announced.some(([a, b]) => a <= from && to <= b)) return
    this.#announced.push([from, to])
    this.#emit('gap', { missing: [[from, to]] })
  }

  #setRole (role: Role, holder: string | null): void {
    const changed = role !== this.#role || holder !== this.#holder
    this.#role = role
    this.#holder = holder
    if (role !== 'controller') {
      for (const [id, request] of this.#pending) if (request.canAnswer) this.#pending.set(id, { ...request, canAnswer: false })
    }
    if (changed) this.#emit('role', { role, holder })
  }

  #setStore (store: 'ok' | 'degraded'): void {
    if (store === this.#store) return
    this.#store = store
    this.#emit('store', store)
  }

  #setState (state: ConnectionState): void {
    if (state === this.#state) return
    this.#state = state
    this.#emit('state', state)
  }

  // ---- permissions ----

  #ask (request: PermissionRequest): void {
    const handler = this.#options.onPermission
    if (handler === undefined || !request.canAnswer || this.#asked.has(request.requestId)) return
    this.#asked.add(request.requestId)
    let result: ReturnType<typeof handler>
    try {
      result = handler(request)
    } catch (err) {
      this.#emit('error', toError(err))
      return
    }
    Promise.resolve(result).then((decision) => {
      if (decision !== undefined && this.#pending.has(request.requestId)) this.#answer(request.requestId, decision)
    }, (err: unknown) => this.#emit('error', toError(err)))
  }

  /**
   * The holder answers on the WebSocket (queued while reconnecting); a client
   * that does not hold the session answers over HTTP, which needs no hold.
   */
  #answer (requestId: string, decision: PermissionDecision): void {
    if (this.#state === 'closed') return
    const request = this.#pending.get(requestId)
    if (decision.behavior === 'allow' && decision.updatedInput === undefined && request?.canAnswer === true) {
      decision = { ...decision, updatedInput: request.input }
    }
    if (this.#role === 'observer') {
      this.#deps.client.answerPermission(this.sessionId, requestId, decision).catch((err: unknown) => this.#emit('error', toError(err)))
      return
    }
    this.#outbox.answer(requestId, JSON.stringify(permissionAnswerFrame(requestId, decision)))
  }

  #emit<K extends keyof ConnectionEvents> (event: K, payload: ConnectionEvents[K]): void {
    this.#events.emit(event, payload, (err, from) => {
      if (from === 'error') queueMicrotask(() => { throw err })
      else this.#emit('error', toError(err))
    })
  }
}

function toError (err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err))
}
