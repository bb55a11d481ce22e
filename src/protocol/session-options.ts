/**
 * Body of `POST /v1/sessions`. Every field maps to one CLI flag through the
 * fixed table in src/cli/cli-args.ts; unknown fields are rejected.
 */
import { z } from 'zod'
import { permissionModes } from './client-frames.js'

/** Tool names and permission rules such as `Bash(git log:*)` or `mcp__server__tool`. */
const toolRule = z.string().min(1).max(200).regex(/^[A-Za-z0-9_.*-]+(\([^\n\r\0]*\))?$/, 'not a tool name or rule')

export const sessionOptions = z.strictObject({
  model: z.string().min(1).max(100).regex(/^[A-Za-z0-9._:\-[\]]+$/, 'not a model name').optional(),
  permission_mode: z.enum(permissionModes).optional(),
  /** Sub-folder of the tenant's workspace root. */
  cwd: z.string().min(1).max(1024).regex(/^[^\0]*$/, 'contains NUL').optional(),
  allowed_tools: z.array(toolRule).max(200).optional(),
  disallowed_tools: z.array(toolRule).max(200).optional(),
  append_system_prompt: z.string().max(100_000).regex(/^[^\0]*$/, 'contains NUL').optional(),
  max_turns: z.number().int().min(1).max(10_000).optional(),
  include_partial_messages: z.boolean().optional(),
  metadata: z.json().optional()
})

export type SessionOptions = z.infer<typeof sessionOptions>

export const listQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  cursor: z.string().max(500).optional()
})

export const wsQuery = z.strictObject({
  role: z.enum(['controller', 'observer']).default('controller'),
  after: z.coerce.number().int().min(0).optional(),
  ticket: z.string().max(200).optional()
})

export const eventsQuery = z.strictObject({
  after: z.coerce.number().int().min(0).default(0),
  limit: z.coerce.number().int().min(1).max(1000).default(100)
})
