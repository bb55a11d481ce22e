/**
 * claude-remote's core: a CLI host on one side (stdin/stdout NDJSON, exactly
 * the CLI's stream-json protocol) and a gateway session on the other (a
 * controller WebSocket). It keeps what makes the two differ out of the
 * host's sight: gateway frames and `seq` are removed, a dropped connection
 * is resumed by seq (nothing lost, nothing twice), and stdin EOF or a
 * signal ends the session the way the CLI would end itself. The connection
 * lives in gateway-link.ts, lines out in gateway-outbox.ts, stdin lines in
 * host-input.ts, the gateway's own frames in gateway-notices.ts, the
 * ending's DELETE in session-ending.ts, the bound on the host's requests
 * still waited for at stdin EOF in requests-before-end.ts, the CLI's prompts
 * and their answers in cli-prompts.ts, the session's create or look-up and
 * the credential its link opens with (renewed; a refusal final or not) in
 * session-attach.ts; this file is what the CLI's frames mean to the host.
 */
import type { RemoteArgs } from './argv.js'
import type { GatewayApi } from './gateway-api.js'
import { isRecord } from '../protocol/is-record.js'
import { CliPrompts } from './cli-prompts.js'
import { isDuplicateRefusal, requestIdOf, withoutSeq } from './frames.js'
import { GatewayLink } from './gateway-link.js'
import { GatewayOutbox } from './gateway-outbox.js'
import { GatewayNotices } from './gateway-notices.js'
import { refusalAnswer } from './host-answers.js'
import { HostInput } from './host-input.js'
import type { RemoteEnv } from './remote-env.js'
import { RequestsBeforeEnd } from './requests-before-end.js'
import { SessionAttach } from './session-attach.js'
import { SessionEnding } from './session-ending.js'
import { SILENCE_DEFAULTS } from './silence-watch.js'

export { SILENCE_DEFAULTS }

export interface BridgeIo {
  /** One NDJSON line to the host (no newline). */
  writeOut: (line: string) => void
  /** One diagnostic line (no newline). */
  warn: (message: string) => void
  debug: (message: string) => void
}

export class RemoteBridge {
  readonly #io: BridgeIo
  readonly #link: GatewayLink
  readonly #ending: SessionEnding
  /** Highest seq given to the host; -1 until the first hello of an attach without replay. */
  #seenSeq = -1
  readonly #outbox: GatewayOutbox
  readonly #input: HostInput
  readonly #prompts: CliPrompts
  readonly #notices: GatewayNotices
  #turns = 0
  /** The host's control requests still waiting for a connection when stdin ended: the end waits for their answers, within a bound. */
  readonly #answersBeforeEnd: RequestsBeforeEnd
  #lastResultError = false
  #stdinClosed = false
  #silent = false
  #forcedCode: number | null = null
  readonly #attach: SessionAttach
  #exit!: (code: number) => void
  readonly #done: Promise<number>
  /** Settles once the session's id is known (or its create or look-up failed): an end begun before waits for it. */
  readonly #knownId: Promise<void>
  #located!: () => void
  #linkStarted = false
  /** The link gave the gateway up: no line of the session can reach the host any more. */
  #linkLost = false

  /** `random`: the reconnect jitter's source, [0, 1) (Math.random unless a test pins it); `endWaitMs`: SessionEnding's bound; `createTimeoutMs`: the create's. */
  constructor (deps: { api: GatewayApi, env: RemoteEnv, args: RemoteArgs, io: BridgeIo, silence?: typeof SILENCE_DEFAULTS, random?: () => number, requestsAtEndMs?: number, giveUpMs?: number, endWaitMs?: number, createTimeoutMs?: number }) {
    this.#answersBeforeEnd = new RequestsBeforeEnd(deps.requestsAtEndMs)
    this.#io = deps.io
    this.#done = new Promise((resolve) => {
      this.#exit = (code) => {
        this.#answersBeforeEnd.stop()
        resolve(code)
      }
    })
    this.#knownId = new Promise((resolve) => { this.#located = resolve })
    this.#attach = new SessionAttach({
      api: deps.api,
      env: deps.env,
      args: deps.args,
      socket: () => this.#link.socket,
      exit: (code) => this.#exit(code),
      io: deps.io,
      createTimeoutMs: deps.createTimeoutMs
    })
    this.#outbox = new GatewayOutbox({ socket: () => this.#link.socket, debug: deps.io.debug })
    this.#prompts = new CliPrompts({ args: deps.args, send: (line) => this.#outbox.send(line) })
    this.#input = new HostInput({
      args: deps.args,
      send: (line, track) => this.#outbox.send(line, track),
      answered: (id, line) => this.#prompts.hostAnswered(id, line),
      turnStarted: () => { this.#turns++ },
      badLine: () => {
        // The CLI dies on a line it cannot parse (exit 1): so does the session here.
        this.#io.warn('a stdin line is not JSON: ending the session (as the CLI would)')
        void this.#end(1)
      },
      warn: deps.io.warn
    })
    this.#ending = new SessionEnding({ api: deps.api, warn: deps.io.warn, seenSeq: () => this.#seenSeq, endWaitMs: deps.endWaitMs })
    this.#link = new GatewayLink({
      url: () => this.#attach.url(this.#seenSeq),
      token: () => this.#attach.renewal.opening(),
      silence: deps.silence ?? SILENCE_DEFAULTS,
      giveUpMs: deps.giveUpMs,
      random: deps.random,
      io: deps.io,
      events: {
        message: (text) => this.#gatewayFrame(text),
        pong: (payload) => this.#outbox.pong(payload),
        refused: (status) => this.#attach.refused(status),
        closed: (code, reason) => this.#attach.closed(code, reason),
        gaveUp: () => this.#gaveUp()
      }
    })
    this.#notices = new GatewayNotices({
      link: this.#link,
      outbox: this.#outbox,
      renewal: this.#attach.renewal,
      input: this.#input,
      ending: this.#ending,
      answers: this.#prompts.answers,
      prompts: this.#prompts.waiting,
      seenSeq: () => this.#seenSeq,
      setSeenSeq: (seq) => { this.#seenSeq = seq },
      turns: () => this.#turns,
      turnRefused: () => { this.#turns-- },
      out: (line) => this.#out(line),
      hostAnswerGiven: (id) => { this.#answersBeforeEnd.answered(id) },
      maybeEnd: () => this.#maybeEnd(),
      endWithoutStop: (code) => { void this.#end(code, false) },
      warn: deps.io.warn,
      debug: deps.io.debug
    })
  }

  /** Creates or finds the session and attaches; resolves with the exit code. */
  async run (): Promise<number> {
    const failed = await this.#attach.locate()
    // A new session: every frame from the first, so nothing printed before the attach is missed.
    if (this.#attach.created) this.#seenSeq = 0
    this.#located()
    // A SIGTERM (or the host gone) taken while the gateway was answering: the host asked for that stop, and
    // its exit is the signal's (143), not the failure's. A stdin EOF or SIGINT keeps the failure's code.
    if (failed !== null) {
      if (!this.#silent) this.#exit(failed)
      return await this.#done
    }
    // Ended (signal, stdin EOF) while the gateway was still answering: the end, which waited for the id, stops the session.
    if (this.#ending.started) return await this.#done
    this.#io.debug(`session ${this.#attach.id}`)
    this.#linkStarted = true
    this.#link.start()
    return this.#done
  }

  // ---- host → gateway ----

  /** One line the host wrote on stdin. */
  hostLine (raw: string): void {
    if (this.#ending.started || this.#stdinClosed) return
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw
    if (line.trim() === '') return
    this.#input.line(line)
  }

  /** stdin ended: the running turn finishes, waiting prompts are denied, then the session ends. */
  hostEnd (): void {
    if (this.#stdinClosed) return
    this.#stdinClosed = true
    for (const id of this.#outbox.queuedRequestIds()) {
      if (this.#input.awaits(id)) this.#answersBeforeEnd.add(id)
    }
    this.#prompts.refuseWaiting()
    this.#answersBeforeEnd.arm((ids, seconds) => this.#requestsUnanswered(ids, seconds))
    this.#maybeEnd()
  }

  /** The bound after stdin EOF passed with host requests unanswered: each gets an error answer, and the end (exit 1: not every line was served) follows. */
  #requestsUnanswered (ids: string[], seconds: number): void {
    if (this.#ending.started) return
    this.#io.warn(`${ids.length} control request(s) unanswered ${seconds} s after stdin ended: answered with an error`)
    for (const id of ids) {
      // Marked answered first: an answer the gateway gives after all is not printed a second time.
      this.#input.hostAnswered(id)
      this.#outbox.withdraw(id)
      this.#out(refusalAnswer(id, `claude-remote: no answer from the gateway within ${seconds} s of stdin's end`, 'request_timeout'))
    }
    this.#forcedCode ??= 1
    this.#maybeEnd()
  }

  /** SIGINT: the CLI interrupts the running turn, finishes it, and exits 0. */
  interrupt (): void {
    if (this.#turns > 0) this.#input.sendOwn('interrupt', { subtype: 'interrupt' })
    this.#forcedCode = 0
    this.hostEnd()
  }

  /** SIGTERM (or the host went away): stop the session, print nothing more. */
  async terminate (code: number): Promise<void> {
    this.#silent = true
    this.#forcedCode = code
    if (this.#ending.started) {
      // Already ending (stdin EOF): the signal still ends it now, with its code, once the DELETE went out
      // (the end that began first issues it as soon as the session's id is known).
      await this.#knownId
      await this.#ending.stopSent()
      this.#finish(code)
      return
    }
    await this.#end(code)
  }

  // ---- gateway → host ----

  /** No connection for too long (said on stderr): the session is still stopped (its REST may pass where its WebSocket does not), exit 1. */
  #gaveUp (): void {
    this.#linkLost = true
    // An end already under way sent its DELETE: only its wait for the last lines, which cannot come now, is cut short.
    if (this.#ending.started) { void this.#ending.stopSent().then(() => this.#finish(1)); return }
    void this.#end(1)
  }

  #gatewayFrame (text: string): void {
    this.#handleFrame(text)
    this.#ending.check()
    this.#outbox.resendIfCaughtUp(this.#seenSeq)
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
    if (frame.type === 'gateway') { this.#notices.handle(frame); return }
    const seq = typeof frame.seq === 'number' ? frame.seq : null
    // The gateway's own keep_alives (bare) are for the socket; a CLI's (with its fields) is the host's.
    if (frame.type === 'keep_alive' && Object.keys(frame).length === 1) return
    const id = requestIdOf(frame)
    if (seq !== null) {
      const redelivered = frame.type === 'control_request' && id !== null && this.#notices.redelivered(id)
      if (redelivered) {
        // Still counts for the catch-up: the replay may end with this prompt.
        if (seq > this.#seenSeq) this.#seenSeq = seq
        if (this.#prompts.delivered(id as string)) return
      } else {
        if (seq <= this.#seenSeq) return
        this.#seenSeq = seq
      }
    }
    switch (frame.type) {
      case 'control_response':
        if (id !== null) {
          // A request sent again that the gateway still had: the original's answer is on its way.
          if (this.#outbox.isResent(id) && isDuplicateRefusal(frame)) return
          this.#outbox.answered(id)
        }
        if (id !== null && this.#input.ownAnswered(id, frame)) return
        // Only answers to this host's requests: the CLI prints no others (the gateway's, another client's).
        if (id === null || !this.#input.hostAnswered(id)) return
        this.#answersBeforeEnd.answered(id)
        break
      case 'control_request':
        if (id !== null) {
          const request = isRecord(frame.request) ? frame.request : {}
          // Answered here (no prompt tool, or stdin closed): not the host's to see.
          if (!this.#prompts.arrived(id, String(request.subtype), this.#stdinClosed)) return
        }
        break
      case 'control_cancel_request':
        if (id !== null) this.#prompts.waiting.delete(id)
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
    if (frame.type === 'result' || frame.type === 'system' || frame.type === 'command_lifecycle' || frame.type === 'control_response') this.#maybeEnd()
  }

  #out (line: string): void {
    if (!this.#silent) this.#io.writeOut(line)
  }

  // ---- the end ----

  #maybeEnd (): void {
    if (this.#stdinClosed && !this.#ending.started && this.#turns <= 0 && this.#answersBeforeEnd.size === 0) void this.#end(this.#forcedCode ?? (this.#lastResultError ? 1 : 0))
  }

  /** DELETE (stops the CLI), print its last lines until its final status, then exit with `code`. */
  async #end (code: number, stopCli = true): Promise<void> {
    if (!this.#ending.begin()) return
    this.#io.debug(`ending the session (exit ${code})`)
    // Begun while the session was being created: its CLI already runs on the gateway, and must be stopped too.
    await this.#knownId
    // Never attached: no line of it is the host's to wait for.
    if (stopCli && this.#attach.id !== '') await this.#ending.stopSession(this.#attach.id, this.#silent || !this.#linkStarted || this.#linkLost)
    this.#finish(code)
  }

  #finish (code: number): void {
    this.#link.close()
    this.#attach.renewal.stop()
    this.#exit(code)
  }
}
