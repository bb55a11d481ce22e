/**
 * `--resume <id>` attaches to a gateway session that keeps the options it
 * was created with: flags that would ask for other ones are refused before
 * attaching, rather than silently not applied.
 */
import { isRecord } from '../protocol/is-record.js'

export class ResumeMismatch extends Error {}

/** What the gateway does when a session was created without the option. */
const OPTION_DEFAULTS: Record<string, unknown> = { permission_prompt_tool: 'stdio' }

/** Throws ResumeMismatch naming the first option of `wanted` that `session` (GET /v1/sessions/:id) differs in. */
export function checkResumeOptions (session: Record<string, unknown>, wanted: Record<string, unknown>): void {
  const stored = isRecord(session.options) ? session.options : {}
  for (const [key, value] of Object.entries(wanted)) {
    if (JSON.stringify(stored[key] ?? OPTION_DEFAULTS[key]) !== JSON.stringify(value)) {
      throw new ResumeMismatch(`--resume ${String(session.id)}: the session was created with ${key} ${JSON.stringify(stored[key] ?? null)}, not ${JSON.stringify(value)}; a gateway session keeps the options it was created with`)
    }
  }
}
