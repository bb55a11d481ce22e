/**
 * The CLI's control requests (prompts) given to the host, and the answers to
 * them kept until the gateway says the request ended. Kept apart from the
 * bridge because the same ledger is read by the gateway's notices (an answer
 * lost with a connection goes again, a prompt ended elsewhere is dropped)
 * and the host's input (an answer the host wrote), and because some prompts
 * are answered here in the host's stead: a tool prompt when the host asked
 * for none, and any prompt once stdin is closed, as the CLI denies them.
 */
import type { RemoteArgs } from './argv.js'
import { noPromptToolAnswer, streamClosedAnswer } from './host-answers.js'

export class CliPrompts {
  /** CLI control requests given to the host and not answered yet: id → subtype. */
  readonly waiting = new Map<string, string>()
  /** The host's answers, kept until the gateway says the request ended: resent if the connection dropped with them. */
  readonly answers = new Map<string, string>()
  /** CLI control requests given to the host (a redelivery after a reconnect is not given twice). */
  readonly #delivered = new Set<string>()
  readonly #args: RemoteArgs
  readonly #send: (line: string) => void

  /** `send`: a line to the gateway. */
  constructor (deps: { args: RemoteArgs, send: (line: string) => void }) {
    this.#args = deps.args
    this.#send = deps.send
  }

  /** True when the CLI's request `id` was given to the host already. */
  delivered (id: string): boolean {
    return this.#delivered.has(id)
  }

  /** A CLI control request for the host: false when claude-remote answered it itself (the host is not given it). */
  arrived (id: string, subtype: string, stdinClosed: boolean): boolean {
    this.#delivered.add(id)
    if (!this.#args.promptTool && subtype === 'can_use_tool') {
      this.#answerFor(id, noPromptToolAnswer(id))
      return false
    }
    // Nobody left to answer: denied, as the CLI denies prompts once its stdin is closed.
    if (stdinClosed) { this.#refuse(id, subtype); return false }
    this.waiting.set(id, subtype)
    return true
  }

  /** The host answered the CLI's request `id` with `line`. */
  hostAnswered (id: string, line: string): void {
    this.waiting.delete(id)
    this.answers.set(id, line)
  }

  /** stdin ended: every prompt still waiting is denied. */
  refuseWaiting (): void {
    for (const [id, subtype] of this.waiting) this.#refuse(id, subtype)
    this.waiting.clear()
  }

  #refuse (id: string, subtype: string): void {
    this.#answerFor(id, streamClosedAnswer(id, subtype))
  }

  /** An answer claude-remote gives for the host: kept like the host's own, so a connection lost with it does not leave the prompt (and the turn) waiting for ever. */
  #answerFor (id: string, line: string): void {
    this.answers.set(id, line)
    this.#send(line)
  }
}
