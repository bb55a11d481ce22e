/**
 * The host's stdin lines on their way to the gateway, and the control
 * requests in flight on the host's side: the host's own (their answers are
 * the host's to read) and claude-remote's (the `initialize` and
 * `set_max_thinking_tokens` its argv calls for, an `interrupt` on SIGINT:
 * their answers are not). The CLI reads an initialize first; one is sent for
 * the host when a flag needs it and the host sent none.
 */
import { randomUUID } from 'node:crypto'
import type { RemoteArgs } from './argv.js'
import { requestIdOf } from './frames.js'
import { withInitFields } from './host-answers.js'
import { isRecord } from '../protocol/is-record.js'

export interface HostInputDeps {
  args: RemoteArgs
  /** Sends a line (control requests with their id, user lines with their uuid, for a resend after a drop). */
  send: (line: string, track?: { requestId?: string | undefined, uuid?: string | undefined }) => void
  /** The host answered the CLI's control request `id` with `line`. */
  answered: (id: string, line: string) => void
  /** The host wrote a user line: a turn will run. */
  turnStarted: () => void
  /** The host wrote a line that is not JSON. */
  badLine: () => void
  warn: (message: string) => void
}

export class HostInput {
  readonly #deps: HostInputDeps
  /** The host's own control requests, waiting for the CLI's response. */
  readonly #hostRequests = new Set<string>()
  /** Requests claude-remote itself sent (initialize, max thinking tokens, interrupt), by id: what each was for. */
  readonly #ownRequests = new Map<string, string>()
  #initDone = false

  constructor (deps: HostInputDeps) {
    this.#deps = deps
  }

  /** One stdin line (its `\r` and blank lines already dropped). */
  line (line: string): void {
    let frame: unknown
    try {
      frame = JSON.parse(line)
    } catch {
      this.#deps.badLine()
      return
    }
    if (!isRecord(frame)) { this.#deps.send(line); return }
    let requestId: string | undefined
    let uuid: string | undefined
    if (frame.type === 'control_request') {
      const id = requestIdOf(frame)
      if (id !== null) this.#hostRequests.add(id)
      requestId = id ?? undefined
      const request = isRecord(frame.request) ? frame.request : {}
      if (request.subtype === 'initialize' && !this.#initDone) {
        this.#initDone = true
        this.#deps.send(withInitFields(line, frame, request, this.#deps.args.initFields), { requestId })
        this.#afterInit()
        return
      }
    } else if (frame.type === 'control_response') {
      const id = requestIdOf(frame)
      if (id !== null) this.#deps.answered(id, line)
    } else if (frame.type === 'user') {
      this.#deps.turnStarted()
      // Only a uuid makes a second copy harmless (the gateway drops a repeated one).
      if (typeof frame.uuid === 'string' && frame.uuid !== '') uuid = frame.uuid
    }
    if (!this.#initDone && frame.type !== 'keep_alive') this.#ownInit()
    this.#deps.send(line, { requestId, uuid })
  }

  /** Sends a control request of claude-remote's own; `what` names it in a warning if the CLI refuses it. */
  sendOwn (what: string, request: Record<string, unknown>): void {
    const id = `claude-remote-${randomUUID()}`
    this.#ownRequests.set(id, what)
    this.#deps.send(JSON.stringify({ type: 'control_request', request_id: id, request }), { requestId: id })
  }

  /** True while the host's request `id` waits for its answer. */
  awaits (id: string): boolean {
    return this.#hostRequests.has(id)
  }

  /** The answer (or a refusal) to request `id` arrived: true when the host sent it (the answer is the host's). */
  hostAnswered (id: string): boolean {
    return this.#hostRequests.delete(id)
  }

  /** A control_response to `id`: true when the request was claude-remote's own (a refusal is said on stderr; the host sees nothing). */
  ownAnswered (id: string, frame: Record<string, unknown>): boolean {
    const what = this.#ownRequests.get(id)
    if (what === undefined) return false
    this.#ownRequests.delete(id)
    const response = isRecord(frame.response) ? frame.response : {}
    if (response.subtype === 'error') this.#deps.warn(`${what}: the CLI refused it: ${String(response.error)}`)
    return true
  }

  /** The host sent no initialize first, but a flag needs one (`--system-prompt`, `--json-schema`). */
  #ownInit (): void {
    this.#initDone = true
    if (Object.keys(this.#deps.args.initFields).length > 0) this.sendOwn('initialize', { subtype: 'initialize', ...this.#deps.args.initFields })
    this.#afterInit()
  }

  #afterInit (): void {
    if (this.#deps.args.maxThinkingTokens !== null) {
      this.sendOwn('--max-thinking-tokens', { subtype: 'set_max_thinking_tokens', max_thinking_tokens: this.#deps.args.maxThinkingTokens })
    }
  }
}
