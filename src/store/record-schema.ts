/**
 * What a stored session record must look like before the gateway acts on it.
 * A record read back from the store is data someone else could have written
 * (anyone who reaches Redis), so it passes the same rules as a request: the
 * options through the very schema POST /v1/sessions uses, the tenant through
 * the pattern tokens and JWTs are held to.
 */
import { z } from 'zod'
import { sessionOptions } from '../protocol/session-options.js'

/** The tenant pattern of GATEWAY_TOKENS and JWT tenants (`.`/`..` would name a parent folder). */
const tenant = z.string().regex(/^(?!\.\.?$)[A-Za-z0-9._-]{1,64}$/, 'not a tenant name')
const timestamp = z.string().refine((s) => Number.isFinite(Date.parse(s)), 'not a timestamp')

const exitInfo = z.object({
  code: z.number().int().nullable(),
  signal: z.string().nullable(),
  stderr_tail: z.array(z.string()),
  reason: z.enum(['exited', 'stopped', 'spawn_failed', 'lost']),
  at: timestamp,
  error: z.string().optional(),
  oom_kills: z.number().int().min(1).optional()
})

/** Fields added later by the gateway are allowed (the MAC covers them); the ones below must hold. */
export const sessionRecordSchema = z.object({
  id: z.string().regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, 'not a session id'),
  tenant,
  status: z.enum(['starting', 'running', 'stopping', 'stopped', 'exited']),
  created_at: timestamp,
  updated_at: timestamp,
  // Stored without `metadata` (kept beside it); everything else as created.
  options: sessionOptions.omit({ metadata: true }),
  metadata: z.json(),
  last_seq: z.number().int().min(0),
  resumable: z.boolean(),
  exit: exitInfo.nullable(),
  // The holder's initialize request, re-vetted by the control policy before a CLI gets it again.
  initialize: z.record(z.string(), z.json()).refine((r) => r.subtype === 'initialize', 'not an initialize request').optional(),
  lost_ranges: z.array(z.tuple([z.number().int().min(1), z.number().int().min(1)]).refine(([from, to]) => from <= to, 'not a range')).max(100).optional()
})
