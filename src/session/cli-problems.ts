/**
 * Recognises, in what the CLI prints, the two failures a gateway user cannot
 * diagnose from the CLI's own lines: no credentials (the CLI answers every
 * prompt "Not logged in · Please run /login", a command nobody behind a
 * gateway can run) and an API it cannot reach (a silence, then `api_retry`
 * lines with `"error": "unknown"` for minutes). The session records a
 * `gateway`/`cli_problem` frame with a documented code and a hint beside the
 * CLI's lines, which are relayed as printed.
 *
 * Shapes are from the project's recordings of CLI 2.1.332
 * (test/fixtures/recorded/claude-code-2.1.332/not_logged_in.*, api_unreachable.*):
 * an `assistant` line with `"error": "authentication_failed"`, and
 * `system`/`api_retry` lines with `attempt`, `max_retries`, `error_status`, `error`.
 */

/** Which problem, as the `code` of the `cli_problem` frame (docs/PROTOCOL.md). */
export type CliProblemCode = 'cli_not_authenticated' | 'api_unreachable'

export interface CliProblem {
  code: CliProblemCode
  message: string
  hint: string
  /** api_unreachable only: the CLI's retry count so far, its limit and what failed. */
  attempt?: number
  max_retries?: number | null
  error?: string | null
  error_status?: number | null
}

/** `api_retry` lines in one turn before the gateway says the API looks unreachable. */
export const RETRIES_BEFORE_UNREACHABLE = 2

const AUTH_HINT = 'Start the gateway with credentials for the CLI: ANTHROPIC_API_KEY in its environment, or Bedrock ' +
  '(CLAUDE_CODE_USE_BEDROCK=1) or Vertex (CLAUDE_CODE_USE_VERTEX=1) with their credentials listed in CLI_ENV_ALLOW; see the README, "Credentials".'
const UNREACHABLE_HINT = 'The CLI cannot reach the model API and keeps retrying. Check ANTHROPIC_BASE_URL, the sandbox egress ' +
  'allowlist (SANDBOX_EGRESS) and the gateway host\'s network; interrupt the turn to stop the retries.'

/** Auth failures the CLI reports as an `assistant` line's `error` (or a 401/403 retry). */
const AUTH_ERRORS = new Set(['authentication_failed', 'oauth_token_expired', 'invalid_api_key'])

/**
 * One per session. Fed every parsed CLI line; returns a problem to record at
 * most once per turn and kind (a turn ends with `result`).
 */
export class CliProblems {
  #retries = 0
  #told = new Set<CliProblemCode>()

  /** The problem this line shows, if it is news for this turn; null otherwise. */
  observe (msg: Record<string, unknown>): CliProblem | null {
    if (msg.type === 'result') {
      this.#retries = 0
      this.#told.clear()
      return null
    }
    if (msg.type === 'assistant' && typeof msg.error === 'string' && AUTH_ERRORS.has(msg.error)) {
      return this.#once({ code: 'cli_not_authenticated', message: assistantText(msg) ?? 'The CLI has no valid credentials', hint: AUTH_HINT })
    }
    if (msg.type !== 'system' || msg.subtype !== 'api_retry') return null
    const status = typeof msg.error_status === 'number' ? msg.error_status : null
    if (status === 401 || status === 403) {
      return this.#once({ code: 'cli_not_authenticated', message: `The model API refused the CLI's credentials (HTTP ${status})`, hint: AUTH_HINT })
    }
    // Rate limits and overload are the API answering: not "unreachable".
    if (status !== null && status < 500) return null
    this.#retries++
    if (this.#retries < RETRIES_BEFORE_UNREACHABLE) return null
    return this.#once({
      code: 'api_unreachable',
      message: status === null
        ? 'The CLI cannot connect to the model API'
        : `The model API keeps failing (HTTP ${status})`,
      hint: UNREACHABLE_HINT,
      attempt: typeof msg.attempt === 'number' ? msg.attempt : this.#retries,
      max_retries: typeof msg.max_retries === 'number' ? msg.max_retries : null,
      error: typeof msg.error === 'string' ? msg.error : null,
      error_status: status
    })
  }

  #once (problem: CliProblem): CliProblem | null {
    if (this.#told.has(problem.code)) return null
    this.#told.add(problem.code)
    return problem
  }
}

/** The text of an `assistant` line (the CLI puts its auth message there). */
function assistantText (msg: Record<string, unknown>): string | null {
  const message = msg.message as { content?: unknown } | undefined
  if (!Array.isArray(message?.content)) return null
  const text = message.content
    .map((b: unknown) => (typeof b === 'object' && b !== null && (b as { type?: unknown }).type === 'text' ? String((b as { text?: unknown }).text) : ''))
    .join('')
  return text === '' ? null : text
}
