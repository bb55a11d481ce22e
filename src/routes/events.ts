/**
 * A session's history over plain HTTP.
 *
 * `GET /v1/sessions/:id/events?after=&limit=` pages through the recorded
 * frames (exactly the text clients received live, `seq` included), oldest
 * first. Read through the session's EventLog, so frames it holds in memory
 * while the store is unreachable are served too.
 *
 * `GET /v1/sessions/:id/events/stream` is the same log as Server-Sent Events:
 * history after `Last-Event-ID` (or `?after=`), then live frames, with
 * `: keep-alive` comments as heartbeats. The stream is attached to the
 * session as an observer `ClientPort`, so the session's own replay/backlog
 * logic gives it every frame once, in order, with no gap. A stream the
 * gateway ends (slow reader, shutdown) gets a last `event: end` saying why.
 */
import { randomUUID } from 'node:crypto'
import type { ServerResponse } from 'node:http'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { ZodTypeProvider } from 'fastify-type-provider-zod'
import { z } from 'zod'
import { GatewayError } from '../errors.js'
import { eventsQuery, queryInt } from '../protocol/session-options.js'
import type { Listed, LiveCredentials } from '../auth/live-credentials.js'
import type { TenantConnections } from '../net/tenant-connections.js'
import { END_GRACE_MS, SHUTDOWN_END_GRACE_MS, SendQueue } from '../net/send-queue.js'
import type { ClientPort, EndReason } from '../session/session.js'
import type { SessionManager } from '../session/session-manager.js'
import { historyBody } from './history-body.js'
import { authErrors, errorResponses, historyPage, sessionParams } from './schemas.js'
import { findSession } from './sessions.js'

export interface EventRoutesOptions {
  manager: SessionManager
  /** Interval of the `: keep-alive` comments on event streams. */
  keepaliveIntervalMs: number
  /** A stream's byte budget (WS_MAX_BUFFERED_BYTES); past it the stream is ended; the client reconnects with Last-Event-ID. */
  maxBufferedBytes: number
  /** Streams are clients of their session: past MAX_CLIENTS_PER_SESSION a new one is refused (429), like a WebSocket. */
  maxClientsPerSession: number
  /** MAX_CONNECTIONS_PER_TENANT, shared with WebSockets. */
  tenantConnections: TenantConnections
  /** A history page stops before passing this many bytes (HISTORY_PAGE_MAX_BYTES). */
  historyPageMaxBytes: number
  /** Lists each stream, so a credential reload ends those it no longer admits. */
  credentials?: LiveCredentials | undefined
}

const streamQuery = z.strictObject({
  after: queryInt(0).optional()
})

const lastEventId = queryInt(0)

const SLOW_CONSUMER = 'slow consumer: reconnect with Last-Event-ID'

export async function eventRoutes (fastify: FastifyInstance, options: EventRoutesOptions): Promise<void> {
  const { manager } = options
  const streams = new Set<SseClient>()
  const app = fastify.withTypeProvider<ZodTypeProvider>()

  app.get('/v1/sessions/:id/events', {
    schema: {
      tags: ['history'],
      summary: 'A page of the session\'s recorded frames, oldest first',
      params: sessionParams,
      querystring: eventsQuery,
      // 200 is documented, never run: the page goes out as the Buffer built from the stored bytes.
      response: { 200: historyPage.describe('A page of history'), ...errorResponses(...authErrors, 'bad_request', 'session_not_found', 'store_unavailable') }
    }
  }, async (request, reply) => {
    const query = request.query
    const session = await findSession(manager, request)
    let body: Buffer
    try {
      body = await historyBody(session.events, query.after, query.limit, options.historyPageMaxBytes)
    } catch (err) {
      request.log.warn({ err }, 'event history read failed')
      throw new GatewayError('store_unavailable')
    }
    // A Buffer goes out as it is: no serializer (the 200 schema above is for the docs), and its length is known.
    return (reply as FastifyReply).type('application/json; charset=utf-8').header('content-length', body.length).send(body)
  })

  app.get('/v1/sessions/:id/events/stream', {
    schema: {
      tags: ['history'],
      summary: 'History, then live frames, as Server-Sent Events',
      // Not a header schema: resumePoint reads it, so the 400 for a bad one keeps its message.
      description: 'Resume with the `Last-Event-ID` header (a seq; EventSource sends it by itself), which takes precedence over `?after=`.',
      params: sessionParams,
      querystring: streamQuery,
      response: {
        200: { description: 'text/event-stream: `id: <seq>` + `data: <frame>` per recorded frame; `event: gateway`, `event: end`', content: { 'text/event-stream': { schema: z.string() } } },
        ...errorResponses(...authErrors, 'bad_request', 'session_not_found', 'too_many_clients', 'tenant_connection_limit', 'store_unavailable')
      }
    }
  }, async (request, reply) => {
    const after = resumePoint(request) ?? request.query.after ?? 0
    const session = await findSession(manager, request)
    if (session.clientCount >= options.maxClientsPerSession) throw new GatewayError('too_many_clients')
    const releaseSlot = options.tenantConnections.acquire(request.tenant)

    reply.hijack()
    // A stream is idle between heartbeats: no socket inactivity timeout may end it.
    request.raw.socket.setTimeout(0)
    const res = reply.raw
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no'
    })
    res.flushHeaders()

    let done = false
    const credential = request.credential
    let listed: Listed | undefined
    const release = (): void => {
      if (done) return
      done = true
      listed?.unlist()
      releaseSlot()
      clearInterval(heartbeat)
      streams.delete(client)
      session.detach(client)
    }
    // Ended by us (slow reader, shutdown) or closed by the peer: detach at once either way.
    const client = new SseClient(res, options.maxBufferedBytes, release)
    streams.add(client)
    if (credential !== null && options.credentials !== undefined) {
      listed = options.credentials.add({
        tenant: request.tenant,
        credential,
        checkedAt: request.credentialGeneration,
        end: (why) => {
          // A stream cannot present a newer credential: reconnecting with one resumes it (Last-Event-ID).
          if (why === 'expired') client.end('credential_expired', 'the credential this stream was opened with has expired; reconnect with a newer one')
          else client.end('credential_revoked', 'the credential this stream was opened with is no longer valid') // (a stream presents none: never `refused`)
        }
      })
    }
    const heartbeat = setInterval(() => client.tick(options.keepaliveIntervalMs), options.keepaliveIntervalMs)
    heartbeat.unref()
    res.once('close', () => client.close())
    // Gone while its session was looked up: that 'close' came before the listener above.
    if (res.destroyed) {
      client.close()
      return
    }

    session.attach(client, { role: 'observer', after }).catch((err: unknown) => {
      request.log.error({ err }, 'event stream attach failed')
      client.close('attach failed')
    })
  })

  // Hijacked responses are never idle, so the server would wait for them at close.
  app.addHook('preClose', async () => {
    for (const client of streams) client.end('shutting_down', 'gateway shutting down')
  })
}

/** `Last-Event-ID` as a seq; undefined when absent, 400 when not a seq. */
function resumePoint (request: FastifyRequest): number | undefined {
  const header = request.headers['last-event-id']
  if (header === undefined || header === '') return undefined
  const parsed = lastEventId.safeParse(Array.isArray(header) ? header[0] : header)
  if (!parsed.success) throw new GatewayError('bad_request', 'Last-Event-ID: expected a seq (a non-negative integer)')
  return parsed.data
}

/**
 * An SSE response as a session's ClientPort. What the response cannot take
 * yet waits in a SendQueue against the stream's byte budget, so ending the
 * stream can drop it and the final `end` event is next in line.
 */
class SseClient implements ClientPort {
  readonly id = randomUUID()
  readonly maxBufferedBytes: number
  readonly #res: ServerResponse
  readonly #queue: SendQueue<string>
  readonly #onEnd: () => void
  /** Replays waiting on `writable()`, and when the oldest of them began to wait. */
  #waiting = 0
  #waitingSince: number | null = null
  #ended = false

  constructor (res: ServerResponse, maxBufferedBytes: number, onEnd: () => void) {
    this.#res = res
    this.maxBufferedBytes = maxBufferedBytes
    this.#onEnd = onEnd
    this.#queue = new SendQueue<string>({
      write: (chunk) => { res.write(chunk) },
      // A write that returned false sets writableNeedDrain until the response's 'drain'.
      room: () => !res.writableNeedDrain,
      pending: () => res.writableLength
    }, maxBufferedBytes, () => this.end('slow_consumer', SLOW_CONSUMER))
    res.on('drain', () => this.#queue.flush())
  }

  get ended (): boolean { return this.#ended }

  /** Bytes sent and not yet handed to the kernel: the queue and the response's buffer. */
  buffered (): number { return this.#queue.buffered() }

  send (data: string | Buffer, seq?: number): void {
    if (this.#ended) return
    const frame = typeof data === 'string' ? data : data.toString('utf8')
    // Recorded frames carry their seq as the event id (Last-Event-ID resumes after it); the rest are `gateway` events.
    this.#queue.send(seq === undefined ? `event: gateway\n${dataLines(frame)}\n` : `id: ${seq}\n${dataLines(frame)}\n`)
  }

  /**
   * Null while frames go straight to the response; else a promise settled
   * once what waits is out and the response drained (or the stream ends).
   * The session's replay waits on it, so a long history reaches a reading
   * client within its budget; live frames are not held back.
   */
  writable (): Promise<void> | null {
    if (this.#ended) return null
    const wait = this.#queue.writable()
    if (wait === null) return null
    this.#waiting++
    this.#waitingSince ??= Date.now()
    return wait.then(() => {
      if (--this.#waiting === 0) this.#waitingSince = null
    })
  }

  /**
   * Heartbeat: a `: keep-alive` comment. A replay that has waited a whole
   * interval for the client to read ends the stream instead: the budget
   * bounds what a stalled reader costs, but while no live frame arrives it
   * never runs out, and an event stream has no ping to find a reader gone.
   */
  tick (intervalMs: number): void {
    if (this.#waitingSince !== null && Date.now() - this.#waitingSince >= intervalMs) {
      this.end('slow_consumer', SLOW_CONSUMER)
      return
    }
    this.#queue.send(': keep-alive\n\n')
  }

  /**
   * Ends the stream with a last `end` event saying why, after dropping what
   * still waits to be sent. No-op once ended.
   */
  end (reason: EndReason, message: string): void {
    const data = JSON.stringify({ type: 'gateway', subtype: 'end', reason, message })
    this.#finish(`event: end\ndata: ${data}\n\n`, reason === 'shutting_down' ? SHUTDOWN_END_GRACE_MS : END_GRACE_MS)
  }

  /** Ends the stream without an `end` event: the peer closed it (nothing more is written), or with a last comment. */
  close (comment?: string): void {
    this.#finish(comment === undefined ? '' : `: ${comment}\n\n`, END_GRACE_MS)
  }

  /** No-op once ended; a peer that does not read is cut off after `graceMs`. */
  #finish (last: string, graceMs: number): void {
    if (this.#ended) return
    this.#ended = true
    this.#queue.close()
    const res = this.#res
    if (!res.destroyed && !res.writableEnded) {
      res.end(last)
      const timer = setTimeout(() => res.destroy(), graceMs)
      timer.unref()
      res.once('close', () => clearTimeout(timer))
    }
    this.#onEnd()
  }
}

/** `data:` lines for a frame. JSON text holds CR/LF only as whitespace, so splitting there keeps it equivalent. */
function dataLines (frame: string): string {
  if (!/[\r\n]/.test(frame)) return `data: ${frame}\n`
  return frame.split(/\r\n|\r|\n/).map((line) => `data: ${line}\n`).join('')
}
