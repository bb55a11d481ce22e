/**
 * The first problem zod found, as the dotted path to the field ('' for the
 * value itself) and zod's message: what every refusal names (a client frame,
 * a stored record), each in its own wording.
 */
import type { z } from 'zod'

export function firstIssue (error: z.ZodError): { path: string, message: string } {
  const issue = error.issues[0]
  return { path: issue?.path.map(String).join('.') ?? '', message: issue?.message ?? 'invalid' }
}
