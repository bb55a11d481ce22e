/**
 * The security building blocks on their own, with injected clocks: tickets
 * (single use, bound to a session, expiring exactly at their TTL), the frame
 * rate limiter (burst, drop, flood), static tokens and the bearer header,
 * GATEWAY_TOKENS parsing (no tenant may name a parent folder), the JWT
 * authenticator's rules, and the CLI environment allowlist.
 */
import assert from 'node:assert/strict'
import { createHmac } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { SignJWT, UnsecuredJWT, exportSPKI, generateKeyPair } from 'jose'
import { JwtAuthenticator } from '../../src/auth/jwt.js'
import { StaticTokens, bearerToken } from '../../src/auth/static-tokens.js'
import { TicketBook } from '../../src/auth/tickets.js'
import { WS_TICKET_MAX_CHARS } from '../../src/protocol/session-options.js'
import { MemoryStore } from '../../src/store/memory.js'
import { buildCliEnv } from '../../src/cli/cli-env.js'
import { ConfigError, loadConfig, parseTokens, parseTrustProxy } from '../../src/config.js'
import { isLoopback } from '../../src/net/loopback.js'
import { redactUrl } from '../../src/net/redact.js'
import { FrameRateLimiter } from '../../src/ws/frame-rate-limiter.js'

const SECRET = 'unit-test-secret-0123456789-0123456789'
const hs = (claims: Record<string, unknown>, exp: string | number | null = '5m', secret = SECRET): Promise<string> => {
  const s = new SignJWT(claims).setProtectedHeader({ alg: 'HS256' })
  if (exp !== null) s.setExpirationTime(exp)
  return s.sign(new TextEncoder().encode(secret))
}

describe('TicketBook', () => {
  it('redeems a ticket once, for its session only, until exactly its TTL, on any node sharing the store', async () => {
    let now = 1_000_000
    const store = new MemoryStore({ retention: { maxEventsPerSession: 10, ttlSecondsAfterEnd: 0 }, now: () => now })
    const claimOnce = async (key: string, ttlMs: number): Promise<boolean> => await store.claimOnce(key, ttlMs)
    const book = new TicketBook({ ttlMs: 30_000, secret: 'shared-secret', claimOnce, now: () => now })
    const otherNode = new TicketBook({ ttlMs: 30_000, secret: 'shared-secret', claimOnce, now: () => now })
    const a = book.issue('tenant-a', 's1', null)
    assert.match(a.ticket, /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/)
    assert.equal(a.expires_at, new Date(now + 30_000).toISOString())
    assert.equal((await otherNode.redeem(a.ticket, 's1'))?.tenant, 'tenant-a', 'issued on one node, redeemed on another')
    assert.equal(await book.redeem(a.ticket, 's1'), null, 'single use, across nodes')

    const b = book.issue('tenant-a', 's1', null)
    assert.equal(await book.redeem(b.ticket, 's2'), null, 'another session')
    assert.equal(await book.redeem(b.ticket, 's1'), null, 'spent by the failed attempt')

    const c = book.issue('tenant-a', 's1', null)
    now += 29_999
    assert.equal((await book.redeem(c.ticket, 's1'))?.tenant, 'tenant-a', 'valid 1 ms before its TTL')
    const d = book.issue('tenant-a', 's1', null)
    now += 30_000
    assert.equal(await book.redeem(d.ticket, 's1'), null, 'dead at its TTL')
    assert.equal(await book.redeem('', 's1'), null)
    assert.equal(await book.redeem('made-up', 's1'), null)

    // Forged: another secret, or the grant changed under its MAC.
    const e = book.issue('tenant-a', 's1', null)
    const stranger = new TicketBook({ ttlMs: 30_000, secret: 'another-secret', claimOnce, now: () => now })
    assert.equal(await stranger.redeem(e.ticket, 's1'), null)
    const [body, mac] = e.ticket.split('.') as [string, string]
    const forged = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(body, 'base64url').toString()), t: 'tenant-b' })).toString('base64url')
    assert.equal(await book.redeem(`${forged}.${mac}`, 's1'), null)
    assert.equal((await book.redeem(e.ticket, 's1'))?.tenant, 'tenant-a', 'the genuine ticket was not spent by forgeries')
    const tickets = new Set(Array.from({ length: 200 }, () => book.issue('t', 's', null).ticket))
    assert.equal(tickets.size, 200)
  })

  it('carries the credential it was issued to, sealed: no part of the ticket shows it, and redeeming gives it back', async () => {
    const claimOnce = async (): Promise<boolean> => true
    const book = new TicketBook({ ttlMs: 30_000, secret: 'shared-secret', claimOnce })
    const otherNode = new TicketBook({ ttlMs: 30_000, secret: 'shared-secret', claimOnce })
    const credential = 'tok_abcdefghijklmnopqrstuvwxyz0123456789'
    const { ticket } = book.issue('tenant-a', 's1', credential)
    assert.match(ticket, /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/)
    const readable = ticket.split('.').map((part) => Buffer.from(part, 'base64url').toString('latin1')).join('\n')
    assert.ok(!ticket.includes(credential) && !readable.includes(credential) && !readable.includes('abcdefghij'), 'the credential is not readable in the ticket')
    assert.deepEqual(await otherNode.redeem(ticket, 's1'), { tenant: 'tenant-a', credential }, 'any node opens it')
    const sealedPart = (): string => book.issue('tenant-a', 's1', credential).ticket.split('.')[1] as string
    assert.notEqual(sealedPart(), sealedPart(), 'sealed afresh each time')
    assert.deepEqual(await book.redeem(book.issue('tenant-a', 's1', null).ticket, 's1'), { tenant: 'tenant-a', credential: null })

    // Parts changed under a MAC that matches them (as only a holder of the secret could make): refused.
    const key = createHmac('sha256', 'shared-secret').update('cgw-ws-ticket-v1').digest()
    const signed = (body: string): string => `${body}.${createHmac('sha256', key).update(body).digest('base64url')}`
    const [grant, sealed] = book.issue('tenant-a', 's1', credential).ticket.split('.') as [string, string]
    assert.equal(await book.redeem(signed(`${grant}.${sealed.slice(0, -4)}`), 's1'), null, 'a cut credential')
    assert.equal(await book.redeem(signed(`${grant}.${sealed}.${sealed}`), 's1'), null, 'a part too many')
    assert.deepEqual(await book.redeem(signed(`${grant}.${sealed}`), 's1'), { tenant: 'tenant-a', credential }, 'the same parts signed again are taken')

    // A credential too long for a URL is refused at issue, with a way out.
    assert.throws(() => book.issue('tenant-a', 's1', 'x'.repeat(6_200)), (err: any) => err.code === 'bad_request' && /bearer\./.test(err.message))
    assert.ok(book.issue('tenant-a', 's1', 'x'.repeat(5_000)).ticket.length <= WS_TICKET_MAX_CHARS, 'a JWT of 5,000 characters fits')
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
      PATH: join(tmpdir(), 'bin'), HOME: join(tmpdir(), 'home-x'), LC_ALL: 'C', ANTHROPIC_API_KEY: 'k', CLAUDE_CODE_USE_BEDROCK: '1', MCP_TIMEOUT: '5',
      GATEWAY_TOKENS: 's', REDIS_URL: 's', JWT_SECRET: 's', JWT_PUBLIC_KEY: 's',
      AWS_SECRET_ACCESS_KEY: 's', NODE_OPTIONS: '--require x', LD_PRELOAD: 'x.so', BASH_ENV: 'x', GIT_SSH_COMMAND: 'x', PYTHONPATH: 'x',
      CLAUDE_CODE_ENTRYPOINT: 'spoofed', UNDEFINED: undefined
    }, { CLAUDE_CONFIG_DIR: '/data/claude-config/tenant-a' })
    assert.deepEqual(Object.keys(env).sort(), ['ANTHROPIC_API_KEY', 'CLAUDE_CODE_ENTRYPOINT', 'CLAUDE_CODE_SDK_READS_SESSION_STATE', 'CLAUDE_CODE_USE_BEDROCK', 'CLAUDE_CONFIG_DIR', 'HOME', 'LC_ALL', 'MCP_TIMEOUT', 'PATH'])
    assert.equal(env.CLAUDE_CODE_ENTRYPOINT, 'claude-gateway')
    assert.equal(env.CLAUDE_CODE_SDK_READS_SESSION_STATE, '1') // session_state_changed frames for SDK clients and UIs
    assert.equal(env.CLAUDE_CONFIG_DIR, '/data/claude-config/tenant-a')
  })
})

describe('CLI environment: the documented list and CLI_ENV_ALLOW', () => {
  const source = {
    PATH: '/usr/bin', ANTHROPIC_API_KEY: 'k', ANTHROPIC_BASE_URL: 'https://api.example', ANTHROPIC_DEFAULT_SONNET_MODEL: 'm', CLAUDE_CODE_USE_VERTEX: '1',
    VERTEX_REGION_CLAUDE_4_5_SONNET: 'europe-west1', CLOUD_ML_REGION: 'us-east5',
    ANTHROPIC_ADMIN_KEY: 'admin', ANTHROPIC_ANYTHING: 'x', MCP_SERVERS: 'x', MCP_CLIENT_SECRET: 'x', CLAUDE_CODE_OAUTH_REFRESH_TOKEN: 'x', CLAUDE_CODE_DONT_INHERIT_ENV: '1',
    AWS_REGION: 'eu-west-1', AWS_SECRET_ACCESS_KEY: 'aws', GOOGLE_APPLICATION_CREDENTIALS: '/creds.json', EXTRA_NAME: 'e', EXTRA_NAME_2: 'e2',
    GATEWAY_TOKENS: 's', GATEWAY_TOKENS_FILE: '/run/secrets/t', REDIS_URL: 's', JWT_SECRET: 's', STORE_SECRET: 's'
  }

  it('passes the listed names only: never an admin key, nor any other ANTHROPIC_*, MCP_* or CLAUDE_CODE_* variable', () => {
    const env = buildCliEnv(source)
    assert.deepEqual(Object.keys(env).sort(), [
      'ANTHROPIC_API_KEY', 'ANTHROPIC_BASE_URL', 'ANTHROPIC_DEFAULT_SONNET_MODEL', 'CLAUDE_CODE_ENTRYPOINT', 'CLAUDE_CODE_SDK_READS_SESSION_STATE', 'CLAUDE_CODE_USE_VERTEX',
      'CLOUD_ML_REGION', 'PATH', 'VERTEX_REGION_CLAUDE_4_5_SONNET'
    ])
  })

  it('adds CLI_ENV_ALLOW names and prefixes (`AWS_`, `GOOGLE_*`), but never the gateway secrets, and a bare `*` adds nothing', () => {
    const env = buildCliEnv(source, {}, ['AWS_', 'GOOGLE_*', 'EXTRA_NAME', 'GATEWAY_*', 'REDIS_URL', 'JWT_SECRET', 'STORE_', '*', ''])
    for (const name of ['AWS_REGION', 'AWS_SECRET_ACCESS_KEY', 'GOOGLE_APPLICATION_CREDENTIALS', 'EXTRA_NAME']) assert.equal(env[name], source[name as keyof typeof source], name)
    for (const name of ['EXTRA_NAME_2', 'GATEWAY_TOKENS', 'GATEWAY_TOKENS_FILE', 'REDIS_URL', 'JWT_SECRET', 'STORE_SECRET', 'ANTHROPIC_ADMIN_KEY', 'MCP_SERVERS']) assert.equal(env[name], undefined, name)
    // Through the configuration too.
    assert.deepEqual(loadConfig({ CLI_ENV_ALLOW: ' AWS_, GOOGLE_* ,EXTRA_NAME ' }).cliEnvAllow, ['AWS_', 'GOOGLE_*', 'EXTRA_NAME'])
  })
})

describe('isLoopback', () => {
  it('is true for all of 127.0.0.0/8, ::1 in any spelling and localhost; false for everything else', () => {
    for (const host of ['127.0.0.1', '127.0.0.2', '127.255.255.254', '::1', '[::1]', '0:0:0:0:0:0:0:1', '::ffff:127.0.0.5', 'localhost', 'LocalHost']) assert.equal(isLoopback(host), true, host)
    for (const host of ['0.0.0.0', '::', '10.0.0.1', '128.0.0.1', '::2', '1::1', '::ffff:10.0.0.1', 'evil.localhost', 'localhost.', '127.0.0.1.evil.example', '', 'example.com']) assert.equal(isLoopback(host), false, host)
  })
})

describe('TRUST_PROXY and the HTTP timeouts in the configuration', () => {
  it("reads Fastify's forms and refuses anything else at start", () => {
    assert.equal(parseTrustProxy('true'), true)
    assert.equal(parseTrustProxy('false'), false)
    assert.equal(parseTrustProxy('2'), 2)
    assert.deepEqual(parseTrustProxy('10.0.0.0/8, 127.0.0.1,::1,fd00::/8,loopback'), ['10.0.0.0/8', '127.0.0.1', '::1', 'fd00::/8', 'loopback'])
    for (const bad of ['yes', '10.0.0.0/33', '::1/129', 'proxy.example', '10.0.0.1/8/8', '-1']) assert.equal(parseTrustProxy(bad), null, bad)
    assert.equal(loadConfig({}).trustProxy, false, 'off by default')
    assert.throws(() => loadConfig({ TRUST_PROXY: 'proxy.example' }), /TRUST_PROXY/)
    assert.throws(() => loadConfig({ REQUEST_TIMEOUT_MS: '1000', HEADERS_TIMEOUT_MS: '2000' }), /HEADERS_TIMEOUT_MS/)
  })
})

describe('JWT_MAX_TTL_SECONDS', () => {
  it('refuses a JWT living longer than the maximum, measured from iat, or from now without iat or with a future iat', async () => {
    const jwt = new JwtAuthenticator({ secret: SECRET, tenantClaim: 'tenant', maxTtlSeconds: 3600 })
    const now = Math.floor(Date.now() / 1000)
    const sign = (claims: Record<string, unknown>): Promise<string> => new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).sign(new TextEncoder().encode(SECRET))
    assert.equal(await jwt.authenticate(await sign({ tenant: 'acme', iat: now, exp: now + 3600 })), 'acme')
    assert.equal(await jwt.authenticate(await sign({ tenant: 'acme', exp: now + 1800 })), 'acme')
    assert.equal(await jwt.authenticate(await sign({ tenant: 'acme', iat: now - 3000, exp: now + 1000 })), null, 'issued 3000 s ago for 4000 s')
    assert.equal(await jwt.authenticate(await sign({ tenant: 'acme', iat: now, exp: now + 3601 })), null)
    assert.equal(await jwt.authenticate(await sign({ tenant: 'acme', exp: now + 30 * 86400 })), null, 'no iat: from now')
    assert.equal(await jwt.authenticate(await sign({ tenant: 'acme', iat: now + 30 * 86400 - 60, exp: now + 30 * 86400 })), null, 'a future iat does not shorten it')
    assert.equal(loadConfig({ JWT_SECRET: SECRET }).jwt?.maxTtlSeconds, 86400, 'one day by default')
  })
})

describe('redactUrl', () => {
  it('blanks token, ticket and access_token query values and keeps the rest', () => {
    assert.equal(redactUrl('/v1/sessions/x/ws?role=observer&ticket=abc.def&after=3'), '/v1/sessions/x/ws?role=observer&ticket=[REDACTED]&after=3')
    assert.equal(redactUrl('/v1/sessions?token=s3cret'), '/v1/sessions?token=[REDACTED]')
    assert.equal(redactUrl('/v1/x?TOKEN=a&access_token=b#frag'), '/v1/x?TOKEN=[REDACTED]&access_token=[REDACTED]#frag')
    assert.equal(redactUrl('/v1/x?mytoken=keep&tokens=keep'), '/v1/x?mytoken=keep&tokens=keep')
  })
})
