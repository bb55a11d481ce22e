/**
 * Route input checks around the zod route schemas (fastify-type-provider-zod):
 * a failure is a 400 `bad_request` naming the first offending field, the
 * same answer whichever part of the request (params, body, query) failed.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod'
import { GatewayError } from '../errors.js'
import { MAX_JSON_DEPTH, tooDeep } from '../protocol/client-frames.js'

/**
 * preValidation hook of routes with a JSON body schema. No body (or JSON
 * `null`) is an empty object. zod's z.json() and JSON.stringify recurse:
 * deep nesting is refused before either runs.
 */
export async function jsonBody (request: FastifyRequest): Promise<void> {
  request.body ??= {}
  if (tooDeep(request.body)) throw new GatewayError('bad_request', `nested more than ${MAX_JSON_DEPTH} levels deep`)
}

/**
 * In the calling plugin's scope: an empty `application/json` body is no body
 * (what many clients send for a POST without data), where Fastify's parser
 * answers 400. Any other body goes to that parser (prototype keys refused).
 */
export function emptyJsonIsNoBody (app: FastifyInstance): void {
  const json = app.getDefaultJsonParser('error', 'error')
  app.removeContentTypeParser('application/json')
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8')
    if (text === '') done(null, {})
    else json(request, text, done)
  })
}

/**
 * The error table's answer for a failed route schema (the app's error
 * handler calls this), or null for any other error. The provider keeps zod's
 * issues in order with their path as `instancePath` (`/a/0/b`).
 */
export function validationError (err: unknown): GatewayError | null {
  if (!hasZodFastifySchemaValidationErrors(err)) return null
  const issue = err.validation[0]
  const path = issue === undefined ? '' : issue.instancePath.slice(1).replaceAll('/', '.')
  return new GatewayError('bad_request', `${path === '' ? '' : `${path}: `}${issue?.message ?? 'invalid'}`)
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** Session ids are UUIDs; anything else is a session that does not exist. */
export function isSessionId (id: string): boolean {
  return UUID.test(id)
}
