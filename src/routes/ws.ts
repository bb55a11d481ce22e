/**
 * `GET /v1/sessions/:id/ws`: attaches a WebSocket client to a session.
 * Authentication, the session lookup and query validation happen before the
 * upgrade, so a refused client gets a plain HTTP status, not a socket.
 *
 * An open socket keeps only what it needs (the client, its session, the
 * request id for logs): not Fastify's request and reply, their logger, the
 * headers or the upgrade's read buffer, which would otherwise live as long as
 * the socket (several KiB per idle client). Per-frame work is in plain
 * functions, and the frame limiter and the early-frame list are made on the
 * first frame.
 */
import type { FastifyBaseLogger, FastifyInstance, FastifyRequest } from 'fastify'
import { type ZodTypeProvider, jsonSchemaTransform } from 'fastify-type-provider-zod'
import type { ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { RawData, WebSocket } from 'ws'
import { z } from 'zod'
import type { Listed, LiveCredentials } from '../auth/live-credentials.js'
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
import { authErrors, errorResponses, sessionParams, wsTicketBody } from './schemas.js'
import { credentialFrame, presentCredential } from './ws-credential.js'
import { findSession, sessionErrors } from './sessions.js'
import { emptyJsonIsNoBody } from './validate.js'

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
  /** Lists each socket opened with a bearer credential, so a credential reload ends those it no longer admits. */
  credentials?: LiveCredentials | undefined
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set before the upgrade for WebSocket routes. */
    gatewaySession?: Session
    /** Gives back the tenant's connection slot taken before the upgrade. */
    releaseConnection?: () => void
  }
}

export async function wsRoutes (fastify: FastifyInstance, options: WsRoutesOptions): Promise<void> {
  const { manager, heartbeat } = options
  const app = fastify.withTypeProvider<ZodTypeProvider>()
  emptyJsonIsNoBody(app)

  app.post('/v1/sessions/:id/ws-ticket', {
    schema: {
      tags: ['websocket'],
      summary: 'A single-use credential for the WebSocket upgrade (`?ticket=`), for clients that cannot send headers',
      params: sessionParams,
      response: { 201: wsTicketBody.describe('A ticket valid WS_TICKET_TTL_MS'), ...sessionErrors, ...errorResponses('bad_request') }
    }
  }, async (request, reply) => {
    const session = await findSession(manager, request)
    return reply.code(201).send(options.tickets.issue(request.tenant, session.id, request.credential))
  })

  app.route({
    method: 'GET',
    url: '/v1/sessions/:id/ws',
    websocket: true,
    // Upgrades have their own limits (WS_UPGRADES_PER_MINUTE, …_PER_ADDRESS), checked before
    // anything reads the store; they never spend the tenant's REST budget (RATE_LIMIT_PER_MINUTE).
    // @fastify/websocket marks its routes `hide`; this one is documented, as an upgrade (101).
    config: { rateLimit: false, swaggerTransform: (route) => jsonSchemaTransform({ ...route, schema: { ...route.schema, hide: false } }) },
    onRequest: app.upgradeLimit,
    schema: {
      tags: ['websocket'],
      summary: 'Attach to the session over WebSocket (docs/PROTOCOL.md)',
      description: 'An upgrade request (`Sec-WebSocket-Protocol: claude-gateway.v1`). Credentials: `Authorization: Bearer`, a `bearer.<token>` subprotocol entry, or `?ticket=` from POST /v1/sessions/:id/ws-ticket. Refusals are plain HTTP answers before the upgrade.',
      security: [{ bearerAuth: [] }, { wsTicket: [] }],
      params: sessionParams,
      querystring: wsQuery,
      response: {
        101: z.undefined().describe('Switching Protocols: the WebSocket of docs/PROTOCOL.md'),
        ...errorResponses(...authErrors, 'bad_request', 'session_not_found', 'too_many_clients', 'tenant_connection_limit', 'store_unavailable')
      }
    },
    // After the schema's check of the query, so a bad query is answered 400 before the store is read.
    preHandler: async (request) => {
      // A plain GET (or HEAD) would take a connection slot that only its TCP connection's close
      // gives back: a keep-alive client would hold one per request and lock its tenant out.
      if (!request.ws) throw new GatewayError('bad_request', 'This route is a WebSocket upgrade (Connection: Upgrade, Upgrade: websocket)')
      const session = await findSession(manager, request)
      if (session.clientCount >= options.maxClientsPerSession) throw new GatewayError('too_many_clients')
      // Last, so nothing after it can refuse; the socket's close gives it back even if the handshake fails.
      const release = options.tenantConnections.acquire(request.tenant)
      request.raw.socket.once('close', release)
      // Gone during the lookup: its 'close' may have come before the listener above.
      if (request.raw.socket.destroyed) release()
      request.releaseConnection = release
      request.gatewaySession = session
    },
    handler: (socket, request) => {
      const session = request.gatewaySession as Session
      const query = request.query
      // The constant, not the query's copy of it: the session keeps it as long as the client.
      const role = query.role === 'observer' ? 'observer' : 'controller'
      const release = request.releaseConnection
      // Logged with the request's id on the app's logger: the request's own child logger would keep the request.
      const log = app.log
      const reqId = request.id
      const raw = request.raw.socket as Socket
      const credential = request.credential
      const checkedAt = request.credentialGeneration
      const tenant = request.tenant
      forgetRequest(socket, request)
      const client = new WsClient(socket, raw, options.maxBufferedBytes)
      const listed = credential === null || options.credentials === undefined
        ? undefined
        : options.credentials.add({
          tenant,
          credential,
          checkedAt,
          end: (why) => {
            if (why === 'expired') client.end('credential_expired', 'the credential this connection lives by has expired; send a newer one before it does')
            else if (why === 'refused') client.end('credential_revoked', 'too many credentials refused on this connection')
            else client.end('credential_revoked', 'the credential this connection was opened with is no longer valid')
          }
        })
      heartbeat.add(client)
      const perSecond = options.maxFramesPerSec
      let limiter: FrameRateLimiter | null = null

      // Frames sent before hello (the attach may wait on the store) are held: hello comes first,
      // and they count as the role hello gives the client, not as an observer's.
      let greeted = false
      let early: Array<() => void> | null = null
      socket.on('message', (data: RawData, isBinary: boolean) => {
        const verdict = (limiter ??= new FrameRateLimiter(perSecond)).take()
        manager.metrics.clientFrame(verdict)
        if (verdict === 'flood') {
          client.close(closeCodes.flood, 'frame flood')
          return
        }
        if (greeted) {
          if (verdict === 'ok') onFrame(client, session, listed, log, reqId, data, isBinary)
          else refuse(client, tooFast(perSecond))
          return
        }
        early ??= []
        if (early.length >= EARLY_FRAMES_MAX) {
          early.push(() => refuse(client, `More than ${EARLY_FRAMES_MAX} frames before hello: frame dropped`))
        } else {
          early.push(verdict === 'ok' ? () => onFrame(client, session, listed, log, reqId, data, isBinary) : () => refuse(client, tooFast(perSecond)))
        }
      })
      socket.on('close', () => {
        listed?.unlist()
        release?.()
        heartbeat.delete(client)
        session.detach(client)
      })
      // In place of @fastify/websocket's (see forgetRequest), doing what its default error handler does.
      socket.on('error', (err) => {
        log.error({ reqId, err }, 'websocket error')
        socket.terminate()
      })

      const onHello = (): void => {
        greeted = true
        // JWT_EXPIRY_ENDS_CONNECTIONS: the client learns its deadline, to present a newer credential before it.
        if (listed !== undefined && listed.expiresAt !== null) client.send(credentialFrame(listed.expiresAt))
        const held = early
        early = null
        if (held !== null) for (const handle of held) handle()
      }
      session.attach(client, { role, rejoin: query.rejoin === 'true', after: query.after, onHello }).catch((err: unknown) => {
        log.error({ reqId, err }, 'attach failed')
        client.close(1011, 'attach failed')
      })
    }
  })
}

/**
 * Lets go of what ties the open socket to its upgrade request.
 * @fastify/websocket answers the upgrade through a ServerResponse that it
 * assigns to the connection and never ends (ws writes the 101 itself): the
 * connection would hold it, and through it the request with its headers and
 * the read buffer the upgrade came in, for as long as it is open. Its
 * 'error' listener on the socket holds the request and reply too: removed
 * here (the route adds its own).
 */
function forgetRequest (socket: WebSocket, request: FastifyRequest): void {
  const raw = request.raw.socket as Socket & { _httpMessage?: ServerResponse | null }
  const response = raw._httpMessage
  if (response != null && response.socket === raw) response.detachSocket(raw)
  // From here the WebSocket's 'close' gives the tenant's connection slot back.
  if (request.releaseConnection !== undefined) raw.removeListener('close', request.releaseConnection)
  socket.removeAllListeners('error')
}

function refuse (client: WsClient, message: string): void {
  client.send(errorFrame('rate_limited', message))
}

function onFrame (client: WsClient, session: Session, listed: Listed | undefined, log: FastifyBaseLogger, reqId: string, data: RawData, isBinary: boolean): void {
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
  if (parsed.frame.type === 'other_type' && parsed.frame.value.type === 'credential') {
    presentCredential(client, listed, parsed.frame.value, log, reqId)
    return
  }
  try {
    session.handleFrame(client, parsed.frame)
  } catch (err) {
    // Thrown inside a socket event, this would end the process and every other session with it.
    log.error({ reqId, err }, 'frame handling failed')
    client.send(errorFrame('internal', errorTable.internal.message))
  }
}

function tooFast (perSecond: number): string {
  return `More than ${perSecond} frames per second: frame dropped`
}

function rawText (data: RawData): string {
  if (Buffer.isBuffer(data)) return data.toString('utf8')
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8')
  return Buffer.from(data).toString('utf8')
}
