/**
 * The security building blocks on their own, with injected clocks: tickets
 * (single use, bound to a session, expiring exactly at their TTL), the frame
 * rate limiter (burst, drop, flood), static tokens and the bearer header,
 * GATEWAY_TOKENS parsing (no tenant may name a parent folder), the JWT
 * authenticator's rules, and the CLI environment allowlist.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { SignJWT, UnsecuredJWT, exportSPKI, generateKeyPair } from 'jose'
import { JwtAuthenticator } from '../../src/auth/jwt.js'
import { StaticTokens, bearerToken } from '../../src/auth/static-tokens.js'
import { TicketBook } from '../../src/auth/tickets.js'
import { buildCliEnv } from '../../src/cli/cli-env.js'
import { ConfigError, parseTokens } from '../../src/config.js'
import { FrameRateLimiter } from '../../src/ws/frame-rate-limiter.js'

const SECRET = 'unit-test-secret-0123456789-0123456789'
const hs = (claims: Record<string, unknown>, exp: string | number | null = '5m', secret = SECRET): Promise<string> => {
  const s = new SignJWT(claims).setProtectedHeader({ alg: 'HS256' })
  if (exp !== null) s.setExpirationTime(exp)
  return s.sign(new TextEncoder().encode(secret))
}

describe('TicketBook', () => {
  it('redeems a ticket once, for its session only, until exactly its TTL', () => {
    let now = 1_000_000
    const book = new TicketBook({ ttlMs: 30_000, now: () => now })
    const a = book.issue('tenant-a', 's1')
    assert.match(a.ticket, /^[A-Za-z0-9_-]{32}$/)
    assert.equal(a.expires_at, new Date(now + 30_000).toISOString())
    assert.equal(book.redeem(a.ticket, 's1'), 'tenant-a')
    assert.equal(book.redeem(a.ticket, 's1'), null, 'single use')

    const b = book.issue('tenant-a', 's1')
    assert.equal(book.redeem(b.ticket, 's2'), null, 'another session')
    assert.equal(book.redeem(b.ticket, 's1'), null, 'spent by the failed attempt')

    const c = book.issue('tenant-a', 's1')
    now += 29_999
    assert.equal(book.redeem(c.ticket, 's1'), 'tenant-a', 'valid 1 ms before its TTL')
    const d = book.issue('tenant-a', 's1')
    now += 30_000
    assert.equal(book.redeem(d.ticket, 's1'), null, 'dead at its TTL')
    assert.equal(book.redeem('', 's1'), null)
    assert.equal(book.redeem('made-up', 's1'), null)
    const tickets = new Set(Array.from({ length: 200 }, () => book.issue('t', 's').ticket))
    assert.equal(tickets.size, 200)
  })
})

describe('FrameRateLimiter', () => {
  it('allows a burst of twice the rate, drops beyond it, refills at the rate, and calls a flood past five bursts of drops', () => {
    let now = 0
    const limiter = new FrameRateLimiter(5, () => now)
    for (let i = 0; i < 10; i++) assert.equal(limiter.take(), 'ok', `burst frame ${i}`)
    assert.equal(limiter.take(), 'dropped')
    now += 200 // one token at 5 per second
    assert.equal(limiter.take(), 'ok')
    assert.equal(limiter.take(), 'dropped')

    const flood = new FrameRateLimiter(5, () => now)
    for (let i = 0; i < 10; i++) flood.take()
    const verdicts = Array.from({ length: 51 }, () => flood.take())
    assert.deepEqual(verdicts.slice(0, 50), Array(50).fill('dropped'))
    assert.equal(verdicts[50], 'flood')

    // Accepted frames work the drop count down: a client that slows down is not a flood.
    const calm = new FrameRateLimiter(5, () => now)
    for (let i = 0; i < 10; i++) calm.take()
    for (let round = 0; round < 20; round++) {
      for (let i = 0; i < 3; i++) assert.notEqual(calm.take(), 'flood')
      now += 1000
    }
  })
})

describe('static tokens and the bearer header', () => {
  it('maps exactly the configured tokens to their tenants', async () => {
    const tokens = new StaticTokens(new Map([['token-tenant-a-0123456789', 'tenant-a'], ['token-tenant-b-0123456789', 'tenant-b']]))
    assert.equal(await tokens.authenticate('token-tenant-a-0123456789'), 'tenant-a')
    assert.equal(await tokens.authenticate('token-tenant-b-0123456789'), 'tenant-b')
    for (const wrong of ['', 'token-tenant-a-012345678', 'token-tenant-a-01234567890', 'TOKEN-TENANT-A-0123456789', ' token-tenant-a-0123456789', 'token-tenant-a-0123456789\n']) {
      assert.equal(await tokens.authenticate(wrong), null, JSON.stringify(wrong))
    }
  })

  it('reads `Bearer <token>` and nothing else', () => {
    assert.equal(bearerToken('Bearer abc'), 'abc')
    assert.equal(bearerToken('bearer abc'), 'abc')
    assert.equal(bearerToken('Bearer   abc  '), 'abc')
    for (const bad of [undefined, '', 'Bearer', 'Bearer ', 'Bearer a b', 'Basic abc', 'abc', 'Bearerabc', 'Token abc']) {
      assert.equal(bearerToken(bad), null, JSON.stringify(bad))
    }
  })
})

describe('GATEWAY_TOKENS', () => {
  it('refuses tenants that would name a parent folder, or any path, and short tokens', () => {
    for (const text of ['token-0123456789abcdef=..', 'token-0123456789abcdef=.', 'token-0123456789abcdef=a/b', 'token-0123456789abcdef=', 'token-0123456789abcdef', 'short=tenant-a', `token-0123456789abcdef=${'t'.repeat(65)}`]) {
      assert.throws(() => parseTokens(text), ConfigError, text)
    }
    assert.deepEqual([...parseTokens('token-0123456789abcdef=...,tok=en-0123456789abcdef=a.b_c-D')], [['token-0123456789abcdef', '...'], ['tok=en-0123456789abcdef', 'a.b_c-D']])
  })
})

describe('JwtAuthenticator', () => {
  it('takes the tenant from the configured claim, and refuses bad tenants, times, algorithms, issuers and audiences', async () => {
    const jwt = new JwtAuthenticator({ secret: SECRET, tenantClaim: 'org', issuer: 'https://issuer.example', audience: 'claude-gateway' })
    const good = (claims: Record<string, unknown>): Promise<string> =>
      new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setIssuer('https://issuer.example').setAudience('claude-gateway').setExpirationTime('5m').sign(new TextEncoder().encode(SECRET))
    assert.equal(await jwt.authenticate(await good({ org: 'acme' })), 'acme')
    for (const org of ['..', '.', 'a/b', '', 'x'.repeat(65), 'tenant a', 42, null]) {
      assert.equal(await jwt.authenticate(await good({ org })), null, JSON.stringify(org))
    }
    assert.equal(await jwt.authenticate(await good({ tenant: 'acme' })), null, 'the claim is org, not tenant')
    assert.equal(await jwt.authenticate(await hs({ org: 'acme' })), null, 'no issuer or audience')
    const wrongAudience = await new SignJWT({ org: 'acme' }).setProtectedHeader({ alg: 'HS256' }).setIssuer('https://issuer.example').setAudience('other').setExpirationTime('5m').sign(new TextEncoder().encode(SECRET))
    assert.equal(await jwt.authenticate(wrongAudience), null)
    const noExp = await new SignJWT({ org: 'acme' }).setProtectedHeader({ alg: 'HS256' }).setIssuer('https://issuer.example').setAudience('claude-gateway').sign(new TextEncoder().encode(SECRET))
    assert.equal(await jwt.authenticate(noExp), null)
    const none = new UnsecuredJWT({ org: 'acme' }).setIssuer('https://issuer.example').setAudience('claude-gateway').setExpirationTime('5m').encode()
    assert.equal(await jwt.authenticate(none), null)
    for (const junk of ['', 'a.b', 'a.b.c', 'not-a-jwt', '...', 'a.b.c.d']) assert.equal(await jwt.authenticate(junk), null, junk)
  })

  it('with a public key, accepts only that key’s algorithm family (no HMAC with the PEM as secret)', async () => {
    const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true })
    const pem = await exportSPKI(publicKey)
    const jwt = new JwtAuthenticator({ publicKey: pem, tenantClaim: 'tenant' })
    const signed = await new SignJWT({ tenant: 'acme' }).setProtectedHeader({ alg: 'ES256' }).setExpirationTime('5m').sign(privateKey)
    assert.equal(await jwt.authenticate(signed), 'acme')
    assert.equal(await jwt.authenticate(await hs({ tenant: 'acme' }, '5m', pem)), null)
    assert.equal(await jwt.authenticate(await hs({ tenant: 'acme' })), null, 'no secret configured: HS256 is never accepted')
  })
})

describe('CLI environment allowlist', () => {
  it('passes the allowlist and prefixes, never the gateway secrets or loader variables, and forces the entrypoint', () => {
    const env = buildCliEnv({
      PATH: '/usr/bin', HOME: '/home/x', LC_ALL: 'C', ANTHROPIC_API_KEY: 'k', CLAUDE_CODE_USE_BEDROCK: '1', MCP_TIMEOUT: '5',
      GATEWAY_TOKENS: 's', REDIS_URL: 's', JWT_SECRET: 's', JWT_PUBLIC_KEY: 's',
      AWS_SECRET_ACCESS_KEY: 's', NODE_OPTIONS: '--require x', LD_PRELOAD: 'x.so', BASH_ENV: 'x', GIT_SSH_COMMAND: 'x', PYTHONPATH: 'x',
      CLAUDE_CODE_ENTRYPOINT: 'spoofed', UNDEFINED: undefined
    }, { CLAUDE_CONFIG_DIR: '/data/claude-config/tenant-a' })
    assert.deepEqual(Object.keys(env).sort(), ['ANTHROPIC_API_KEY', 'CLAUDE_CODE_ENTRYPOINT', 'CLAUDE_CODE_USE_BEDROCK', 'CLAUDE_CONFIG_DIR', 'HOME', 'LC_ALL', 'MCP_TIMEOUT', 'PATH'])
    assert.equal(env.CLAUDE_CODE_ENTRYPOINT, 'claude-gateway')
    assert.equal(env.CLAUDE_CONFIG_DIR, '/data/claude-config/tenant-a')
  })
})
