/**
 * A raw Server-Sent Events reader over node:http for tests of
 * `GET /v1/sessions/:id/events/stream`: records events and comments, can stop
 * and resume reading its socket, and lets tests wait for what arrives.
 */
import http, { type ClientRequest, type IncomingMessage } from 'node:http'
import { TOKEN_A } from './gateway.js'
import { Waiters } from './waiters.js'

export interface SseEvent {
  event: string
  id: string | null
  data: string
}

/** A raw SSE reader over node:http: records events and comments, and lets tests wait for them. */
export class SseReader {
  readonly events: SseEvent[] = []
  /** Events with an id (recorded frames), parsed, in arrival order. */
  readonly frames: any[] = []
  /** `event: gateway` frames (no id), parsed. */
  readonly gatewayFrames: any[] = []
  readonly comments: string[] = []
  status = 0
  headers: http.IncomingHttpHeaders = {}
  ended = false
  readonly #req: ClientRequest
  #res: IncomingMessage | null = null
  #buffer = ''
  readonly #waiters = new Waiters()

  private constructor (req: ClientRequest) {
    this.#req = req
  }

  static open (url: string, headers: Record<string, string> = {}): Promise<SseReader> {
    return new Promise((resolve, reject) => {
      const req = http.get(url, { headers: { authorization: `Bearer ${TOKEN_A}`, accept: 'text/event-stream', ...headers } })
      const reader = new SseReader(req)
      req.once('error', reject)
      req.once('response', (res) => {
        reader.#res = res
        reader.status = res.statusCode ?? 0
        reader.headers = res.headers
        res.setEncoding('utf8')
        res.on('data', (chunk: string) => reader.#feed(chunk))
        res.once('close', () => { reader.ended = true; reader.#wake() })
        resolve(reader)
      })
    })
  }

  /** Stops reading (the socket stays open): the server's writes back up. */
  pause (): void { this.#res?.pause() }

  /** Reads again after `pause()`. */
  resume (): void { this.#res?.resume() }

  close (): void { this.#req.destroy() }

  until<T> (check: () => T | undefined | false, timeoutMs = 10_000, what = 'condition'): Promise<T> {
    return this.#waiters.until(check, timeoutMs, what, () => `last events: ${JSON.stringify(this.events.slice(-3)).slice(0, 1500)}`)
  }

  #feed (chunk: string): void {
    this.#buffer += chunk
    const blocks = this.#buffer.split('\n\n')
    this.#buffer = blocks.pop() as string
    // Events are separated by a blank line; the server only writes \n line ends.
    for (const block of blocks) {
      let event = 'message'
      let id: string | null = null
      const data: string[] = []
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) { this.comments.push(line.slice(1).trim()); continue }
        const colon = line.indexOf(':')
        const field = colon === -1 ? line : line.slice(0, colon)
        const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '')
        if (field === 'event') event = value
        else if (field === 'id') id = value
        else if (field === 'data') data.push(value)
      }
      if (data.length === 0) continue
      const e = { event, id, data: data.join('\n') }
      this.events.push(e)
      if (id !== null) this.frames.push(JSON.parse(e.data))
      if (event === 'gateway') this.gatewayFrames.push(JSON.parse(e.data))
    }
    this.#wake()
  }

  #wake (): void {
    this.#waiters.wake()
  }
}
