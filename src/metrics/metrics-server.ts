/**
 * GET /metrics on a port of its own (METRICS_PORT): a plain node:http
 * listener on the gateway's host, so a scraper can be let in by the network
 * (a port only the monitoring network reaches) without any tenant token,
 * and the main port's limits and authentication never see scrapes. With
 * METRICS_TOKEN it asks for `Authorization: Bearer <METRICS_TOKEN>` as the
 * main port does.
 */
import { createHash, timingSafeEqual } from 'node:crypto'
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http'
import { bearerToken } from '../auth/static-tokens.js'
import { listenError } from '../config/values.js'
import { GatewayError } from '../errors.js'
import type { MetricsSink } from './sink.js'

export interface MetricsServerOptions {
  host: string
  port: number
  /** METRICS_TOKEN; null: anyone who reaches the port may scrape. */
  token: string | null
  scrape: () => Promise<{ contentType: string, body: string }>
  /** Counts wrong or missing tokens. */
  metrics: Pick<MetricsSink, 'authFailed'>
}

/** Resolves once listening; rejects with a ConfigError naming METRICS_PORT when the port cannot be had (the gateway then does not start). */
export async function listenMetrics (o: MetricsServerOptions): Promise<Server> {
  const allowed = o.token === null ? () => true : tokenCheck(o.token)
  const server = createServer((req, res) => { void answer(req, res) })
  // A scrape is one short request; nothing may hold a socket open for long.
  server.requestTimeout = 10_000
  server.headersTimeout = 10_000

  async function answer (req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '').split('?')[0]
    if (path !== '/metrics') return json(res, new GatewayError('not_found'))
    if (req.method !== 'GET' && req.method !== 'HEAD') return json(res, new GatewayError('not_found'))
    if (!allowed(req.headers.authorization)) {
      o.metrics.authFailed(req.headers.authorization === undefined ? 'missing' : 'invalid')
      return json(res, new GatewayError('unauthorized'))
    }
    try {
      const { contentType, body } = await o.scrape()
      res.writeHead(200, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) })
      res.end(req.method === 'HEAD' ? undefined : body)
    } catch {
      json(res, new GatewayError('internal'))
    }
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) => { reject(listenError('METRICS_PORT', o.host, o.port, err) ?? err) })
    server.listen(o.port, o.host, () => {
      server.removeAllListeners('error')
      resolve()
    })
  })
  return server
}

/**
 * Whether an Authorization header is `Bearer <token>`, compared in constant
 * time (digests of equal length, so neither content nor length leaks).
 */
export function tokenCheck (token: string): (authorization: string | undefined) => boolean {
  const expected = digest(token)
  return (authorization) => {
    const given = bearerToken(authorization)
    // A missing token is compared too: every refusal costs the same.
    return timingSafeEqual(expected, digest(given ?? '')) && given !== null
  }
}

function digest (text: string): Buffer {
  return createHash('sha256').update(text).digest()
}

function json (res: ServerResponse, err: GatewayError): void {
  const body = JSON.stringify(err.toJSON())
  res.writeHead(err.statusCode, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) })
  res.end(body)
}
