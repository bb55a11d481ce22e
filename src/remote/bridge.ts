/**
 * claude-remote's core: a CLI host on one side (stdin/stdout NDJSON, exactly
 * the CLI's stream-json protocol) and a gateway session on the other (a
 * controller WebSocket). It keeps what makes the two differ out of the
 * host's sight: gateway frames and `seq` are removed, a dropped connection
 * is resumed by seq (nothing lost, nothing twice), and stdin EOF or a
 * signal ends the session the way the CLI would end itself.
 */
import { randomUUID } from 'node:crypto'
import WebSocket from 'ws'
import type { RemoteArgs } from './argv.js'
import { GatewayHttpError, type GatewayApi } from './gateway-api.js'
import { closeCodes } from '../errors.js'
import { isRecord } from '../protocol/is-record.js'
import { CredentialRenewal } from './credential-renewal.js'
import { isDuplicateRefusal, rawText, requestIdOf, withoutSeq } from './frames.js'
import { InFlight } from './in-flight.js'
import { ResumeMismatch, checkResumeOptions } from './resume-options.js'
import type { RemoteEnv } from './remote-env.js'

export interface BridgeIo {
  /** One NDJSON line to the host (no newline). */
  writeOut: (line: string) => void
  /** One diagnostic line (no newline). */
  warn: (message: string) => void
  debug: (message: string) => void
}

/** Answer the CLI gives a prompt the host can no longer answer (stdin closed), as in its transcripts. */
const STREAM_CLOSED = 'Tool permission stream closed before response received'
const NO_PROMPT_TOOL = 'Permission prompts are off: claude-remote was started without --permission-prompt-tool stdio'
/** Codes of gateway errors that answer a user line (no request_id): that line starts no turn. */
const USER_REFUSALS = new Set(['not_holder', 'session_not_running', 'too_many_sessions', 'tenant_session_limit', 'shutting_down', 'cli_start_failed', 'invalid_frame', 'invalid_json'])
const BACKOFF_MIN_MS = 100
const BACKOFF_MAX_MS = 5_000
/** Without a hello for this long, the gateway is considered gone. */
const GIVE_UP_MS = 120_000
/** After DELETE: how long to wait for the CLI's last lines and the session's final status. */
const END_WAIT_MS = 15_000
/** After SIGTERM: how long the DELETE may take (the SDK sends SIGKILL not long after). */
const SIGTERM_STOP_MS = 3_000
/**
 * A connection nothing arrives on is pinged after `pingAfterMs` and given up
 * after `deadAfterMs` (the typed client's 45 s, three gateway keep_alive
 * ticks): a gateway host gone without a FIN (powered off, a NAT that forgot
 * the flow) never closes the socket, and the host would wait for ever.
 */
export const SILENCE_DEFAULTS = { pingAfterMs: 15_000, deadAfterMs: 45_000 }
/** Payload of the liveness pings (not a number: InFlight reads numeric pongs). */
const ALIVE_PING = 'alive'

/** A line for the gateway, with what it takes to send it again if the connection dies with it. */
interface Outgoing {
  line: string
  requestId?: string | undefined
  uuid?: string | undefined
}

export class RemoteBridge {
  readonly #api: GatewayApi
  readonly #env: RemoteEnv
  readonly #args: RemoteArgs
  readonly #io: BridgeIo
  readonly #silence: typeof SILENCE_DEFAULTS
  #lastHeard = 0
  #sessionId = ''
  #ws: WebSocket | null = null
  #live = false
  /** Highest seq given to the host; -1 until the first hello of an attach without replay. */
  #seenSeq = -1
  readonly #queue: Outgoing[] = []
  /** Control requests and uuid'd user lines a dropped connection may have lost. */
  readonly #inFlight = new InFlight()
  /** After a reconnect: lost lines are sent again once the replay reaches this seq (null: nothing to wait for). */
  #resendAt: number | null = null
  /** The host's own control requests, waiting for the CLI's response. */
  readonly #hostRequests = new Set<string>()
  /** Requests claude-remote itself sent (initialize, max thinking tokens, interrupt): their answers are not the host's. */
  readonly #ownRequests = new Map<string, string>()
  /** CLI control requests given to the host and not answered yet. */
  readonly #prompts = new Map<string, string>()
  /** CLI control requests given to the host (a redelivery after a reconnect is not given twice). */
  readonly #delivered = new Set<string>()
  /** The host's answers, kept until the gateway says the request ended: resent if the connection dropped with them. */
  readonly #answers = new Map<string, string>()
  #helloPending = new Set<string>()
  #turns = 0
  #lastResultError = false
  #initDone = false
  #backoff = BACKOFF_MIN_MS
  #downSince = 0
  #stdinClosed = false
  #ending = false
  #closed = false
  #silent = false
  #forcedCode: number | null = null
  #endTarget: number | null = null
  /** The end's DELETE, settled either way. */
  #stopping: Promise<void> = Promise.resolve()
  #caughtUp: (() => void) | null = null
  readonly #renewal: CredentialRenewal
  #exit!: (code: number) => void
  readonly #done: Promise<number>

  constructor (deps: { api: GatewayApi, env: RemoteEnv, args: RemoteArgs, io: BridgeIo, silence?: typeof SILENCE_DEFAULTS }) {
    this.#api = deps.api
    this.#env = deps.env
    this.#args = deps.args
    this.#io = deps.io
    this.#silence = deps.silence ?? SILENCE_DEFAULTS
    this.#done = new Promise((resolve) => { this.#exit = resolve })
    this.#renewal = new CredentialRenewal({
      token: this.#env.token,
      present: (frame) => {
        const ws = this.#ws
        if (!this.#live || ws === null || ws.readyState !== WebSocket.OPEN) return false
        ws.send(frame)
        return true
      },
      warn: deps.io.warn,
      debug: deps.io.debug
    })
  }

  /** Creates or finds the session and attaches; resolves with the exit code. */
  async run (): Promise<number> {
    try {
      if (this.#args.resume === null) {
        const created = await this.#api.createSession(this.#args.options)
        this.#sessionId = String(created.id)
        // A new session: every frame from the first, so nothing printed before the attach is missed.
        this.#seenSeq = 0
      } else {
        const existing = await this.#api.getSession(this.#args.resume)
        checkResumeOptions(existing, this.#args.options)
        this.#sessionId = String(existing.id)
      }
    } catch (err) {
      if (err instanceof ResumeMismatch) { this.#io.warn(err.message); return 2 }
      this.#io.warn(err instanceof GatewayHttpError ? err.message : `could not reach the gateway: ${String(err)}`)
      return err instanceof GatewayHttpError && err.status === 400 ? 2 : 1
    }
    this.#io.debug(`session ${this.#sessionId}`)
    this.#downSince = Date.now()
    this.#connect()
    return this.#done
  }

  // ---- host → gateway ----

  /** One line the host wrote on stdin. */
  hostLine (raw: string): void {
    if (this.#ending || this.#stdinClosed) return
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw
    if (line.trim() === '') return
    let frame: unknown
    try {
      frame = JSON.parse(line)
    } catch {
      // The CLI dies on a line it cannot parse (exit 1): so does the session here.
      this.#io.warn('a stdin line is not JSON: ending the session (as the CLI would)')
      void this.#end(1)
      return
    }
    if (!isRecord(frame)) { this.#send(line); return }
    let requestId: string | undefined
    let uuid: string | undefined
    if (frame.type === 'control_request') {
      const id = requestIdOf(frame)
      if (id !== null) this.#hostRequests.add(id)
      requestId = id ?? undefined
      const request = isRecord(frame.request) ? frame.request : {}
      if (request.subtype === 'initialize' && !this.#initDone) {
        this.#initDone = true
        this.#send(this.#withInitFields(line, frame, request), { requestId })
        this.#afterInit()
        return
      }
    } else if (frame.type === 'control_response') {
      const id = requestIdOf(frame)
      if (id !== null) {
        this.#prompts.delete(id)
        this.#answers.set(id, line)
      }
    } else if (frame.type === 'user') {
      this.#turns++
      // Only a uuid makes a second copy harmless (the gateway drops a repeated one).
      if (typeof frame.uuid === 'string' && frame.uuid !== '') uuid = frame.uuid
    }
    if (!this.#initDone && frame.type !== 'keep_alive') this.#ownInit()
    this.#send(line, { requestId, uuid })
  }

  /** stdin ended: the running turn finishes, waiting prompts are denied, then the session ends. */
  hostEnd (): void {
    if (this.#stdinClosed) return
    this.#stdinClosed = true
    for (const [id, subtype] of this.#prompts) this.#refusePrompt(id, subtype)
    this.#prompts.clear()
    this.#maybeEnd()
  }

  /** SIGINT: the CLI interrupts the running turn, finishes it, and exits 0. */
  interrupt (): void {
    if (this.#turns > 0) this.#sendOwn('interrupt', { subtype: 'interrupt' })
    this.#forcedCode = 0
    this.hostEnd()
  }

  /** SIGTERM (or the host went away): stop the session, print nothing more. */
  async terminate (code: number): Promise<void> {
    this.#silent = true
    this.#forcedCode = code
    if (this.#ending) {
      // Already ending (stdin EOF): the signal still ends it now, with its code, once the DELETE went out.
      await Promise.race([this.#stopping, new Promise<void>((resolve) => setTimeout(resolve, SIGTERM_STOP_MS).unref())])
      this.#finish(code)
      return
    }
    await this.#end(code)
  }

  #withInitFields (line: string, frame: Record<string, unknown>, request: Record<string, unknown>): string {
    const missing = Object.entries(this.#args.initFields).filter(([k]) => request[k] === undefined || request[k] === null)
    if (missing.length === 0) return line
    return JSON.stringify({ ...frame, request: { ...request, ...Object.fromEntries(missing) } })
  }

  /** The host sent no initialize first, but a flag needs one (`--system-prompt`, `--json-schema`). */
  #ownInit (): void {
    this.#initDone = true
    if (Object.keys(this.#args.initFields).length > 0) this.#sendOwn('initialize', { subtype: 'initialize', ...this.#args.initFields })
    this.#afterInit()
  }

  #afterInit (): void {
    if (this.#args.maxThinkingTokens !== null) {
      this.#sendOwn('--max-thinking-tokens', { subtype: 'set_max_thinking_tokens', max_thinking_tokens: this.#args.maxThinkingTokens })
    }
  }

  #sendOwn (what: string, request: Record<string, unknown>): void {
    const id = `claude-remote-${randomUUID()}`
    this.#ownRequests.set(id, what)
    this.#send(JSON.stringify({ type: 'control_request', request_id: id, request }), { requestId: id })
  }

  #refusePrompt (id: string, subtype: string): void {
    this.#answerFor(id, JSON.stringify({ type: 'control_response', response: { subtype: 'error', request_id: id, error: subtype === 'can_use_tool' ? STREAM_CLOSED : 'stream closed' } }))
  }

  /** An answer claude-remote gives for the host: kept like the host's own, so a connection lost with it does not leave the prompt (and the turn) waiting for ever. */
  #answerFor (id: string, line: string): void {
    this.#answers.set(id, line)
    this.#send(line)
  }

  #send (line: string, track: Omit<Outgoing, 'line'> = {}): void {
    const out = { line, ...track }
    if (this.#live && this.#ws?.readyState === WebSocket.OPEN) this.#transmit(this.#ws, out)
    else this.#queue.push(out)
  }

  #transmit (ws: WebSocket, out: Outgoing): void {
    ws.send(out.line)
    if (out.requestId !== undefined) this.#inFlight.requestSent(out.requestId, out.line)
    // The pong to this ping says the gateway has read the line: it need not be sent again.
    else if (out.uuid !== undefined) ws.ping(this.#inFlight.userSent(out.uuid, out.line))
  }

  // ---- gateway → host ----

  #connect (): void {
    if (this.#closed) return
    const after = this.#seenSeq >= 0 ? `&after=${this.#seenSeq}` : ''
    const url = `${this.#env.wsUrl}/v1/sessions/${encodeURIComponent(this.#sessionId)}/ws?role=controller${after}`
    this.#io.debug(`connecting ${url}`)
    const ws = new WebSocket(url, ['claude-gateway.v1'], {
      headers: { authorization: `Bearer ${this.#renewal.opening()}` },
      // CLI lines are unbounded (a Write of a large file): the gateway bounds them, not this client.
      maxPayload: 1024 * 1024 * 1024,
      handshakeTimeout: this.#silence.deadAfterMs
    })
    this.#ws = ws
    this.#lastHeard = Date.now()
    this.#watch(ws)
    ws.on('unexpected-response', (_req, res) => {
      const status = res.statusCode ?? 0
      res.resume()
      if (status === 401 && this.#renewal.replaced()) {
        this.#io.debug(`upgrade refused (HTTP 401); ${this.#env.token.source} holds a newer token: reconnecting with it`)
        ws.terminate()
        return
      }
      if (status === 401 || status === 403 || status === 404) {
        this.#io.warn(`the gateway refused the connection to session ${this.#sessionId}: HTTP ${status}`)
        this.#closed = true
        this.#exit(1)
        return
      }
      this.#io.debug(`upgrade refused: HTTP ${status}`)
      ws.terminate()
    })
    ws.on('message', (data: WebSocket.RawData) => {
      if (this.#ws !== ws) return
      this.#lastHeard = Date.now()
      this.#gatewayFrame(rawText(data))
    })
    ws.on('ping', () => { if (this.#ws === ws) this.#lastHeard = Date.now() })
    ws.on('pong', (data: Buffer) => {
      if (this.#ws !== ws) return
      this.#lastHeard = Date.now()
      this.#inFlight.pong(data.toString('utf8'))
    })
    ws.on('error', (err) => this.#io.debug(`websocket error: ${err.message}`))
    ws.on('close', (code, reason) => {
      if (this.#ws !== ws) return
      this.#ws = null
      if (this.#live) this.#downSince = Date.now()
      this.#live = false
      this.#io.debug(`connection closed (${code})`)
      if (code === closeCodes.credentialRevoked) {
        const why = reason.toString('utf8')
        if (this.#renewal.replaced()) {
          this.#io.debug(`${this.#env.token.source} holds a newer token: reconnecting with it`)
        } else {
          // Reconnecting with the same token would be refused: say why now rather than after a 401.
          const renew = this.#env.token.file === null ? 'set a valid one' : 'renew the file'
          this.#io.warn(`the gateway no longer accepts ${this.#env.token.source} (close ${code})${why === '' ? '' : `: ${why}`}; ${renew} and run again`)
          this.#closed = true
          this.#renewal.stop()
          this.#exit(1)
          return
        }
      }
      this.#reconnectLater()
    })
  }

  /** Pings a silent connection, and cuts it (a reconnect follows) once it stayed silent too long. */
  #watch (ws: WebSocket): void {
    const timer = setTimeout(() => {
      if (this.#ws !== ws) return
      const silent = Date.now() - this.#lastHeard
      if (silent >= this.#silence.deadAfterMs) {
        this.#io.debug(`nothing from the gateway for ${silent} ms: dropping the connection`)
        ws.terminate()
        return
      }
      if (silent >= this.#silence.pingAfterMs && ws.readyState === WebSocket.OPEN) ws.ping(ALIVE_PING)
      this.#watch(ws)
    }, Math.min(this.#silence.pingAfterMs, this.#silence.deadAfterMs))
    timer.unref()
  }

  #reconnectLater (): void {
    if (this.#closed) return
    if (Date.now() - this.#downSince > GIVE_UP_MS) {
      this.#io.warn(`lost the gateway for more than ${GIVE_UP_MS / 1000} s: giving up`)
      this.#closed = true
      this.#exit(1)
      return
    }
    const wait = this.#backoff
    this.#backoff = Math.min(BACKOFF_MAX_MS, this.#backoff * 2)
    setTimeout(() => this.#connect(), wait)
  }

  #gatewayFrame (text: string): void {
    this.#handleFrame(text)
    this.#checkCaughtUp()
    this.#checkResend()
  }

  /** Once the replay after a reconnect has caught up: what the old connection may have lost goes again. */
  #checkResend (force = false): void {
    if (this.#resendAt === null || (!force && this.#seenSeq < this.#resendAt)) return
    const ws = this.#ws
    if (!this.#live || ws === null || ws.readyState !== WebSocket.OPEN) return
    this.#resendAt = null
    for (const { line, requestId, uuid } of this.#inFlight.toResend()) {
      this.#io.debug(`sending again what the dropped connection may have lost: ${requestId ?? `user line ${String(uuid)}`}`)
      this.#transmit(ws, { line, requestId: requestId ?? undefined, uuid: uuid ?? undefined })
    }
  }

  #handleFrame (text: string): void {
    let frame: unknown
    try {
      frame = JSON.parse(text)
    } catch {
      this.#io.debug('a gateway frame is not JSON')
      return
    }
    if (!isRecord(frame)) return
    if (frame.type === 'gateway') { this.#gatewayOwn(frame); return }
    const seq = typeof frame.seq === 'number' ? frame.seq : null
    // The gateway's own keep_alives (bare) are for the socket; a CLI's (with its fields) is the host's.
    if (frame.type === 'keep_alive' && Object.keys(frame).length === 1) return
    const id = requestIdOf(frame)
    if (seq !== null) {
      const redelivered = frame.type === 'control_request' && id !== null && this.#helloPending.has(id)
      if (redelivered) {
        // Still counts for the catch-up: the replay may end with this prompt.
        if (seq > this.#seenSeq) this.#seenSeq = seq
        if (this.#delivered.has(id as string)) return
      } else {
        if (seq <= this.#seenSeq) return
        this.#seenSeq = seq
      }
    }
    switch (frame.type) {
      case 'control_response':
        if (id !== null) {
          // A request sent again that the gateway still had: the original's answer is on its way.
          if (this.#inFlight.isResent(id) && isDuplicateRefusal(frame)) return
          this.#inFlight.answered(id)
        }
        if (id !== null && this.#ownRequests.has(id)) { this.#ownAnswer(id, frame); return }
        // Only answers to this host's requests: the CLI prints no others (the gateway's, another client's).
        if (id === null || !this.#hostRequests.delete(id)) return
        break
      case 'control_request':
        if (id !== null) {
          this.#delivered.add(id)
          const request = isRecord(frame.request) ? frame.request : {}
          const subtype = String(request.subtype)
          if (!this.#args.promptTool && subtype === 'can_use_tool') {
            this.#answerFor(id, JSON.stringify({ type: 'control_response', response: { subtype: 'success', request_id: id, response: { behavior: 'deny', message: NO_PROMPT_TOOL } } }))
            return
          }
          // Nobody left to answer: denied, as the CLI denies prompts once its stdin is closed.
          if (this.#stdinClosed) { this.#refusePrompt(id, subtype); return }
          this.#prompts.set(id, subtype)
        }
        break
      case 'control_cancel_request':
        if (id !== null) this.#prompts.delete(id)
        break
      case 'result':
        this.#turns = Math.max(0, this.#turns - 1)
        this.#lastResultError = frame.is_error === true
        break
      case 'system':
        if (frame.subtype === 'session_state_changed' && frame.state === 'idle' && this.#stdinClosed) this.#turns = 0
        break
      case 'command_lifecycle':
        // A queued turn dropped (`interrupt` with `cancel_queued`): it prints no result.
        if (frame.state === 'cancelled') this.#turns = Math.max(0, this.#turns - 1)
        break
    }
    this.#out(withoutSeq(text, frame))
    if (frame.type === 'result' || frame.type === 'system' || frame.type === 'command_lifecycle') this.#maybeEnd()
  }

  #gatewayOwn (frame: Record<string, unknown>): void {
    switch (frame.subtype) {
      case 'hello': this.#hello(frame); return
      case 'status': this.#status(frame); return
      case 'permission_resolved':
      case 'request_resolved':
        if (typeof frame.request_id === 'string') {
          this.#answers.delete(frame.request_id)
          this.#prompts.delete(frame.request_id)
        }
        if (typeof frame.seq === 'number' && frame.seq > this.#seenSeq) this.#seenSeq = frame.seq
        return
      case 'error': this.#gatewayError(frame); return
      case 'credential': this.#renewal.deadline(frame.expires_at); return
      default:
        if (typeof frame.seq === 'number' && frame.seq > this.#seenSeq) this.#seenSeq = frame.seq
    }
  }

  #hello (frame: Record<string, unknown>): void {
    if (frame.resume === 'unavailable') {
      // The gateway's store could not serve the replay; it closes this connection (1013) and
      // nothing was skipped: come back later with the same ?after=.
      const hint = typeof frame.retry_after_ms === 'number' ? frame.retry_after_ms : 0
      this.#backoff = Math.max(this.#backoff, Math.min(BACKOFF_MAX_MS, hint))
      this.#io.debug(`the gateway cannot replay after seq ${this.#seenSeq} yet (event store unavailable); retrying`)
      return
    }
    if (frame.role !== 'controller') {
      this.#io.warn('the gateway attached claude-remote as an observer: its lines cannot reach the CLI')
    }
    if (frame.resume === 'gap') this.#io.warn(`seqs ${String(frame.missing_from)}–${String(frame.missing_to)} are no longer in the gateway's history: some output was lost`)
    // Attached without replay (--resume): history before this point is not the host's.
    if (this.#seenSeq < 0 && typeof frame.last_seq === 'number') this.#seenSeq = frame.last_seq
    this.#helloPending = new Set(Array.isArray(frame.pending_requests) ? frame.pending_requests.map(String) : [])
    this.#live = true
    this.#backoff = BACKOFF_MIN_MS
    const ws = this.#ws as WebSocket
    // Answers that may have been lost with the previous connection (a second one is refused, harmlessly).
    const queued = new Set(this.#queue.map((out) => out.line))
    for (const id of this.#helloPending) {
      const answer = this.#answers.get(id)
      if (answer !== undefined && !queued.has(answer)) ws.send(answer)
    }
    // What went out on earlier connections unconfirmed waits for the replay: an answer given meanwhile is in it.
    this.#inFlight.connected()
    const nothingReplayed = frame.resume === 'gap' && frame.oldest_seq === null
    this.#resendAt = typeof frame.last_seq === 'number' && !nothingReplayed ? frame.last_seq : -1
    for (const out of this.#queue.splice(0)) this.#transmit(ws, out)
    this.#io.debug(`attached (last_seq ${String(frame.last_seq)}, resume ${String(frame.resume)})`)
    this.#checkResend(this.#resendAt < 0)
  }

  #status (frame: Record<string, unknown>): void {
    if (typeof frame.seq === 'number' && frame.seq > this.#seenSeq) this.#seenSeq = frame.seq
    const status = frame.status
    if (status !== 'stopped' && status !== 'exited') return
    if (this.#ending) return
    const exit = isRecord(frame.exit) ? frame.exit : {}
    if (status === 'exited') {
      // The CLI ended on its own: so does its stand-in, with its code.
      const code = typeof exit.code === 'number' ? exit.code : 1
      this.#io.debug(`the CLI exited (${String(exit.code)}, ${String(exit.reason)})`)
      void this.#end(code, false)
      return
    }
    if (this.#turns > 0) {
      // Stopped mid-turn by someone else (DELETE, gateway shutdown): that turn will never end.
      this.#io.warn(`the gateway stopped the session's CLI during a turn (${String(exit.reason)})`)
      void this.#end(143, false)
    }
    // Stopped while idle: the next user line resumes it (--resume), as the gateway does.
  }

  #gatewayError (frame: Record<string, unknown>): void {
    const id = typeof frame.request_id === 'string' ? frame.request_id : null
    const code = String(frame.code)
    const message = typeof frame.message === 'string' ? frame.message : code
    if (code === 'credential_refused') this.#renewal.refused()
    // The replay stopped short (the store did not answer): it will not catch up, send what was lost now.
    if (code === 'store_unavailable') this.#checkResend(true)
    if (id !== null) this.#inFlight.answered(id)
    if (id !== null && this.#hostRequests.delete(id)) {
      // What an SDK waiting on that request understands.
      this.#out(JSON.stringify({ type: 'control_response', response: { subtype: 'error', request_id: id, error: message, error_code: code } }))
      return
    }
    if (id !== null && this.#answers.has(id) && (code === 'already_resolved' || code === 'unknown_request')) return
    if (id === null && USER_REFUSALS.has(code) && this.#turns > 0) this.#turns--
    this.#io.warn(`gateway: ${code}: ${message}${id === null ? '' : ` (request ${id})`}`)
    this.#maybeEnd()
  }

  #ownAnswer (id: string, frame: Record<string, unknown>): void {
    const what = this.#ownRequests.get(id) as string
    this.#ownRequests.delete(id)
    const response = isRecord(frame.response) ? frame.response : {}
    if (response.subtype === 'error') this.#io.warn(`${what}: the CLI refused it: ${String(response.error)}`)
  }

  #out (line: string): void {
    if (!this.#silent) this.#io.writeOut(line)
  }

  // ---- the end ----

  #maybeEnd (): void {
    if (this.#stdinClosed && !this.#ending && this.#turns <= 0) void this.#end(this.#forcedCode ?? (this.#lastResultError ? 1 : 0))
  }

  /** DELETE (stops the CLI), print its last lines until its final status, then exit with `code`. */
  async #end (code: number, stopCli = true): Promise<void> {
    if (this.#ending) return
    this.#ending = true
    if (stopCli && this.#sessionId !== '') {
      const caughtUp = new Promise<void>((resolve) => { this.#caughtUp = resolve })
      const bounded = new Promise<void>((resolve) => setTimeout(resolve, this.#silent ? 0 : END_WAIT_MS).unref())
      try {
        const deleting = this.#api.deleteSession(this.#sessionId, this.#silent ? SIGTERM_STOP_MS : END_WAIT_MS)
        this.#stopping = deleting.then(() => {}, () => {})
        const session = await deleting
        // Everything up to the session's last seq (its final status included) reaches the host first.
        this.#endTarget = typeof session.last_seq === 'number' ? session.last_seq : this.#seenSeq
        this.#checkCaughtUp()
      } catch (err) {
        this.#io.warn(`could not stop the session: ${err instanceof Error ? err.message : String(err)}`)
        this.#caughtUp?.()
      }
      await Promise.race([caughtUp, bounded])
    }
    this.#finish(code)
  }

  #finish (code: number): void {
    this.#closed = true
    this.#renewal.stop()
    const ws = this.#ws
    this.#ws = null
    ws?.close(1000)
    this.#exit(code)
  }

  #checkCaughtUp (): void {
    if (this.#endTarget !== null && this.#seenSeq >= this.#endTarget) this.#caughtUp?.()
  }
}
