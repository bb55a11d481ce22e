/**
 * The Lua scripts of the Redis store, each with the ioredis command name it
 * is defined under (EVALSHA by hash, EVAL on NOSCRIPT, by ioredis; no SCRIPT
 * command, which the store's ACL user may not run) and its call signature.
 * Every script touches the keys of one session only, so it runs on a Redis
 * Cluster (the session's hash tag puts them in one slot), except that
 * APPEND_SCRIPT takes several sessions at once, given only on a single Redis,
 * and the webhook outbox's scripts touch the outbox's keys instead, which
 * all share the `{webhooks}` hash tag so the takeover may touch two nodes'.
 *
 * The scripts live in one file per concern, all reachable from here.
 */

export { fenceOf, fenced } from './redis-script-parts.js'
export * from './redis-append-script.js'
export * from './redis-record-scripts.js'
export * from './redis-lease-scripts.js'
export * from './redis-read-script.js'
export * from './redis-outbox-scripts.js'
