/**
 * `GET /metrics` on the main port (METRICS_PORT=0): Prometheus exposition
 * text of src/metrics/metrics.ts. With METRICS_TOKEN only that token may
 * scrape (`Authorization: Bearer`); without it a tenant's token (any tenant),
 * as for /v1 routes: the numbers are gateway-wide but name no session,
 * client or tenant. The security plugin runs either check, so failures count
 * towards the same per-address lockout (docs/SECURITY.md).
 */
import type { FastifyInstance } from 'fastify'
import { z } from 'zod'
import { tokenCheck } from '../metrics/metrics-server.js'
import { authErrors, errorResponses } from './schemas.js'

export interface MetricsRoutesOptions {
  scrape: () => Promise<{ contentType: string, body: string }>
  /** METRICS_TOKEN, or null for tenant authentication. */
  token: string | null
}

export async function metricsRoutes (app: FastifyInstance, options: MetricsRoutesOptions): Promise<void> {
  const matches = options.token === null ? null : tokenCheck(options.token)
  app.get('/metrics', {
    config: { auth: matches === null ? 'tenant' : (request) => matches(request.headers.authorization) },
    schema: {
      summary: 'Prometheus metrics (docs/API.md, Metrics)',
      description: 'Credentials: `Authorization: Bearer <METRICS_TOKEN>` when METRICS_TOKEN is set, else a tenant\'s token. With METRICS_PORT set, served on that port instead (this one answers 404).',
      // Documentation only: the exposition goes out as text, which Fastify does not serialize.
      response: {
        200: { description: 'Prometheus text format', content: { 'text/plain; version=0.0.4': { schema: z.string() } } },
        ...errorResponses(...authErrors)
      }
    }
  }, async (_request, reply) => {
    const { contentType, body } = await options.scrape()
    return reply.type(contentType).send(body)
  })
}
