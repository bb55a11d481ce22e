/**
 * LiveCredentials (src/auth/live-credentials.ts) on its own, with a clock the
 * test moves (node:test's mock timers): a listed connection ends `expired`
 * exactly at its credential's expiry, even one past setTimeout's reach
 * (about 24.8 days); a credential presented in time moves the deadline, one
 * of another tenant changes nothing; a reload ends what it refuses
 * (`revoked`), judged on the credential presented last; unlisted
 * connections are never ended.
 */
import assert from 'node:assert/strict'
import { describe, it, mock } from 'node:test'
import type { TestContext } from 'node:test'
import { type CredentialEnd, LiveCredentials, MAX_REFUSED } from '../../src/auth/live-credentials.js'
import type { Authenticator } from '../../src/auth/static-tokens.js'

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
