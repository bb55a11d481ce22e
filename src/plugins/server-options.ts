/**
 * The HTTP server's options from the config: logger, body limit, trusted
 * proxies, timeouts and connection cap. Apart from app.ts because turning
 * settings into Fastify's and Node's terms (a hop count, a check interval)
 * is a concern of its own.
 */
import type { FastifyBaseLogger } from 'fastify'
import type { Logger } from 'pino'
import type { Config } from '../config.js'
import { redactedRequest } from '../net/redact.js'
import { frameworkErrorReply } from './error-replies.js'

/** The options to create the app's Fastify instance with. */
export function serverOptions (config: Config, logger: Logger) {
  return {
    // Request lines are logged with `?token=` / `?ticket=` values redacted, whatever logger was passed in.
    loggerInstance: logger.child({}, { serializers: { req: redactedRequest } }) as FastifyBaseLogger,
    bodyLimit: config.bodyLimitBytes,
    trustProxy: trustProxy(config.trustProxy),
    // A slow or trickled request is answered 408 and closed. Upgraded WebSockets and
    // event streams are past their request, so these never cut them.
    requestTimeout: config.requestTimeoutMs,
    keepAliveTimeout: config.keepAliveTimeoutMs,
    http: { connectionsCheckingInterval: connectionsCheckingInterval(config) },
    frameworkErrors: frameworkErrorReply
  }
}

/**
 * Fastify takes `true`, addresses/CIDRs, or a function; a bare number it
 * treats as "trust nothing". A hop count is read as Express reads it: the
 * peer and the next n-1 addresses of X-Forwarded-For are proxies. It cannot
 * tell a proxy from a client that connects directly, hence addresses are
 * preferred (docs/SECURITY.md).
 */
function trustProxy (setting: Config['trustProxy']): boolean | string[] | ((address: string, hop: number) => boolean) {
  return typeof setting === 'number' ? (_address, hop) => hop < setting : setting
}

/** How often Node looks for requests past their timeouts: a fraction of the shortest, so one is ended close to its time. */
function connectionsCheckingInterval (config: Config): number {
  const timeouts = [config.requestTimeoutMs, config.headersTimeoutMs].filter((ms) => ms > 0)
  return timeouts.length === 0 ? 30_000 : Math.min(5000, Math.max(100, Math.floor(Math.min(...timeouts) / 4)))
}
