/**
 * Body of `POST /v1/sessions`. Every field maps to one CLI flag through the
 * fixed table in src/cli/cli-args.ts; unknown fields are rejected.
 */
import { z } from 'zod'
import { permissionModes } from './client-frames.js'

/**
 * Linux refuses to exec with any one argument over MAX_ARG_STRLEN (131072
 * bytes with its NUL): free-text options become one `--flag=value` argument
 * each, so their UTF-8 size is bounded here, leaving room for the flag.
 */
export const ARG_VALUE_MAX_BYTES = 131_072 - 64
/** `metadata` is kept with the session record for its whole retention: at most this much JSON. */
export const METADATA_MAX_BYTES = 16 * 1024

const byteLength = (text: string): number => Buffer.byteLength(text, 'utf8')
const argBytes = `larger than ${ARG_VALUE_MAX_BYTES} bytes (UTF-8), the most one CLI argument can hold`

/**
 * Values of CLAUDE_CODE_ENTRYPOINT a session may ask for: the gateway's own,
 * or the Agent SDK's, which claude-remote passes on so a CLI behind the
 * gateway boots as the SDK's would (the entrypoint changes e.g. the built-in
 * agents it lists).
 */
export const entrypoints = ['claude-gateway', 'sdk-ts', 'sdk-py', 'sdk-cli'] as const

/**
 * Any JSON value. One instance, registered by name, so the OpenAPI document
 * (GET /openapi.json) refers to it as `#/components/schemas/JsonValue`: it is
 * recursive, and a recursive schema is only emitted when it has a name.
 */
const jsonValue = z.json()
z.globalRegistry.add(jsonValue, { id: 'JsonValue' })

/** Tool names and permission rules such as `Bash(git log:*)` or `mcp__server__tool`. */
const toolRule = z.string().min(1).max(200).regex(/^[A-Za-z0-9_.*-]+(\([^\n\r\0]*\))?$/, 'not a tool name or rule')
  .refine(oneCliRule, 'the CLI would read this as several rules (a "," or space after a ")" ends a rule)')

/**
 * The CLI cuts its `--allowedTools` list at a `,` or space outside
 * parentheses, and any `)` closes them: `Read(x),Bash,Read(y)` would reach it
 * as three rules, one of them all of Bash, where the policy checked one.
 */
function oneCliRule (rule: string): boolean {
  let inParens = false
  for (const ch of rule) {
    if (ch === '(') inParens = true
    else if (ch === ')') inParens = false
    else if ((ch === ',' || ch === ' ') && !inParens) return false
  }
  return true
}

export const sessionOptions = z.strictObject({
  model: z.string().min(1).max(100).regex(/^[A-Za-z0-9._:\-[\]]+$/, 'not a model name').optional(),
  permission_mode: z.enum(permissionModes).optional(),
  /** Sub-folder of the tenant's workspace root. */
  cwd: z.string().min(1).max(1024).regex(/^[^\0]*$/, 'contains NUL').optional(),
  allowed_tools: z.array(toolRule).max(200).refine((v) => byteLength(v.join(',')) <= ARG_VALUE_MAX_BYTES, argBytes).optional(),
  disallowed_tools: z.array(toolRule).max(200).refine((v) => byteLength(v.join(',')) <= ARG_VALUE_MAX_BYTES, argBytes).optional(),
  append_system_prompt: z.string().max(ARG_VALUE_MAX_BYTES).regex(/^[^\0]*$/, 'contains NUL').refine((v) => byteLength(v) <= ARG_VALUE_MAX_BYTES, argBytes).optional(),
  max_turns: z.number().int().min(1).max(10_000).optional(),
  include_partial_messages: z.boolean().optional(),
  /** JSON Schema of the final result (`--json-schema`; the SDK's outputFormat). */
  json_schema: z.record(z.string(), jsonValue).refine((v) => byteLength(JSON.stringify(v)) <= ARG_VALUE_MAX_BYTES, argBytes).optional(),
  /** `stdio` (default): permission prompts go to the session's holder; `none`: the CLI denies what needs a prompt itself, as it does for an SDK host without canUseTool. */
  permission_prompt_tool: z.enum(['stdio', 'none']).optional(),
  /** CLAUDE_CODE_ENTRYPOINT for the CLI (default `claude-gateway`). */
  entrypoint: z.enum(entrypoints).optional(),
  metadata: jsonValue.refine((v) => byteLength(JSON.stringify(v)) <= METADATA_MAX_BYTES, `larger than ${METADATA_MAX_BYTES} bytes as JSON`).optional()
})

export type SessionOptions = z.infer<typeof sessionOptions>

/**
 * A whole number in a query (or Last-Event-ID): decimal digits only.
 * z.coerce goes through Number(), which reads `0x10` as 16, `1e1` as 10 and
 * an empty value as 0 (`?after=` replayed a whole history).
 */
export function queryInt (min: number, max: number = Number.MAX_SAFE_INTEGER): z.ZodPipe<z.ZodPipe<z.ZodString, z.ZodTransform<number, string>>, z.ZodNumber> {
  return z.string().regex(/^[0-9]{1,16}$/, 'expected a whole number in decimal digits').transform(Number).pipe(z.number().int().min(min).max(max))
}

export const listQuery = z.strictObject({
  limit: queryInt(1, 100).default(20),
  cursor: z.string().max(500).optional()
})

/** The longest `?ticket=` taken: room for the sealed credential it carries (a JWT of about 5 KB), inside Node's 16 KiB of headers. */
export const WS_TICKET_MAX_CHARS = 8192

export const wsQuery = z.strictObject({
  role: z.enum(['controller', 'observer']).default('controller'),
  /**
   * With `role=controller`: a reconnect of a client that did not hold the
   * session when its link dropped (it was displaced), not a fresh attach, so
   * it holds only if nobody does, else waits as the next candidate.
   */
  rejoin: z.enum(['true', 'false']).optional(),
  after: queryInt(0).optional(),
  ticket: z.string().max(WS_TICKET_MAX_CHARS).optional()
})

export const eventsQuery = z.strictObject({
  after: queryInt(0).default(0),
  limit: queryInt(1, 1000).default(100)
})
