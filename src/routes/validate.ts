/**
 * zod parsing for routes: a failure becomes a 400 `bad_request` naming the
 * first offending field.
 */
import type { z } from 'zod'
import { GatewayError } from '../errors.js'
import { MAX_JSON_DEPTH, tooDeep } from '../protocol/client-frames.js'

export function parseOr400<T extends z.ZodType> (schema: T, value: unknown): z.infer<T> {
  // zod's z.json() and JSON.stringify recurse: refuse deep nesting before either runs.
  if (tooDeep(value)) throw new GatewayError('bad_request', `nested more than ${MAX_JSON_DEPTH} levels deep`)
  const parsed = schema.safeParse(value)
  if (parsed.success) return parsed.data
  const issue = parsed.error.issues[0]
  const where = issue === undefined || issue.path.length === 0 ? '' : `${issue.path.join('.')}: `
  throw new GatewayError('bad_request', `${where}${issue?.message ?? 'invalid'}`)
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** Session ids are UUIDs; anything else is a session that does not exist. */
export function isSessionId (id: string): boolean {
  return UUID.test(id)
}
