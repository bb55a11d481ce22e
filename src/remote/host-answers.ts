/**
 * Lines claude-remote writes in someone else's name: answers to CLI prompts
 * nobody can answer any more (as the CLI words them), an SDK-readable error
 * for a host request the gateway refused, and the host's `initialize` with
 * the fields its argv asked for.
 */

/** Answer the CLI gives a prompt the host can no longer answer (stdin closed), as in its transcripts. */
const STREAM_CLOSED = 'Tool permission stream closed before response received'
const NO_PROMPT_TOOL = 'Permission prompts are off: claude-remote was started without --permission-prompt-tool stdio'

/** The error answer to a CLI prompt left with nobody to answer it (stdin closed). */
export function streamClosedAnswer (id: string, subtype: string): string {
  return JSON.stringify({ type: 'control_response', response: { subtype: 'error', request_id: id, error: subtype === 'can_use_tool' ? STREAM_CLOSED : 'stream closed' } })
}

/** The deny of a tool prompt when the host did not ask for prompts (no `--permission-prompt-tool stdio`). */
export function noPromptToolAnswer (id: string): string {
  return JSON.stringify({ type: 'control_response', response: { subtype: 'success', request_id: id, response: { behavior: 'deny', message: NO_PROMPT_TOOL } } })
}

/** A gateway refusal of the host's request `id`, as the control_response error an SDK waiting on it understands. */
export function refusalAnswer (id: string, message: string, code: string): string {
  return JSON.stringify({ type: 'control_response', response: { subtype: 'error', request_id: id, error: message, error_code: code } })
}

/** The host's initialize `line`, with the argv's `initFields` it lacks added (re-encoded only then). */
export function withInitFields (line: string, frame: Record<string, unknown>, request: Record<string, unknown>, initFields: Record<string, unknown>): string {
  const missing = Object.entries(initFields).filter(([k]) => request[k] === undefined || request[k] === null)
  if (missing.length === 0) return line
  return JSON.stringify({ ...frame, request: { ...request, ...Object.fromEntries(missing) } })
}
