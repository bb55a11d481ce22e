/**
 * The names of the Redis store's keys under its prefix, as laid out in
 * redis.ts: every key of one session carries the session's hash tag, so a
 * Cluster puts them in one slot. One place, so the store's parts (given
 * these as their `keys`) cannot disagree on a name.
 */

export interface RedisKeys {
  events: (id: string) => string
  meta: (id: string) => string
  lease: (id: string) => string
  epoch: (id: string) => string
  conversation: (id: string) => string
  followed: (id: string) => string
  largest: (id: string) => string
  /** The pub/sub channel a followed session's appends are published on. */
  channel: (id: string) => string
  tenantIndex: (tenant: string) => string
  live: () => string
}

/** The key names under `prefix`, which must not contain `{` or `}` (they would break the per-session hash tag). */
export function redisKeys (prefix: string): RedisKeys {
  if (/[{}]/.test(prefix)) throw new Error(`redis prefix must not contain { or }: ${prefix}`)
  const session = (id: string, name: string): string => `${prefix}{${sessionTag(id)}}:${name}`
  return {
    events: (id) => session(id, 'events'),
    meta: (id) => session(id, 'meta'),
    lease: (id) => session(id, 'lease'),
    epoch: (id) => session(id, 'epoch'),
    conversation: (id) => session(id, 'conversation'),
    followed: (id) => session(id, 'followed'),
    largest: (id) => session(id, 'largest'),
    channel: (id) => session(id, 'feed'),
    tenantIndex: (tenant) => `${prefix}tenant:${tenant}:sessions`,
    live: () => `${prefix}live`
  }
}

/**
 * The hash-tag body for a session id. Redis hashes the text between the first
 * `{` and the next `}`, so an id holding `}` still gives one slot per session;
 * an empty id would give an empty tag (no tag at all), so it is refused.
 */
function sessionTag (id: string): string {
  if (id === '') throw new Error('session id must not be empty')
  return id
}
