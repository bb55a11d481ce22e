/**
 * The fixed table from session options to CLI flags. Clients never pass raw
 * flags: each option maps to exactly one flag here, after zod validation.
 */
import { GatewayError } from '../errors.js'
import type { SessionOptions } from '../protocol/session-options.js'

/** Linux's MAX_ARG_STRLEN: the most bytes one argument may have, its terminating NUL included. */
export const MAX_ARG_STRLEN = 131_072

/** Flags every CLI gets: stream-json both ways. */
export const baseArgs = [
  '--output-format', 'stream-json',
  '--verbose',
  '--input-format', 'stream-json'
] as const

/** Permission prompts over stdio, to the session's holder: every CLI but those created with `permission_prompt_tool: "none"`. */
export const promptToolArgs = ['--permission-prompt-tool', 'stdio'] as const

type FlagMap = { [K in keyof SessionOptions]-?: (value: NonNullable<SessionOptions[K]>) => string[] }

// `=` joins free-text values to their flag so a value starting with '-' is never read as a flag.
export const optionFlags: FlagMap = {
  model: (v) => [`--model=${v}`],
  permission_mode: (v) => [`--permission-mode=${v}`],
  allowed_tools: (v) => v.length === 0 ? [] : [`--allowedTools=${v.join(',')}`],
  disallowed_tools: (v) => v.length === 0 ? [] : [`--disallowedTools=${v.join(',')}`],
  append_system_prompt: (v) => [`--append-system-prompt=${v}`],
  max_turns: (v) => [`--max-turns=${v}`],
  include_partial_messages: (v) => v ? ['--include-partial-messages'] : [],
  json_schema: (v) => [`--json-schema=${JSON.stringify(v)}`],
  // Not flags: the prompt tool is placed with the base flags (buildCliArgs), the entrypoint is an
  // environment variable, cwd picks the spawn folder, metadata stays with the gateway.
  permission_prompt_tool: () => [],
  entrypoint: () => [],
  cwd: () => [],
  metadata: () => []
}

export interface CliArgsInput {
  sessionId: string
  /** True when the CLI has stored the conversation: continue it instead of starting anew. */
  resume: boolean
  options: SessionOptions
  /** Operator-only flags from CLAUDE_ARGS_EXTRA. */
  extra: readonly string[]
}

export function buildCliArgs (input: CliArgsInput): string[] {
  const prompts = input.options.permission_prompt_tool === 'none' ? [] : promptToolArgs
  const args: string[] = [...baseArgs, ...prompts, input.resume ? '--resume' : '--session-id', input.sessionId]
  for (const key of Object.keys(optionFlags) as Array<keyof SessionOptions>) {
    const value = input.options[key]
    if (value === undefined || value === null) continue
    args.push(...(optionFlags[key] as (v: unknown) => string[])(value))
  }
  args.push(...input.extra)
  // The request schema bounds each option already; this also covers options stored before it
  // did, and CLAUDE_ARGS_EXTRA. exec would fail with E2BIG.
  for (const arg of args) {
    const bytes = Buffer.byteLength(arg, 'utf8') + 1
    if (bytes > MAX_ARG_STRLEN) {
      const flag = arg.startsWith('--') ? arg.slice(0, Math.max(0, arg.indexOf('='))) || arg.slice(0, 40) : 'an argument'
      throw new GatewayError('bad_request', `${flag} is ${bytes} bytes; one CLI argument may hold at most ${MAX_ARG_STRLEN}`)
    }
  }
  return args
}
