/**
 * What a connection sends, kept until it is known to have arrived. A socket
 * only hands a frame to the network: one written just before the connection
 * dies may never reach the gateway. So
 * - frames written while no connection is open queue, and go out right
 *   after the next hello, in order;
 * - user messages are kept (by uuid) until the gateway's recorded
 *   `user_message` frame confirms them, and sent again once a new
 *   connection's replay has caught up: the gateway forwards a uuid once, so
 *   a resend never reaches the CLI twice;
 * - control requests are kept until their control_response, and sent again
 *   the same way (a copy the gateway still has in flight is refused as
 *   `duplicate_request_id`, which is ignored: the original's answer comes);
 * - permission answers are kept until the prompt is resolved or the gateway
 *   refuses them, and sent again if the gateway hands the prompt out again
 *   (a new hold after a drop).
 * A connection the gateway closed with 1009 (a frame over its
 * WS_MAX_PAYLOAD_BYTES) drops the largest frame written on it, which is
 * that frame or one as large: resending it would only close the next one.
 */
import { ControlRequestError } from './errors.js'

/** Resends of one user message before it is given up on (the gateway dedupes anyway; this bounds the work). */
const USER_RESENDS_MAX = 3
/** User messages remembered at most (oldest forgotten first) while confirmations do not come. */
const USERS_MAX = 200

interface Sent { text: string, gen: number | null }
/** What a frame written on the socket was, to find it again (tooLarge). */
interface Ref { kind: 'user' | 'call' | 'answer', id: string }
interface Call extends Sent { resent: boolean, resolve: (response: Record<string, unknown> | undefined) => void, reject: (err: Error) => void }

export class Outbox {
  #queue: Array<{ text: string, sent: Sent | null, ref: Ref | null }> = []
  readonly #users = new Map<string, Sent & { resends: number }>()
  readonly #calls = new Map<string, Call>()
  readonly #answers = new Map<string, string>()
  readonly #resentAnswers = new Set<string>()
  #write: ((text: string) => boolean) | null = null
  #gen = 0
  /** The largest frame written since the last attach, in UTF-8 bytes. */
  #largest: (Ref & { bytes: number }) | null = null

  /** A connection said hello: frames go to `write` from now on (it returns false if the socket cannot take them), queued ones first. */
  attach (gen: number, write: (text: string) => boolean): void {
    this.#gen = gen
    this.#write = write
    this.#largest = null
    const queued = this.#queue
    this.#queue = []
    for (const item of queued) this.#send(item.text, item.sent, item.ref)
  }

  /** The connection is gone: frames queue until the next attach. */
  detach (): void {
    this.#write = null
  }

  /** A user message with its uuid. */
  user (uuid: string, text: string): void {
    const entry = { text, gen: null, resends: 0 }
    this.#users.delete(uuid)
    this.#users.set(uuid, entry)
    if (this.#users.size > USERS_MAX) this.#users.delete(this.#users.keys().next().value as string)
    this.#send(text, entry, { kind: 'user', id: uuid })
  }

  /** The gateway wrote the user message with this uuid to the CLI. */
  confirmUser (uuid: string): void {
    this.#users.delete(uuid)
  }

  /** A control request; settles with its control_response's payload. */
  call (requestId: string, text: string): Promise<Record<string, unknown> | undefined> {
    return new Promise((resolve, reject) => {
      const call: Call = { text, gen: null, resent: false, resolve, reject }
      this.#calls.set(requestId, call)
      this.#send(text, call, { kind: 'call', id: requestId })
    })
  }

  /** A control_response (recorded or the gateway's own refusal): settles the call with that request_id, if ours. */
  settle (response: { request_id?: unknown, subtype?: unknown, response?: unknown, error?: unknown, code?: unknown, error_code?: unknown }): void {
    if (typeof response.request_id !== 'string') return
    const call = this.#calls.get(response.request_id)
    if (call === undefined) return
    if (response.subtype === 'error') {
      const code = typeof response.code === 'string' ? response.code : typeof response.error_code === 'string' ? response.error_code : 'error'
      // A resent copy refused because the original is still in flight: the original's answer will come.
      if (code === 'duplicate_request_id' && call.resent) return
      this.#calls.delete(response.request_id)
      call.reject(new ControlRequestError(response.request_id, code, typeof response.error === 'string' ? response.error : code))
      return
    }
    this.#calls.delete(response.request_id)
    call.resolve(typeof response.response === 'object' && response.response !== null ? response.response as Record<string, unknown> : undefined)
  }

  /** A permission answer, kept until `resolved`. */
  answer (requestId: string, text: string): void {
    this.#answers.set(requestId, text)
    this.#send(text, null, { kind: 'answer', id: requestId })
  }

  /** True (and the answer sent again) when this prompt was already answered here: the gateway handed it out again. */
  resendAnswer (requestId: string): boolean {
    const text = this.#answers.get(requestId)
    if (text === undefined) return false
    this.#resentAnswers.add(requestId)
    this.#send(text, null, { kind: 'answer', id: requestId })
    return true
  }

  /** True for a prompt whose answer was sent again: an `already_resolved` about it is expected. */
  wasResent (requestId: string): boolean {
    return this.#resentAnswers.has(requestId)
  }

  /** The prompt or control request ended, or the gateway refused the answer: it is not to be sent again. */
  resolved (requestId: string): void {
    this.#answers.delete(requestId)
    this.#resentAnswers.delete(requestId)
  }

  /**
   * The new connection's replay has caught up: what earlier connections
   * sent and nothing has confirmed goes out again. Called once per hello.
   */
  resendUnconfirmed (): void {
    for (const [uuid, entry] of this.#users) {
      if (entry.gen === this.#gen || entry.gen === null) continue
      if (entry.resends >= USER_RESENDS_MAX) { this.#users.delete(uuid); continue }
      entry.resends++
      this.#send(entry.text, entry, { kind: 'user', id: uuid })
    }
    for (const [requestId, call] of this.#calls) {
      if (call.gen === this.#gen || call.gen === null) continue
      call.resent = true
      this.#send(call.text, call, { kind: 'call', id: requestId })
    }
  }

  /** Ends every call with `err` and forgets everything (the connection was closed for good). */
  rejectAll (err: (requestId: string) => Error): void {
    for (const [id, call] of this.#calls) call.reject(err(id))
    this.#calls.clear()
    this.#queue = []
    this.#users.clear()
    this.#answers.clear()
    this.#write = null
  }

  /**
   * The gateway closed the last connection with 1009: the largest frame
   * written on it is over its limit (the one refused is, and none was
   * larger). It is forgotten, not resent: a control request rejects with
   * `frame_too_large`, a user message is dropped, a permission answer is
   * dropped (the prompt stays open for a smaller one). Returns what it was.
   */
  tooLarge (): Ref | null {
    const largest = this.#largest
    this.#largest = null
    if (largest === null) return null
    const { kind, id } = largest
    if (kind === 'user') this.#users.delete(id)
    if (kind === 'answer') this.resolved(id)
    const call = kind === 'call' ? this.#calls.get(id) : undefined
    if (call !== undefined) {
      this.#calls.delete(id)
      call.reject(new ControlRequestError(id, 'frame_too_large', 'The control request is over the gateway\'s WS_MAX_PAYLOAD_BYTES'))
    }
    return { kind, id }
  }

  get queued (): number { return this.#queue.length }

  #send (text: string, sent: Sent | null, ref: Ref | null): void {
    if (this.#write !== null && this.#write(text)) {
      if (sent !== null) sent.gen = this.#gen
      if (ref !== null) {
        const bytes = utf8Length(text)
        if (this.#largest === null || bytes > this.#largest.bytes) this.#largest = { ...ref, bytes }
      }
      return
    }
    this.#queue.push({ text, sent, ref })
  }
}

/** The UTF-8 size of `text` (what WS_MAX_PAYLOAD_BYTES counts), without encoding it. */
function utf8Length (text: string): number {
  let bytes = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c < 0x80) bytes += 1
    else if (c < 0x800) bytes += 2
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) { bytes += 4; i++ } else bytes += 3
  }
  return bytes
}
