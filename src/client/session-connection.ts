/**
 * One client's attachment to one session over WebSocket, kept alive across
 * drops: it reconnects with backoff, resumes with `after=<last seq>` and
 * delivers every recorded frame exactly once, in seq order (frames at or
 * below the last seq delivered are dropped, so a replay overlapping what was
 * seen cannot duplicate). It tracks the session's role/holder, status, turn
 * and open prompts from the frames, and sends user messages, control
 * requests and permission answers so that a drop loses none of them
 * (outbox.ts). The socket itself, its auth, watchdog, close codes and
 * backoff: socket-link.ts; the prompts' bookkeeping and answers:
 * permission-desk.ts; when to renew the credential: credential-refresh.ts.
 */
import { backoffSettings } from './backoff.js'
import type {
  AnswerOutcome, ConnectOptions, ConnectionEvents, ConnectionState, PermissionRequest, TurnState
} from './connection-types.js'
import { Emitter } from './emitter.js'
import { CredentialRefresh } from './credential-refresh.js'
import { ConnectionError, ControlRequestError } from './errors.js'
import type { ContentBlock, GatewayErrorFrame, HelloFrame, LiveFrame, RecordedFrame, Role } from './frames.js'
import type { GatewayClient } from './gateway-client.js'
import { Outbox } from './outbox.js'
import { PermissionDesk } from './permission-desk.js'
import { allowDecision, denyDecision } from './permissions.js'
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
  readonly #deps: ConnectionDeps
  readonly #events = new Emitter<ConnectionEvents>()
  readonly #outbox = new Outbox()
  readonly #desk: PermissionDesk
  #wantRole: Role
  /** takeOver() asked for the session: the attaches until the next hello take it, whatever the role was. */
  #takingOver = false
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
  /**
   * The gateway ends this connection at the deadline of its `credential`
   * frame unless it gets a newer credential: asked of the client a fifth of
   * the time left before it (at most a minute), then presented.
   */
  readonly #refresh = new CredentialRefresh(() => this.#renewCredential())

  constructor (sessionId: string, options: ConnectOptions, deps: ConnectionDeps) {
    this.sessionId = sessionId
    this.#deps = deps
    this.#wantRole = options.role ?? 'controller'
    this.#desk = new PermissionDesk({
      sessionId,
      client: deps.client,
      outbox: this.#outbox,
      onPermission: options.onPermission,
      // Before the first hello, the role asked for: an observer's early answer must go over HTTP (on the socket it is not_holder).
      role: () => this.#role ?? this.#wantRole,
      closed: () => this.#state === 'closed',
      emit: (event, payload) => this.#emit(event, payload)
    })
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
        if (this.#rejoins()) query.set('rejoin', 'true')
        if (this.#attached || options.after !== 'live') query.set('after', String(this.#lastSeq))
        return query
      },
      message: (data) => this.#onMessage(data),
      down: () => this.#outbox.detach(),
      retrying: () => this.#setState(this.#attached ? 'reconnecting' : 'connecting'),
      fail: (err) => this.#fail(err),
      warn: (err) => {
        // Not resent: the next connection would be closed the same way.
        if (err instanceof ConnectionError && err.code === 'frame_too_large') this.#desk.dropped(this.#outbox.tooLarge())
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
  get pending (): ReadonlyMap<string, PermissionRequest> { return this.#desk.pending }

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

  /**
   * Answers a prompt: as holder on the WebSocket (kept until the prompt is
   * resolved or the answer refused, resent if it is handed out again), else over HTTP. The promise never rejects: it says
   * whether this answer was taken, lost to another (`already_resolved`) or
   * was refused.
   */
  allow (requestId: string, options: { updatedInput?: Record<string, unknown>, updatedPermissions?: unknown[] } = {}): Promise<AnswerOutcome> {
    return this.#desk.answer(requestId, allowDecision(options.updatedInput, options.updatedPermissions))
  }

  /** Denies a prompt; settles like allow. */
  deny (requestId: string, message: string, options: { interrupt?: boolean } = {}): Promise<AnswerOutcome> {
    return this.#desk.answer(requestId, denyDecision(message, options.interrupt))
  }

  /** Allows and grants the request's permission_suggestions (unknown to an observer: then a plain allow). */
  alwaysAllow (requestId: string): Promise<AnswerOutcome> {
    return this.#desk.answer(requestId, this.#desk.alwaysAllowDecision(requestId))
  }

  /** Attaches again as controller, which makes this client the holder (the newest controller wins). */
  takeOver (): void {
    this.#wantRole = 'controller'
    if (this.#state === 'closed') return
    this.#takingOver = true
    this.#setState(this.#attached ? 'reconnecting' : 'connecting')
    this.#link.restart()
  }

  /** Ends the connection for good: no reconnect; pending control requests reject with `connection_closed`. */
  close (): void {
    if (this.#state === 'closed') return
    this.#refresh.clear()
    this.#link.close()
    this.#outbox.rejectAll((id) => new ControlRequestError(id, 'connection_closed', 'The connection was closed'))
    this.#desk.close()
    this.#setState('closed')
  }

  /**
   * A reconnect of a controller that did not hold the session when its link
   * dropped (displaced by a newer controller, or not yet told it holds): it
   * must not take the session back from the newer one, only wait as the next
   * in line (`rejoin`, PROTOCOL.md). No frame arrives between the drop and
   * the next attach, so the role now is the role then.
   */
  #rejoins (): boolean {
    return this.#attached && !this.#takingOver && this.#wantRole === 'controller' && this.#role !== 'controller'
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
      if (frame.type === 'control_request') {
        this.#emit('message', frame as unknown as LiveFrame)
        this.#desk.redelivered(frame)
      }
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
    if (frame.type === 'control_request') return this.#desk.opened(frame, this.#catchUpAt)
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
      case 'request_pending':
        return this.#desk.noticed(frame)
      case 'permission_resolved':
        return [this.#desk.resolve(requestId, String(frame.decision), typeof frame.by === 'string' ? frame.by : null)]
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
          this.#refresh.before(typeof frame.expires_at === 'string' ? Date.parse(frame.expires_at) : Number.NaN)
          break
        case 'error': {
          this.#emit('message', frame as unknown as LiveFrame)
          const requestId = frame.request_id
          if (typeof requestId !== 'string' || !this.#desk.refused(requestId, String(frame.code))) this.#emit('error', frame as unknown as GatewayErrorFrame)
          return
        }
      }
    }
    this.#emit('message', frame as unknown as LiveFrame)
  }

  /** The credential deadline is near: ask for a newer credential and present it on the socket. */
  #renewCredential (): void {
    this.#deps.client.refreshedToken().then((token) => {
      if (token !== null && this.#state !== 'closed') this.#link.send(JSON.stringify({ type: 'credential', token }))
    }, (err: unknown) => {
      this.#emit('error', err instanceof Error ? err : new Error(String(err)))
    })
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
    this.#takingOver = false
    this.#link.attached()
    this.#catchUpAt = hello.last_seq
    this.#desk.hello(hello.client_id, hello.pending_requests)
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
    this.#desk.caughtUp(upTo)
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
    if (role !== 'controller') this.#desk.notHolder()
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
