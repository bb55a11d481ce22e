/**
 * Every error the app answers, in the one body of the error table: its own
 * GatewayErrors, failed route schemas, Fastify's own client errors, unknown
 * routes and malformed URLs. Apart from app.ts so building the app and
 * shaping its error answers are read separately.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { type ErrorCode, GatewayError, errorTable } from '../errors.js'
import { validationError } from '../routes/validate.js'

/** The table's code for each status Fastify's own client errors carry (the rest are `bad_request`). */
const CLIENT_ERRORS: Partial<Record<number, ErrorCode>> = { 404: 'not_found', 413: 'payload_too_large', 415: 'unsupported_media_type', 429: 'rate_limited' }

/** Sets the app's error and not-found handlers. */
export function errorReplies (app: FastifyInstance): void {
  app.setErrorHandler((err: Error & { statusCode?: number, code?: string }, request, reply) => {
    if (err instanceof GatewayError) return reply.code(err.statusCode).send(err.toJSON())
    // A request that fails its route schema: 400 `bad_request` naming the first offending field.
    const invalid = validationError(err)
    if (invalid !== null) return reply.code(invalid.statusCode).send(invalid.toJSON())
    const status = err.statusCode ?? 500
    if (status >= 500) {
      request.log.error({ err }, 'request failed')
      return reply.code(500).send(new GatewayError('internal').toJSON())
    }
    // Fastify's own 4xx errors, each under the table's code for its status: a client reads the two together.
    const code = CLIENT_ERRORS[status] ?? 'bad_request'
    const known = errorTable[code].statusCode
    return reply.code(known).send({ statusCode: known, code, message: err.message })
  })
  app.setNotFoundHandler((_request, reply) => reply.code(404).send(new GatewayError('not_found').toJSON()))
}

/** Fastify's `frameworkErrors`: the router's own errors (a malformed %-escape in the URL) get the same body as every other error. */
export function frameworkErrorReply (_err: Error, request: FastifyRequest, reply: FastifyReply): void {
  // An upgrade's socket belongs to no HTTP connection, and no hook runs here to end it (as
  // @fastify/websocket's onResponse does): it would stay open, holding a MAX_CONNECTIONS place.
  if ((request.raw as { upgrade?: boolean }).upgrade === true) reply.raw.once('finish', () => request.raw.socket.destroy())
  void reply.code(400).send(new GatewayError('bad_request', 'The URL is not valid').toJSON())
}
