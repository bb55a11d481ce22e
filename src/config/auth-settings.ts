/**
 * Settings of who may sign in: static tokens, JWT keys and claims, the
 * WebSocket ticket's lifetime, and how often secret files are read again.
 * One group of settings.ts's schema, kept apart to keep each file small.
 */
import { z } from 'zod'
import { defaulted, optional } from './setting-docs.js'
import { flag, int, ms, secret } from './setting-rules.js'
import { isJwtPublicKey, tokensOrProblem } from './values.js'

/** Environment variable → rule, default and meaning. */
export const authSettings = {
  GATEWAY_TOKENS: optional(z.string().transform((v, ctx) => {
    const tokens = tokensOrProblem(v)
    if (typeof tokens !== 'string') return tokens
    ctx.addIssue({ code: 'custom', message: tokens })
    return z.NEVER
  }), '(unset: a token is generated and printed at start; loopback only)', '`token=tenant,token2=tenant2` (tokens ≥ 16 characters)', true),
  WS_TICKET_TTL_MS: defaulted(ms(1000), 30_000, 'lifetime of a single-use WebSocket ticket'),
  JWT_SECRET: optional(secret(), '(none)', 'accept HS256 JWTs signed with this (≥ 32 characters) besides `GATEWAY_TOKENS`', true),
  JWT_PUBLIC_KEY: optional(z.string().refine(isJwtPublicKey, 'must be an SPKI PEM public key (-----BEGIN PUBLIC KEY-----) of RSA, EC P-256/P-384/P-521 or Ed25519'), '(none)',
    'accept JWTs signed by this PEM public key (RSA, EC P-256/P-384/P-521 or Ed25519) besides `GATEWAY_TOKENS`', true),
  JWT_TENANT_CLAIM: defaulted(z.string().min(1), 'tenant', 'JWT claim naming the tenant'),
  JWT_ISSUER: optional(z.string().min(1), '(none)', 'expected JWT `iss`'),
  JWT_AUDIENCE: optional(z.string().min(1), '(none)', 'expected JWT `aud`'),
  JWT_MAX_TTL_SECONDS: defaulted(int(1), 86_400, 'longest JWT lifetime accepted (`exp − iat`, or `exp − now` without `iat`)'),
  JWT_CLOCK_TOLERANCE_SECONDS: defaulted(int(0, 300), 0,
    'how far ahead of this host\'s clock a JWT issuer\'s may run: a token is accepted this many seconds before its `nbf`; `exp` gets no grace'),
  JWT_EXPIRY_ENDS_CONNECTIONS: defaulted(flag(), 'false',
    'end a WebSocket (close 4401) or event stream (`credential_expired`) when the JWT it was opened with expires, unless the WebSocket client presents a newer one first (a `credential` frame, docs/PROTOCOL.md); off: a connection outlives its JWT'),
  CREDENTIAL_FILES_POLL_MS: defaulted(ms(0), 0,
    'read the `_FILE`s of secrets this often and reload the credentials (as `SIGHUP` does) once a change reads the same at two polls in a row: a Kubernetes Secret volume is updated with no signal to the process; 0: only `SIGHUP` reloads')
}
