/**
 * `GET /v1/sessions/:id/ws`: attaches a WebSocket client to a session.
 * Authentication, the session lookup and query validation happen before the
 * upgrade, so a refused client gets a plain HTTP status, not a socket.
 */
import type { FastifyInstance } from 'fastify'
import type { RawData } from 'ws'
import type { TicketBook } from '../auth/tickets.js'
import { controlErrorFrame } from '../control/control-error.js'
import { GatewayError, closeCodes, errorTable } from '../errors.js'
import { parseClientFrame } from '../protocol/client-frames.js'
import { wsQuery } from '../protocol/session-options.js'
import { errorFrame } from '../session/frames.js'
import type { TenantConnections } from '../net/tenant-connections.js'
import type { Session } from '../session/session.js'
import type { SessionManager } from '../session/session-manager.js'
import { FrameRateLimiter } from '../ws/frame-rate-limiter.js'
import type { Heartbeat } from '../ws/heartbeat.js'
import { WsClient } from '../ws/ws-client.js'
import { findSession } from './sessions.js'
import { parseOr400 } from './validate.js'

/** Frames held before a client's hello; later ones are answered `rate_limited` once it is out. */
const EARLY_FRAMES_MAX = 256

export interface WsRoutesOptions {
  manager: SessionManager
  heartbeat: Heartbeat
  tickets: TicketBook
  maxBufferedBytes: number
  maxClientsPerSession: number
  maxFramesPerSec: number
  /** MAX_CONNECTIONS_PER_TENANT, shared with event streams. */
  tenantConnections: TenantConnections
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set before the upgrade for WebSocket routes. */
    gatewaySession?: Session
    /** Gives back the tenant's connection slot taken before the upgrade. */
    releaseConnection?: () => void
  }
}

export async function wsRoutes (app: FastifyInstance, options: WsRoutesOptions): Promise<void> {
  const { manager, heartbeat } = options

  app.post('/v1/sessions/:id/ws-ticket', async (request, reply) => {
    const session = await findSession(manager, request)
    return reply.code(201).send(options.tickets.issue(request.tenant, session.id))
  })

  app.get('/v1/sessions/:id/ws', {
    websocket: true,
    // Upgrades have their own limits (WS_UPGRADES_PER_MINUTE, …_PER_ADDRESS), checked before
    // anything reads the store; they never spend the tenant's REST budget (RATE_LIMIT_PER_MINUTE).
    config: { rateLimit: false },
    onRequest: app.upgradeLimit,
    preValidation: async (request) => {
      parseOr400(wsQuery, request.query)
      const session = await findSession(manager, request)
      if (session.clientCount >= options.maxClientsPerSession) throw new GatewayError('too_many_clients')
      // Last, so nothing after it can refuse; the socket's close gives it back even if the handshake fails.
      const release = options.tenantConnections.acquire(request.tenant)
      request.raw.socket.once('close', release)
      request.releaseConnection = release
      request.gatewaySession = session
    }
  }, (socket, request) => {
    const session = request.gatewaySession as Session
    const query = wsQuery.parse(request.query)
    const client = new WsClient(socket, options.maxBufferedBytes)
    heartbeat.add(client)
    const limiter = new FrameRateLimiter(options.maxFramesPerSec)

    const refuse = (message: string): void => { client.send(errorFrame('rate_limited', message)) }
    const onMessage = (data: RawData, isBinary: boolean): void => {
      if (isBinary) {
        client.send(errorFrame('binary_not_supported', errorTable.binary_not_supported.message))
        return
      }
      const parsed = parseClientFrame(rawText(data))
      if (!parsed.ok) {
        // A control_request's refusal is its answer (an SDK waits on the request_id); other frames get an error frame.
        client.send(parsed.requestId === undefined ? errorFrame(parsed.code, parsed.message) : controlErrorFrame(parsed.requestId, parsed.code, parsed.message))
        return
      }
      try {
        session.handleFrame(client, parsed.frame)
      } catch (err) {
        // Thrown inside a socket event, this would end the process and every other session with it.
        request.log.error({ err }, 'frame handling failed')
        client.send(errorFrame('internal', errorTable.internal.message))
      }
    }
    // Frames sent before hello (the attach may wait on the store) are held: hello comes first,
    // and they count as the role hello gives the client, not as an observer's.
    let early: Array<() => void> | null = []
    socket.on('message', (data: RawData, isBinary: boolean) => {
      const verdict = limiter.take()
      if (verdict === 'flood') {
        client.close(closeCodes.flood, 'frame flood')
        return
      }
      if (early === null) {
        if (verdict === 'ok') onMessage(data, isBinary)
        else refuse(tooFast(options.maxFramesPerSec))
      } else if (early.length >= EARLY_FRAMES_MAX) {
        early.push(() => refuse(`More than ${EARLY_FRAMES_MAX} frames before hello: frame dropped`))
      } else {
        early.push(verdict === 'ok' ? () => onMessage(data, isBinary) : () => refuse(tooFast(options.maxFramesPerSec)))
      }
    })
    socket.on('close', () => {
      request.releaseConnection?.()
      heartbeat.delete(client)
      session.detach(client)
    })
    socket.on('error', (err) => request.log.debug({ err }, 'websocket error'))

    const onHello = (): void => {
      const held = early ?? []
      early = null
      for (const handle of held) handle()
    }
    session.attach(client, { role: query.role, after: query.after, onHello }).catch((err: unknown) => {
      request.log.error({ err }, 'attach failed')
      client.close(1011, 'attach failed')
    })
  })
}

function tooFast (perSecond: number): string {
  return `More than ${perSecond} frames per second: frame dropped`
}

function rawText (data: RawData): string {
  if (Buffer.isBuffer(data)) return data.toString('utf8')
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8')
  return Buffer.from(data).toString('utf8')
}
