/**
 * LiveCredentials (src/auth/live-credentials.ts) on its own, with a clock the
 * test moves (node:test's mock timers): a listed connection ends `expired`
 * exactly at its credential's expiry, even one past setTimeout's reach
 * (about 24.8 days); a credential presented in time moves the deadline, one
 * of another tenant changes nothing; a reload ends what it refuses
 * (`revoked`), judged on the credential presented last; unlisted
 * connections are never ended. A reload and a presented credential being
 * checked at once (the real StaticTokens and JWT authenticators): the
 * reload judges the credential the connection moves to, and a presented
 * one is checked again by the credentials the reload brought.
 */
import assert from 'node:assert/strict'
import { describe, it, mock } from 'node:test'
import type { TestContext } from 'node:test'
import { type CredentialEnd, LiveCredentials, MAX_REFUSED } from '../../src/auth/live-credentials.js'
import { SignJWT } from 'jose'
import { AnyOf, JwtAuthenticator } from '../../src/auth/jwt.js'
import { type Authenticator, StaticTokens } from '../../src/auth/static-tokens.js'

/** Credentials read `<tenant>:<expiry ms>`; `nope` is refused. */
const authenticator = (refused: ReadonlySet<string> = new Set()): Authenticator => ({
  authenticate: async (token) => token === 'nope' || refused.has(token) ? null : token.split(':')[0] ?? null
})
const expiresAt = (token: string): number | null => {
  const ms = Number(token.split(':')[1])
  return Number.isFinite(ms) ? ms : null
}

function clock (t: TestContext): { now: () => number, tick: (ms: number) => void } {
  mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 })
  t.after(() => mock.timers.reset())
  return { now: () => Date.now(), tick: (ms) => mock.timers.tick(ms) }
}

function connection (credential: string): { tenant: string, credential: string, ends: CredentialEnd[], end: (why: CredentialEnd) => void } {
  const ends: CredentialEnd[] = []
  return { tenant: credential.split(':')[0] as string, credential, ends, end: (why) => { ends.push(why) } }
}

describe('LiveCredentials', () => {
  it('ends a connection at its credential\'s expiry, not a millisecond before, even past setTimeout\'s reach', (t) => {
    const { now, tick } = clock(t)
    const live = new LiveCredentials(authenticator(), { expiresAt, now })
    const soon = connection('a:1000')
    const far = connection(`a:${2 ** 31 + 5000}`)
    const never = connection('a:none')
    assert.equal(live.add(soon).expiresAt, 1000)
    live.add(far)
    assert.equal(live.add(never).expiresAt, null)
    tick(999)
    assert.deepEqual(soon.ends, [])
    tick(1)
    assert.deepEqual(soon.ends, ['expired'])
    tick(2 ** 31 - 1000) // setTimeout's longest delay: the far one is armed again, not ended
    assert.deepEqual(far.ends, [])
    tick(5000)
    assert.deepEqual(far.ends, ['expired'])
    assert.deepEqual(never.ends, [])
    assert.equal(live.size, 1, 'the ended ones are off the list')
  })

  it('a credential presented in time moves the deadline; another tenant\'s, or a refused one, changes nothing', async (t) => {
    const { now, tick } = clock(t)
    const live = new LiveCredentials(authenticator(), { expiresAt, now })
    const c = connection('a:1000')
    const listed = live.add(c)
    assert.equal(await listed.present('b:9000'), false)
    assert.equal(await listed.present('nope'), false)
    assert.equal(listed.expiresAt, 1000)
    assert.deepEqual(await listed.present('a:5000'), { expiresAt: 5000 })
    assert.equal(c.credential, 'a:5000')
    tick(4999)
    assert.deepEqual(c.ends, [])
    tick(1)
    assert.deepEqual(c.ends, ['expired'])
    assert.deepEqual(await listed.present('a:9000'), false, 'an ended connection takes nothing')
  })

  it('ends a connection at its fifth refused credential: presenting is authenticating, out of reach of the failure limit per address', async () => {
    const live = new LiveCredentials(authenticator(), { expiresAt })
    const c = connection('a:none')
    const listed = live.add(c)
    for (let i = 1; i < MAX_REFUSED; i++) assert.equal(await listed.present('nope'), false)
    assert.deepEqual(c.ends, [])
    assert.deepEqual(await listed.present('a:new'), { expiresAt: null }, 'a good one between does not reset the count')
    assert.equal(await listed.present('b:9'), false)
    assert.deepEqual(c.ends, ['refused'])
    assert.equal(live.size, 0)
  })

  it('a reload ends what the new authenticator refuses (revoked), judged on the credential presented last; unlisted ones are never ended', async (t) => {
    const { now, tick } = clock(t)
    const live = new LiveCredentials(authenticator(), { expiresAt, now })
    const kept = connection('a:old')
    const dropped = connection('a:other')
    const gone = connection('a:old')
    const keptListing = live.add(kept)
    live.add(dropped)
    live.add(gone).unlist()
    assert.deepEqual(await keptListing.present('a:new'), { expiresAt: null })
    assert.equal(await live.replace(authenticator(new Set(['a:old', 'a:other']))), 1)
    assert.deepEqual([kept.ends, dropped.ends, gone.ends], [[], ['revoked'], []])
    tick(10 ** 9)
    assert.deepEqual(kept.ends, [])
  })
})

const JWT_SECRET = 'jwt-secret-for-live-credentials-0123456789ab'
const OLD = 'token-old-000000000001'
const NEW = 'token-new-000000000002'

/** A connection of tenant-a, whatever its credential says. */
function connectionOfA (credential: string): ReturnType<typeof connection> {
  return { ...connection(credential), tenant: 'tenant-a' }
}

describe('a credential presented while a reload runs (both checks asynchronous)', () => {
  it('a connection presenting the new token as the reload revokes its old one keeps its connection: the reload waits for the presented one and judges it', async () => {
    // The operator added NEW next to OLD; the client moves to NEW; the operator then drops OLD (SIGHUP).
    const live = new LiveCredentials(new StaticTokens(new Map([[OLD, 'tenant-a'], [NEW, 'tenant-a']])))
    const c = connectionOfA(OLD)
    const listed = live.add(c)
    const presented = listed.present(NEW) // the credential frame arrives ...
    const ended = live.replace(new StaticTokens(new Map([[NEW, 'tenant-a']]))) // ... as the reload runs
    const answer = await presented
    assert.deepEqual(answer, { expiresAt: null }, 'the client was told its new credential was taken')
    assert.equal(c.credential, NEW)
    await ended
    assert.deepEqual(c.ends, [], 'not ended (4401) on the credential it had before')
  })

  it('a credential presented just before a reload that revokes it is checked again by the new credentials, not kept', async () => {
    const live = new LiveCredentials(new StaticTokens(new Map([[OLD, 'tenant-a'], [NEW, 'tenant-a']])))
    const c = connectionOfA(OLD)
    const listed = live.add(c)
    const presented = listed.present(NEW) // checked by the authenticator of before the reload ...
    const ended = live.replace(new StaticTokens(new Map([[OLD, 'tenant-a']]))) // ... which revokes NEW
    await Promise.all([presented, ended])
    assert.equal(await live.authenticate(NEW), null, 'NEW is refused for any request now')
    assert.ok(c.credential !== NEW || c.ends.length > 0, 'it does not live by the revoked NEW')
  })

  it('with JWTs (WebCrypto: a check spans event-loop turns), a reload handled while a presented JWT is checked keeps the connection that moved to it', async () => {
    const jwt = await new SignJWT({ tenant: 'tenant-a' }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime('10m').sign(new TextEncoder().encode(JWT_SECRET))
    const jwts = new JwtAuthenticator({ secret: JWT_SECRET, tenantClaim: 'tenant' })
    // Static token OLD is being retired in favour of JWTs; the client has moved to a JWT.
    const live = new LiveCredentials(new AnyOf([new StaticTokens(new Map([[OLD, 'tenant-a']])), jwts]))
    const c = connectionOfA(OLD)
    const listed = live.add(c)
    let settled = false
    const presented = listed.present(jwt).finally(() => { settled = true }) // a 'message' event's task
    // The SIGHUP handler: its own later task (setImmediate), as a signal is delivered.
    const ended = await new Promise<number>((resolve) => setImmediate(() => {
      assert.equal(settled, false, 'the JWT check was still running when the signal came')
      void live.replace(new AnyOf([new StaticTokens(new Map()), jwts])).then(resolve)
    }))
    const answer = await presented
    assert.deepEqual(c.ends, [], `the connection that presented a valid JWT before the reload was ended (${c.ends.join()}: close 4401); its credential frame was answered ${JSON.stringify(answer)} (credential_refused), the reload counted ${ended} ended`)
  })
})
