/**
 * One signed POST of a delivery to WEBHOOK_URL, with node:http(s) on an
 * agent of its own (keep-alive, at most `concurrency` sockets) that `close`
 * destroys, so a gateway that stops leaves no socket behind. Each attempt is
 * signed afresh (its own timestamp), ends within `timeoutMs` whatever the
 * receiver does, and comes back as a result, never as a throw. A URL's
 * `user:password@` goes as Basic authentication; neither it nor the query
 * is ever logged (`describeTarget`).
 */
import { Agent as HttpAgent, type ClientRequest, type IncomingMessage, request as httpRequest } from 'node:http'
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https'
import type { AttemptResult, Delivery } from './delivery-queue.js'
import { WEBHOOK_HEADERS, signWebhook } from './signature.js'

export interface WebhookSenderOptions {
  url: string
  secret: string
  timeoutMs: number
  /** Sockets kept to the receiver (the queue's concurrency). */
  maxSockets: number
}

const USER_AGENT = 'claude-gateway-webhooks/1'

export class WebhookSender {
  readonly #url: URL
  readonly #secret: string
  readonly #timeoutMs: number
  readonly #agent: HttpAgent
  readonly #request: typeof httpRequest

  constructor (options: WebhookSenderOptions) {
    this.#url = new URL(options.url)
    this.#secret = options.secret
    this.#timeoutMs = options.timeoutMs
    const https = this.#url.protocol === 'https:'
    this.#agent = https ? new HttpsAgent({ keepAlive: true, maxSockets: options.maxSockets }) : new HttpAgent({ keepAlive: true, maxSockets: options.maxSockets })
    this.#request = https ? httpsRequest : httpRequest
  }

  /** One attempt; resolves when the receiver's status is known, the attempt failed, or `signal` aborted it. */
  send (delivery: Delivery, signal: AbortSignal): Promise<AttemptResult> {
    const body = Buffer.from(delivery.body)
    const timestamp = Math.floor(Date.now() / 1000)
    return new Promise((resolve) => {
      let result: AttemptResult | null = null
      const settle = (r: AttemptResult): void => {
        if (result !== null) return
        result = r
        resolve(r)
      }
      let req: ClientRequest
      try {
        req = this.#request(this.#url, {
          method: 'POST',
          agent: this.#agent,
          signal,
          headers: {
            'content-type': 'application/json',
            'content-length': body.length,
            'user-agent': USER_AGENT,
            [WEBHOOK_HEADERS.id]: delivery.id,
            [WEBHOOK_HEADERS.timestamp]: String(timestamp),
            [WEBHOOK_HEADERS.signature]: signWebhook(this.#secret, timestamp, body),
            [WEBHOOK_HEADERS.attempt]: String(delivery.attempts)
          }
        })
      } catch (err) {
        settle({ outcome: 'retry', reason: reasonOf(err) })
        return
      }
      // Covers connecting, sending and the answer's headers; after the status is known it
      // still bounds the answer's body, which is read and thrown away so the socket is reused.
      const timer = setTimeout(() => {
        req.destroy(Object.assign(new Error(`no answer within ${this.#timeoutMs} ms`), { code: 'TIMEOUT' }))
      }, this.#timeoutMs)
      req.on('response', (res: IncomingMessage) => {
        settle(classify(res.statusCode ?? 0, res.headers['retry-after']))
        res.on('close', () => { clearTimeout(timer) })
        res.on('error', () => {}) // a cut body does not change the result
        res.resume()
      })
      req.on('error', (err) => {
        clearTimeout(timer)
        settle({ outcome: 'retry', reason: reasonOf(err) })
      })
      req.on('close', () => {
        if (result === null) clearTimeout(timer)
        settle({ outcome: 'retry', reason: 'connection closed before an answer' })
      })
      req.end(body)
    })
  }

  /** Closes the receiver's sockets (call once the queue has nothing in flight). */
  close (): void {
    this.#agent.destroy()
  }
}

/** 2xx delivered; 408, 429 and 5xx retried (after Retry-After when given); anything else never is. */
export function classify (status: number, retryAfter: string | undefined): AttemptResult {
  if (status >= 200 && status < 300) return { outcome: 'delivered', status }
  if (status === 408 || status === 429 || status >= 500) {
    const retryAfterMs = parseRetryAfter(retryAfter)
    return { outcome: 'retry', reason: `answered ${status}`, status, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) }
  }
  return { outcome: 'rejected', reason: `answered ${status}`, status }
}

/** Retry-After in ms: delay-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter (value: string | undefined, now = Date.now()): number | undefined {
  if (value === undefined) return undefined
  const text = value.trim()
  if (/^\d+$/.test(text)) return Number(text) * 1000
  // Date.parse takes nearly anything ('-5' is a year): an HTTP date names its day or month.
  const at = /[A-Za-z]{3}/.test(text) ? Date.parse(text) : Number.NaN
  return Number.isNaN(at) ? undefined : Math.max(0, at - now)
}

/** The URL as logs may show it: scheme, host and path; no credentials, no query. */
export function describeTarget (url: string): string {
  const u = new URL(url)
  return `${u.protocol}//${u.host}${u.pathname}`
}

/** A short reason for a failed attempt: the error's code (ECONNREFUSED, TIMEOUT, ABORT_ERR) and message. */
function reasonOf (err: unknown): string {
  const e = err as NodeJS.ErrnoException
  return e.code === undefined ? String(e.message) : `${e.code}: ${e.message}`
}
