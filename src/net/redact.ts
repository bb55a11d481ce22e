/**
 * The request as logged, with credential-bearing query values blanked. A
 * client may wrongly put a token in `?token=`, and `?ticket=` is a live
 * credential until redeemed: neither may reach a log file with the URL.
 */
import type { FastifyRequest } from 'fastify'

const SECRET_PARAMS = /([?&](?:token|ticket|access_token)=)[^&#]*/gi

/** `url` with the values of token/ticket/access_token parameters replaced by `[REDACTED]`. */
export function redactUrl (url: string): string {
  return url.replace(SECRET_PARAMS, '$1[REDACTED]')
}

/** pino serializer for `req` (the fields Fastify logs by default, with the URL redacted). */
export function redactedRequest (req: FastifyRequest): Record<string, unknown> {
  return {
    method: req.method,
    url: typeof req.url === 'string' ? redactUrl(req.url) : req.url,
    host: req.host,
    remoteAddress: req.ip,
    remotePort: req.socket?.remotePort
  }
}
