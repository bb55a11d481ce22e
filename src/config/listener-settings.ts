/**
 * Settings of the HTTP listener: where it listens, what it logs, which
 * Origins, Hosts and proxies it trusts, and its server timeouts and sizes.
 * One group of settings.ts's schema, kept apart to keep each file small.
 */
import { z } from 'zod'
import { defaulted, optional } from './setting-docs.js'
import { commaList, int, ms } from './setting-rules.js'
import { parseTrustProxy } from './values.js'

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const

/** `https://host[:port]` as a browser sends it in Origin (lower case, no default port, no path). */
function isOrigin (entry: string): boolean {
  try {
    const url = new URL(entry)
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.origin === entry
  } catch {
    return false
  }
}

/** Environment variable → rule, default and meaning. */
export const listenerSettings = {
  PORT: defaulted(int(0, 65535), 8080, 'listen port'),
  HOST: defaulted(z.string().min(1), '127.0.0.1', 'listen address; anything but loopback needs `GATEWAY_TOKENS` or a JWT key (`JWT_SECRET`/`JWT_PUBLIC_KEY`)'),
  METRICS_PORT: defaulted(int(0, 65535), 0,
    '`/metrics` on a listener of its own on this port and `HOST` (not `PORT`, which then answers 404 for it); 0 = on `PORT` (docs/API.md, Metrics)'),
  METRICS_TOKEN: optional(z.string().min(16, 'must be at least 16 characters'), '(unset: a tenant\'s token on `PORT`; no credential on `METRICS_PORT`)',
    'when set (≥ 16 characters), the only credential `/metrics` accepts: `Authorization: Bearer <METRICS_TOKEN>`', true),
  LOG_LEVEL: defaulted(z.enum(LOG_LEVELS), 'info', 'pino level'),
  // A browser's Origin is scheme://host[:port] exactly: an entry with a path or a trailing slash would never match.
  ALLOWED_ORIGINS: defaulted(commaList().refine((items) => items.every(isOrigin), 'expected a comma list of origins such as https://app.example.com (scheme, host and port only: no path, no trailing slash)'),
    '', 'browser Origins allowed (WebSocket and CORS), comma separated; others get 403'),
  ALLOWED_HOSTS: defaulted(commaList(), '', 'extra Host names accepted while bound to loopback (DNS-rebinding guard)'),
  TRUST_PROXY: defaulted(z.string().transform((v, ctx) => {
    const parsed = parseTrustProxy(v)
    if (parsed === null) ctx.addIssue({ code: 'custom', message: 'expected true, false, a hop count, or a comma list of IP addresses/CIDRs (or loopback, linklocal, uniquelocal)' })
    return parsed ?? false
  }), 'false', 'proxies whose `X-Forwarded-For` decides the client address: `true`, `false`, a hop count, or addresses/CIDRs (`loopback`, `linklocal`, `uniquelocal` allowed)'),
  BODY_LIMIT_BYTES: defaulted(int(1024), 1024 * 1024, 'largest REST body'),
  REQUEST_TIMEOUT_MS: defaulted(int(0), 30_000, 'headers and body must arrive within this, else 408 (0 = off); WebSockets and event streams are not cut'),
  HEADERS_TIMEOUT_MS: defaulted(int(0), 10_000, 'request headers must arrive within this (at most `REQUEST_TIMEOUT_MS`)'),
  KEEPALIVE_TIMEOUT_MS: defaulted(ms(1), 72_000, 'idle keep-alive connections are closed after this (keep it above a reverse proxy\'s idle timeout)'),
  MAX_CONNECTIONS: defaulted(int(1), 2_000, 'open TCP connections; further ones are dropped at once')
}
