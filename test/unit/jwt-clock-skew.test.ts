/**
 * A JWT's issuer and the gateway never share a clock exactly. Issuers set
 * `nbf` (and `iat`) to their own now, so with an issuer a few seconds
 * ahead a token used at once is refused (401) until the gateway's clock
 * catches up. With `clockToleranceSeconds` a future `nbf` within it is
 * forgiven; `exp` never is: an expired token is refused to the second. The
 * default (0) keeps today's behaviour, which claude-remote's renewal relies
 * on (a token not valid yet is refused).
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { SignJWT } from 'jose'
import { JwtAuthenticator } from '../../src/auth/jwt.js'
import { loadConfig } from '../../src/config.js'

const SECRET = 's'.repeat(40)
const key = new TextEncoder().encode(SECRET)
const TOLERANCE = 30

/** An HS256 token of tenant-a minted by an issuer whose clock reads `issuerNow` (Unix seconds). */
async function minted (issuerNow: number, lifetime: number): Promise<string> {
  return await new SignJWT({ tenant: 'tenant-a' })
    .setProtectedHeader({ alg: 'HS256' })
    .setIssuedAt(issuerNow)
    .setNotBefore(issuerNow)
    .setExpirationTime(issuerNow + lifetime)
    .sign(key)
}

describe('JWT time claims against a clock that differs from the issuer\'s', () => {
  const auth = new JwtAuthenticator({ secret: SECRET, tenantClaim: 'tenant', maxTtlSeconds: 3600, clockToleranceSeconds: TOLERANCE })
  const now = (): number => Math.floor(Date.now() / 1000)

  it('with a tolerance, accepts a token used at once from an issuer whose clock runs a few seconds ahead', async () => {
    assert.equal(await auth.authenticate(await minted(now() + 5, 600)), 'tenant-a')
  })

  it('with a tolerance, still refuses a token not valid for longer than it, and one that expired, however recently', async () => {
    assert.equal(await auth.authenticate(await minted(now() + TOLERANCE + 60, 600)), null, 'nbf beyond the tolerance')
    assert.equal(await auth.authenticate(await minted(now() - 601, 600)), null, 'exp a second ago')
    assert.equal(await auth.authenticate(await minted(now() - 60, 600)), 'tenant-a', 'a token minted a minute ago is fine')
  })

  it('with a tolerance, keeps JWT_MAX_TTL_SECONDS: a long token from an issuer ahead is refused', async () => {
    assert.equal(await auth.authenticate(await minted(now() + 5, 3600)), null, 'exp − now is over the maximum')
    assert.equal(await auth.authenticate(await minted(now() + 5, 3000)), 'tenant-a')
  })

  it('without one (the default), a token not valid yet is refused', async () => {
    const strict = new JwtAuthenticator({ secret: SECRET, tenantClaim: 'tenant', maxTtlSeconds: 3600 })
    assert.equal(await strict.authenticate(await minted(now() + 5, 600)), null)
    assert.equal(await strict.authenticate(await minted(now(), 600)), 'tenant-a')
  })

  it('JWT_CLOCK_TOLERANCE_SECONDS sets it (0 by default, at most 300): a token from an issuer ahead is taken only with it', async () => {
    const env = { JWT_SECRET: SECRET }
    const token = await minted(now() + 5, 600)
    const strict = loadConfig(env).jwt
    const lenient = loadConfig({ ...env, JWT_CLOCK_TOLERANCE_SECONDS: '30' }).jwt
    assert.ok(strict !== null && lenient !== null)
    assert.equal(await new JwtAuthenticator(strict).authenticate(token), null)
    assert.equal(await new JwtAuthenticator(lenient).authenticate(token), 'tenant-a')
    assert.throws(() => loadConfig({ ...env, JWT_CLOCK_TOLERANCE_SECONDS: '301' }), /JWT_CLOCK_TOLERANCE_SECONDS/)
  })
})
