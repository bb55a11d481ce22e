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
 * logic gives it every frame once, in order, with no gap.
 */
import { randomUUID } from 'node:crypto'
import type { ServerResponse } from 'node:http'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { z } from 'zod'
import { GatewayError } from '../errors.js'
import { eventsQuery } from '../protocol/session-options.js'
import type { TenantConnections } from '../net/tenant-connections.js'
import type { ClientPort } from '../session/session.js'
import type { SessionManager } from '../session/session-manager.js'
import { type HistoryPage, readHistoryPage } from '../session/history-page.js'
import { findSession } from './sessions.js'
import { parseOr400 } from './validate.js'

export interface EventRoutesOptions {
  manager: SessionManager
  /** Interval of the `: keep-alive` comments on event streams. */
  keepaliveIntervalMs: number
  /** A stream whose unsent backlog passes this is ended; the client reconnects with Last-Event-ID. */
  maxBufferedBytes: number
  /** Streams are clients of their session: past MAX_CLIENTS_PER_SESSION a new one is refused (429), like a WebSocket. */
  maxClientsPerSession: number
  /** MAX_CONNECTIONS_PER_TENANT, shared with WebSockets. */
  tenantConnections: TenantConnections
  /** A history page stops before passing this many bytes (HISTORY_PAGE_MAX_BYTES). */
  historyPageMaxBytes: number
}

const streamQuery = z.strictObject({
  after: z.coerce.number().int().min(0).optional()
})

const lastEventId = z.coerce.number().int().min(0)

/** How long an ended stream may take to flush before its socket is destroyed. */
const END_GRACE_MS = 2000

export async function eventRoutes (app: FastifyInstance, options: EventRoutesOptions): Promise<void> {
  const { manager } = options
  const streams = new Set<SseClient>()

  app.get('/v1/sessions/:id/events', async (request, reply) => {
    const query = parseOr400(eventsQuery, request.query)
    const session = await findSession(manager, request)
    let page: HistoryPage
    try {
      page = await readHistoryPage(session.events, query.after, query.limit, options.historyPageMaxBytes)
    } catch (err) {
      request.log.warn({ err }, 'event history read failed')
      throw new GatewayError('store_unavailable')
    }
    const events = page.events
    const last = events[events.length - 1]?.seq ?? null
    // More exists when the byte budget cut the page, or when it stopped short of
    // what was committed (the count limit, or the store's part ended where frames
    // held in memory begin).
    const hasMore = last !== null && (page.cut || last < session.events.committedSeq)
    // Joined, not re-serialised: each stored frame is already the JSON text clients received.
    const body = `{"events":[${events.map((e) => e.frame).join(',')}],"has_more":${hasMore},"next_after":${last ?? 'null'}}`
    return reply.type('application/json; charset=utf-8').send(body)
  })

  app.get('/v1/sessions/:id/events/stream', async (request, reply) => {
    const query = parseOr400(streamQuery, request.query)
    const after = resumePoint(request) ?? query.after ?? 0
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
    const release = (): void => {
      if (done) return
      done = true
      releaseSlot()
      clearInterval(heartbeat)
      streams.delete(client)
      session.detach(client)
    }
    // Ended by us (slow reader, shutdown) or closed by the peer: detach at once either way.
    const client = new SseClient(res, options.maxBufferedBytes, release)
    streams.add(client)
    const heartbeat = setInterval(() => client.tick(options.keepaliveIntervalMs), options.keepaliveIntervalMs)
    heartbeat.unref()
    res.once('close', () => client.end('closed'))

    session.attach(client, { role: 'observer', after }).catch((err: unknown) => {
      request.log.error({ err }, 'event stream attach failed')
      client.end('attach failed')
    })
  })

  // Hijacked responses are never idle, so the server would wait for them at close.
  app.addHook('preClose', async () => {
    for (const client of streams) client.end('gateway shutting down')
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

/** An SSE response as a session's ClientPort. */
class SseClient implements ClientPort {
  readonly id = randomUUID()
  readonly #res: ServerResponse
  readonly #maxBuffered: number
  readonly #onEnd: () => void
  /** Replays waiting for the response to drain; settled on drain, close or end. */
  readonly #waiters = new Set<() => void>()
  /** When the oldest still-waiting replay began to wait. */
  #waitingSince: number | null = null
  #ended = false

  constructor (res: ServerResponse, maxBufferedBytes: number, onEnd: () => void) {
    this.#res = res
    this.#maxBuffered = maxBufferedBytes
    this.#onEnd = onEnd
  }

  send (data: string | Buffer): void {
    if (this.#ended) return
    const frame = typeof data === 'string' ? data : data.toString('utf8')
    const seq = seqOf(frame)
    this.#write(seq === null ? `event: gateway\n${dataLines(frame)}\n` : `id: ${seq}\n${dataLines(frame)}\n`)
  }

  /**
   * Null unless the response's buffer is past its high-water mark; then a
   * promise settled once it drains (or the stream ends). The session's replay
   * waits on it, so a long history reaches a reading client without passing
   * the backlog bound; live frames are not held back.
   */
  writable (): Promise<void> | null {
    const res = this.#res
    if (this.#ended || res.destroyed || !res.writableNeedDrain) return null
    this.#waitingSince ??= Date.now()
    return new Promise((resolve) => {
      const done = (): void => {
        res.off('drain', done)
        res.off('close', done)
        this.#waiters.delete(done)
        if (this.#waiters.size === 0) this.#waitingSince = null
        resolve()
      }
      this.#waiters.add(done)
      res.on('drain', done)
      res.on('close', done)
    })
  }

  /**
   * Heartbeat: a `: keep-alive` comment. A replay that has waited a whole
   * interval for the client to read ends the stream instead: meanwhile the
   * session holds its live frames, so a stalled reader must not keep it.
   */
  tick (intervalMs: number): void {
    if (this.#waitingSince !== null && Date.now() - this.#waitingSince >= intervalMs) {
      this.end('slow consumer: reconnect with Last-Event-ID')
      return
    }
    this.#write(': keep-alive\n\n')
  }

  /** Ends the stream (no-op once ended); a peer that does not read is cut off after a grace period. */
  end (why: string): void {
    if (this.#ended) return
    this.#ended = true
    const res = this.#res
    if (!res.destroyed && !res.writableEnded) {
      res.end(`: ${why}\n\n`)
      const timer = setTimeout(() => res.destroy(), END_GRACE_MS)
      timer.unref()
      res.once('close', () => clearTimeout(timer))
    }
    for (const done of [...this.#waiters]) done()
    this.#onEnd()
  }

  #write (chunk: string): void {
    if (this.#ended) return
    if (!this.#res.write(chunk) && this.#res.writableLength > this.#maxBuffered) {
      this.end('slow consumer: reconnect with Last-Event-ID')
    }
  }
}

const CLI_SEQ = /^\{"seq":(\d+)[,}]/
const GATEWAY_SEQ = /^\{"type":"gateway","subtype":"[^"\\]*","seq":(\d+)[,}]/

/**
 * The seq of a frame, or null for unrecorded ones (hello, holder, store,
 * error). session/frames.ts puts `seq` first in relayed CLI lines and third
 * in recorded gateway frames, so those are read without parsing; anything
 * else (the few unrecorded frames, CLI lines that had a `seq` of their own)
 * is parsed.
 */
function seqOf (frame: string): number | null {
  const match = CLI_SEQ.exec(frame) ?? GATEWAY_SEQ.exec(frame)
  if (match !== null) return Number(match[1])
  try {
    const parsed = JSON.parse(frame) as { seq?: unknown }
    return typeof parsed.seq === 'number' ? parsed.seq : null
  } catch {
    return null
  }
}

/** `data:` lines for a frame. JSON text holds CR/LF only as whitespace, so splitting there keeps it equivalent. */
function dataLines (frame: string): string {
  if (!/[\r\n]/.test(frame)) return `data: ${frame}\n`
  return frame.split(/\r\n|\r|\n/).map((line) => `data: ${line}\n`).join('')
}
