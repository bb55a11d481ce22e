/**
 * Settings of the event store and the nodes that share it: Redis, this
 * node's name and lease, the records' signing key, and what is kept of each
 * session's events. One group of settings.ts's schema, kept apart to keep
 * each file small.
 */
import { z } from 'zod'
import { defaulted, optional } from './setting-docs.js'
import { flag, int, ms, secret } from './setting-rules.js'

/** Environment variable → rule, default and meaning. */
export const storeSettings = {
  REDIS_URL: optional(z.string().regex(/^rediss?:\/\/[^,\s]+(,\s*rediss?:\/\/[^,\s]+)*$/, 'must be a redis:// or rediss:// URL, or a comma-separated list of them (Cluster seed nodes)'), '(unset: in-memory store)',
    '`redis://…` to keep event logs in Redis; a comma-separated list names seed nodes of a Redis Cluster (implies `REDIS_CLUSTER`; the first one\'s credentials and TLS apply to all)', true),
  REDIS_PREFIX: defaulted(z.string().min(1).regex(/^[^{}]*$/, 'must not contain { or } (they would break the per-session hash tag)'), 'cgw:',
    'key prefix in Redis (no `{` or `}`)'),
  REDIS_CLUSTER: defaulted(flag(), 'false',
    '`REDIS_URL` names one seed node of a Redis Cluster (its credentials and TLS apply to every node); needs `REDIS_URL`'),
  NODE_ID: optional(z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, 'expected 1 to 64 of A-Z a-z 0-9 . _ -'), '`<hostname>-<pid>`',
    'this gateway\'s name among several sharing a store; logged as `node` on every line'),
  SESSION_LEASE_MS: defaulted(int(300, 600_000), 10_000,
    'how long a node\'s hold on a session outlives its last renewal (renewed every third of it): after a node dies, its sessions are recorded `lost` and may resume elsewhere within about this long (docs/SCALING.md)'),
  STORE_SECRET: optional(secret(), '(generated once into `$DATA_DIR/store-secret`, mode 0600)',
    'key (≥ 32 characters) of the HMACs on stored session records, messages between nodes, node load reports, conversation copies and webhook outbox entries; gateways sharing a Redis must share it', true),
  STORE_ACCEPT_UNSIGNED: defaulted(flag(), 'false',
    'accept node messages and node load reports without a signature and conversation copies without a seal, logged at warn (messages, reports: the first one): what a version before they were signed wrote; on only for an upgrade from one (docs/SCALING.md)'),
  EVENTS_MAX_PER_SESSION: defaulted(int(1), 100_000, 'events kept per session'),
  EVENTS_TTL_SECONDS: defaulted(int(0), 7 * 24 * 3600, 'how long a finished session\'s history is kept'),
  STORE_QUEUE_MAX: defaulted(int(1), 100_000, 'events held in memory per session while the store is down'),
  RESUME_STORE_WAIT_MS: defaulted(ms(0), 3_000,
    'how long a resuming client\'s hello waits for a store that does not answer before it says `resume: "unavailable"` and closes with 1013 (PROTOCOL.md, Resume)')
}
