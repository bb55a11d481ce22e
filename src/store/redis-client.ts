/**
 * The ioredis client (or Cluster) the Redis store creates from REDIS_URL,
 * with options that make a command fail rather than wait while Redis is
 * unreachable, bound every command in time, and send appends and history
 * reads at once instead of auto-pipelining them. An injected client keeps
 * its own options (configure it likewise).
 */
import { isIP } from 'node:net'
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis'
import { APPEND_COMMAND, READ_COMMAND } from './redis-scripts.js'

/** A client for `url` (a comma-separated seed list with `cluster`), failing fast as described in clientOptions. */
export function redisClient (url: string, cluster: boolean, commandTimeoutMs: number): Redis | Cluster {
  return cluster
    ? new Cluster(url.split(',').map((seed) => seedNode(seed.trim())), clusterOptions((url.split(',')[0] as string).trim(), commandTimeoutMs))
    : new Redis(url, clientOptions(commandTimeoutMs))
}

/**
 * Options for a client this store creates. The session layer keeps relaying
 * live and retries failed appends itself, so a command must fail rather than
 * wait for Redis to come back:
 * - a command issued while disconnected waits in the offline queue for at
 *   most two reconnect attempts (`maxRetriesPerRequest: 1`); with attempts
 *   backing off to one every 500 ms it rejects within about a second;
 * - `commandTimeout` bounds every command, including one sent on a
 *   connection that has silently died;
 * - `socketTimeout` destroys such a connection (no reply data for a while
 *   although commands are waiting), so reconnecting starts.
 * A command that timed out may still reach Redis later; appends are
 * idempotent per seq, and a record put is overtaken by any later put
 * (commands keep their order on the connection).
 */
function clientOptions (commandTimeoutMs: number): RedisOptions {
  return {
    enableAutoPipelining: true,
    // Appends and history reads go out at once, as one command: auto-pipelining
    // would hold each one to the end of the event-loop turn (setImmediate)
    // behind a pipeline object, costing latency and GC time per relayed batch
    // or page (a page's reply is also collected through the pipeline's result).
    autoPipeliningIgnoredCommands: ['evalsha', 'eval', 'xrange', APPEND_COMMAND, READ_COMMAND],
    enableOfflineQueue: true,
    maxRetriesPerRequest: 1,
    commandTimeout: commandTimeoutMs,
    socketTimeout: Math.max(10_000, commandTimeoutMs * 5),
    connectTimeout: Math.max(commandTimeoutMs, 1000),
    retryStrategy: (times: number) => Math.min(50 * 2 ** Math.min(times - 1, 10), 500)
  }
}

/** Between tries of a command Redis answered TRYAGAIN (a slot migrating). */
const TRY_AGAIN_DELAY_MS = 100

/**
 * Options for a Cluster this store creates: each node's connection gets
 * `clientOptions` (fail fast, bounded commands) plus the seed URL's
 * credentials and TLS; reads and writes go to masters only (`scaleReads`),
 * so a read never misses an append a replica has not yet received; no
 * auto-pipelining, and redirections followed until the command times out,
 * so a resharding (a slot migrating) delays commands rather than fails them.
 */
function clusterOptions (url: string, commandTimeoutMs: number): ClusterOptions {
  const parsed = new URL(url)
  const { enableAutoPipelining: _pipelining, autoPipeliningIgnoredCommands: _ignored, enableOfflineQueue, retryStrategy, ...node } = clientOptions(commandTimeoutMs)
  const tls = parsed.protocol === 'rediss:'
  return {
    // No auto-pipelining on a Cluster: while a slot migrates (resharding), an
    // auto-pipeline gave up on the first TRYAGAIN or ASK of a script, or on a
    // MOVED of one command when another of its pipeline was written, and
    // failed whole when the slot map changed under it. Sent alone, ioredis
    // follows each command's redirections until its timeout (below).
    enableAutoPipelining: false,
    enableOfflineQueue,
    scaleReads: 'master',
    clusterRetryStrategy: retryStrategy ?? null,
    // Slot moves and failovers are followed, but within about a command timeout.
    retryDelayOnFailover: 100,
    retryDelayOnClusterDown: 100,
    // While a session's slot migrates (resharding), Redis answers TRYAGAIN to
    // every script of the session (some key it names does not exist on that
    // node), until the slot's last key moved. Each try may cost up to three
    // redirections (ASK, TRYAGAIN, then MOVED from the random node ioredis
    // tries next): enough of them that the command timeout, not ioredis' 16,
    // bounds how long a write waits the migration out.
    retryDelayOnTryAgain: TRY_AGAIN_DELAY_MS,
    maxRedirections: Math.max(16, 3 * Math.ceil(commandTimeoutMs / TRY_AGAIN_DELAY_MS)),
    slotsRefreshTimeout: Math.max(commandTimeoutMs, 1000),
    // With TLS the seed's host name must reach the TLS layer (server name
    // check) instead of being resolved to an address first.
    ...(tls ? { dnsLookup: (address: string, done: (err: Error | null, address: string) => void) => { done(null, address) } } : {}),
    redisOptions: {
      ...node,
      ...(parsed.username !== '' ? { username: decodeURIComponent(parsed.username) } : {}),
      ...(parsed.password !== '' ? { password: decodeURIComponent(parsed.password) } : {}),
      // Nodes are announced by address; their certificates name the seed's host.
      ...(tls ? { tls: isIP(parsed.hostname) === 0 ? { servername: parsed.hostname } : {} } : {})
    }
  }
}

/** The seed node of a cluster URL (a Cluster has no databases, so a path is ignored). */
function seedNode (url: string): { host: string, port: number } {
  const parsed = new URL(url)
  const host = parsed.hostname.startsWith('[') ? parsed.hostname.slice(1, -1) : parsed.hostname
  return { host: host === '' ? '127.0.0.1' : host, port: parsed.port === '' ? 6379 : Number(parsed.port) }
}
