/**
 * Who may reach the gateway, checked before any route runs:
 * - Host allowlist while bound to loopback (stops DNS rebinding: a web page
 *   on evil.example resolving to 127.0.0.1 still sends `Host: evil.example`);
 * - Origin allowlist for browsers (stops cross-site WebSocket hijacking and
 *   cross-origin REST calls); requests without Origin are not from a browser
 *   page and pass to authentication. The gateway's own origin (an Origin whose
 *   host is the request's Host: the web console it serves at `/`) passes too;
 *   it holds no credentials of its own (tokens are bearer, never cookies);
 * - authentication for every `/v1` route: `Authorization: Bearer`, a
 *   `bearer.<token>` Sec-WebSocket-Protocol entry, or a single-use `?ticket=`
 *   on the WebSocket route;
 * - REST rate limit per tenant, and a limit on failed authentications per
 *   client address (`request.ip`: behind a proxy listed in TRUST_PROXY, the
 *   client it forwards for, so one client's lockout never blocks the others);
 * - WebSocket upgrades counted apart, per tenant and per client address
 *   (`app.upgradeLimit`, the WebSocket route's hook): a reconnect storm is
 *   refused upgrades without spending the tenant's REST budget, and REST
 *   calls never spend the upgrade budget.
 *
 * A route outside /v1 is public (/healthz, /readyz, /openapi.json, the web
 * console's `/` and `/console/<file>`) unless its route config says `auth`:
 * `'tenant'` as /v1, or its own check (GET /metrics with METRICS_TOKEN).
 * Failed checks count towards the same lockout either way.
 * Refusals are counted in `metrics` (/metrics).
 */
import cors from '@fastify/cors'
import rateLimit, { normalizeIP } from '@fastify/rate-limit'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { type Authenticator, bearerToken } from '../auth/static-tokens.js'
import type { TicketBook } from '../auth/tickets.js'
import { GatewayError } from '../errors.js'
import { type MetricsSink, noopMetrics } from '../metrics/sink.js'
import { isLoopback } from '../net/loopback.js'

export interface SecurityOptions {
  authenticator: Authenticator
  tickets: TicketBook
  allowedOrigins: string[]
  /** Host names accepted when `loopbackOnly`; empty means any. */
  allowedHosts: string[]
  loopbackOnly: boolean
  rateLimitPerMinute: number
  /** Failed authentications per client address per minute before it gets 429 (guessing tokens). */
  authFailuresPerMinute: number
  /** WebSocket upgrades per tenant per minute (WS_UPGRADES_PER_MINUTE). */
  wsUpgradesPerMinute: number
  /** WebSocket upgrades per client address per minute, whatever the tenant (WS_UPGRADES_PER_MINUTE_PER_ADDRESS). */
  wsUpgradesPerMinutePerAddress: number
  /**
   * Also accept an Origin naming the gateway itself (http or https, host and
   * port equal to the request's Host): the console's page calling its own
   * gateway. Default true.
   */
  sameOrigin?: boolean
  /** Counts failed authentications and rate-limit refusals (default: nothing). */
  metrics?: Pick<MetricsSink, 'authFailed' | 'rateLimited'>
}

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * The WebSocket route's onRequest hook (after authentication, before the
     * upgrade): 429 `rate_limited` with retry-after past either upgrade limit.
     * The route opts out of the REST limit (`config: { rateLimit: false }`).
     */
    upgradeLimit: (request: FastifyRequest, reply: FastifyReply) => Promise<void>
  }
  interface FastifyRequest {
    /**
     * The bearer credential (token or JWT) the request was authenticated
     * with, or that its ticket was issued to; null for a ticket of an older
     * node, a route's own check, or a public route. Long-lived
     * connections keep it, so a credential reload can end theirs (src/auth/live-credentials.ts).
     */
    credential: string | null
    /** The authenticator's `generation` when the request was authenticated (a long-lived connection lists it). */
    credentialGeneration: number
  }
  interface FastifyContextConfig {
    /**
     * How a route outside /v1 is authenticated: `'tenant'` as /v1 routes
     * (request.tenant is set), or by the route's own check of the request
     * (true: allowed). Unset: public. /v1 routes are always `'tenant'`.
     */
    auth?: 'tenant' | ((request: FastifyRequest) => boolean)
  }
}

/** Subprotocol entry carrying a token, for browsers: `new WebSocket(url, ['claude-gateway.v1', 'bearer.' + token])`. */
export const TOKEN_PROTOCOL_PREFIX = 'bearer.'
export const GATEWAY_PROTOCOL = 'claude-gateway.v1'

const WS_ROUTE = /^\/v1\/sessions\/([^/?]+)\/ws(?:\?|$)/

async function security (app: FastifyInstance, o: SecurityOptions): Promise<void> {
  const hosts = new Set(['localhost', '127.0.0.1', '[::1]', ...o.allowedHosts].map((h) => h.toLowerCase()))
  const origins = new Set(o.allowedOrigins)
  const failures = new FailureWindow(o.authFailuresPerMinute, 60_000)
  const metrics = o.metrics ?? noopMetrics
  const sameOrigin = o.sameOrigin ?? true

  app.decorateRequest('credential', null)
  app.decorateRequest('credentialGeneration', 0)
  app.addHook('onRequest', async (request) => {
    // Any loopback address literal is fine too (a rebinding page sends its own name, never an address).
    const host = hostName(request.headers.host)
    if (o.loopbackOnly && !hosts.has(host) && !isLoopback(host)) {
      throw new GatewayError('forbidden_host')
    }
    const origin = request.headers.origin
    if (origin !== undefined && !origins.has(origin) && !(sameOrigin && isOwnOrigin(origin, request.host))) throw new GatewayError('forbidden_origin')
    // Decided by the route Fastify matched, not the raw URL: `/%761/sessions` or an
    // absolute-form target (`GET http://host/v1/sessions`) reach /v1 handlers too.
    // Unmatched URLs (404) fall back to the raw path.
    const route = request.routeOptions.url
    const auth = (route ?? request.url).startsWith('/v1/') ? 'tenant' : request.routeOptions.config?.auth
    if (auth === undefined) return
    if (failures.blocked(request.ip)) {
      metrics.rateLimited('auth_lockout')
      throw new GatewayError('rate_limited', 'Too many failed authentications from this address; retry in a minute')
    }
    const tenant = auth === 'tenant' ? await authenticate(request) : auth(request) ? '' : null
    if (tenant === null) {
      failures.add(request.ip)
      metrics.authFailed(credentialsGiven(request) ? 'invalid' : 'missing')
      throw new GatewayError('unauthorized')
    }
    request.tenant = tenant
  })

  /** Whether the request carried anything meant as credentials (for the failure's reason only). */
  function credentialsGiven (request: FastifyRequest): boolean {
    if (request.headers.authorization !== undefined) return true
    if (!WS_ROUTE.test(request.url)) return false
    return typeof (request.query as Record<string, unknown>).ticket === 'string' || protocolToken(request.headers['sec-websocket-protocol']) !== null
  }

  async function authenticate (request: FastifyRequest): Promise<string | null> {
    // Before any check: a reload during one (or before the route lists the connection) is then seen.
    request.credentialGeneration = o.authenticator.generation ?? 0
    const header = bearerToken(request.headers.authorization)
    if (header !== null) {
      request.credential = header
      return o.authenticator.authenticate(header)
    }
    const ws = WS_ROUTE.exec(request.url)
    if (ws === null) return null
    const ticket = (request.query as Record<string, unknown>).ticket
    if (typeof ticket === 'string') {
      const granted = await o.tickets.redeem(ticket, decodeURIComponent(ws[1] as string).toLowerCase())
      if (granted === null || granted.credential === null) return granted?.tenant ?? null
      // Revoked since the ticket was issued, it opens nothing; else the socket is listed with it.
      if (await o.authenticator.authenticate(granted.credential) !== granted.tenant) return null
      request.credential = granted.credential
      return granted.tenant
    }
    const fromProtocol = protocolToken(request.headers['sec-websocket-protocol'])
    if (fromProtocol === null) return null
    request.credential = fromProtocol
    return o.authenticator.authenticate(fromProtocol)
  }

  await app.register(cors, {
    origin: [...origins],
    methods: ['GET', 'POST', 'DELETE'],
    allowedHeaders: ['authorization', 'content-type', 'last-event-id'],
    maxAge: 600
  })

  await app.register(rateLimit, {
    max: o.rateLimitPerMinute,
    timeWindow: 60_000,
    hook: 'preHandler', // after authentication, so the key is the tenant
    keyGenerator: (request) => request.tenant !== '' ? `tenant:${request.tenant}` : `ip:${request.ip}`,
    allowList: (request) => request.url === '/healthz' || request.url === '/readyz',
    onExceeded: () => metrics.rateLimited('rest'),
    errorResponseBuilder: (_request, context) => ({
      statusCode: 429,
      code: 'rate_limited',
      message: `Rate limit of ${context.max} requests per minute exceeded; retry in ${context.after}`
    })
  })

  // Limiters of the plugin's own store, checked by hand: two limits on one route, which
  // per-route `config.rateLimit` hooks cannot do (the first to run marks the request done).
  const upgradeLimits = [
    { what: 'from this address', setting: 'WS_UPGRADES_PER_MINUTE_PER_ADDRESS', check: app.createRateLimit({ max: o.wsUpgradesPerMinutePerAddress, timeWindow: 60_000, keyGenerator: addressKey }) },
    { what: 'for this tenant', setting: 'WS_UPGRADES_PER_MINUTE', check: app.createRateLimit({ max: o.wsUpgradesPerMinute, timeWindow: 60_000, keyGenerator: (request) => `ws-tenant:${request.tenant}` }) }
  ]
  app.decorate('upgradeLimit', async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    // The address first: one noisy address is stopped before it spends its tenant's budget.
    for (const limit of upgradeLimits) {
      const verdict = await limit.check(request)
      if (verdict.isAllowed || !verdict.isExceeded) continue
      metrics.rateLimited('ws_upgrade')
      void reply.header('retry-after', String(verdict.ttlInSeconds))
      throw new GatewayError('rate_limited', `More than ${verdict.max} WebSocket upgrades per minute ${limit.what} (${limit.setting}); retry in ${verdict.ttlInSeconds} s`)
    }
  })
}

/**
 * The per-address upgrade limit's key. `request.ip` is undefined when the
 * client reset its socket before the request was handled (getpeername fails):
 * such requests share one key instead of failing with a TypeError (a 500 and
 * an error log per reset).
 */
function addressKey (request: FastifyRequest): string {
  const ip = request.ip as string | undefined
  return ip === undefined ? 'ws-address:unknown' : `ws-address:${normalizeIP(ip)}`
}

/** Fixed one-minute windows of failed authentications per address. */
class FailureWindow {
  readonly #limit: number
  readonly #windowMs: number
  readonly #counts = new Map<string, { count: number, since: number }>()

  constructor (limit: number, windowMs: number) {
    this.#limit = limit
    this.#windowMs = windowMs
  }

  blocked (ip: string): boolean {
    const entry = this.#counts.get(ip)
    return entry !== undefined && Date.now() - entry.since < this.#windowMs && entry.count >= this.#limit
  }

  add (ip: string): void {
    const now = Date.now()
    const entry = this.#counts.get(ip)
    if (entry === undefined || now - entry.since >= this.#windowMs) {
      if (this.#counts.size > 10_000) this.#sweep(now)
      this.#counts.set(ip, { count: 1, since: now })
    } else {
      entry.count++
    }
  }

  #sweep (now: number): void {
    for (const [ip, entry] of this.#counts) if (now - entry.since >= this.#windowMs) this.#counts.delete(ip)
  }
}

/**
 * Whether `origin` is this gateway as the browser reached it: its host[:port]
 * is the request's Host (or the X-Forwarded-Host of a TRUST_PROXY proxy, as
 * Fastify's `request.host` reads it). The scheme is not compared: a proxy
 * ending TLS makes the page https while the gateway sees http.
 */
function isOwnOrigin (origin: string, host: string | undefined): boolean {
  if (host === undefined || host === '') return false
  let url: URL
  try {
    url = new URL(origin)
  } catch {
    return false // `null` (sandboxed frames, file: pages) and garbage
  }
  return (url.protocol === 'http:' || url.protocol === 'https:') && url.origin === origin && url.host === host.toLowerCase()
}

function hostName (host: string | undefined): string {
  if (host === undefined) return ''
  const h = host.toLowerCase()
  if (h.startsWith('[')) return h.slice(0, h.indexOf(']') + 1)
  const colon = h.lastIndexOf(':')
  return colon === -1 ? h : h.slice(0, colon)
}

function protocolToken (header: string | undefined): string | null {
  if (header === undefined) return null
  for (const entry of header.split(',')) {
    const value = entry.trim()
    if (value.startsWith(TOKEN_PROTOCOL_PREFIX)) return value.slice(TOKEN_PROTOCOL_PREFIX.length)
  }
  return null
}

export default fp(security, { name: 'gateway-security' })
