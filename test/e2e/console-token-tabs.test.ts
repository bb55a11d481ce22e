/**
 * Two console tabs signed in with the same JWT, which is about to end: both
 * ask for a newer one, the person gives it in one tab only. The other tab,
 * still on the old JWT, is sent back to sign-in when the gateway refuses it;
 * the tab that was given the newer token must stay signed in (it is good
 * for ten minutes), not be signed out with it. "Sign out", pressed, still
 * signs out every tab.
 *
 * The banner is asked on the pages' clock (Playwright's, moved to just
 * before the JWT's end), the JWT ends on the gateway's real one: the test waits
 * for that end only, not for the fifth of the JWT's life before it as well.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { SignJWT } from 'jose'
import { launchChromium } from '../support/chromium.js'
import { STEP_MS, consoleGateway } from '../support/console-page.js'

const JWT_SECRET = 'jwt-secret-for-tests-0123456789-abcdefghijklmnop'

async function jwt (tenant: string, exp: number): Promise<string> {
  return await new SignJWT({ tenant }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime(exp).sign(new TextEncoder().encode(JWT_SECRET))
}

const inSeconds = (s: number): number => Math.floor(Date.now() / 1000) + s

test('a tab given a newer token stays signed in when another tab\'s old JWT ends', { timeout: 120_000 }, async (t) => {
  const gw = await consoleGateway(t, { env: { JWT_SECRET } })
  const browser = await launchChromium()
  t.after(() => browser.close())
  const context = await browser.newContext()
  await context.clock.install()
  const renewed = await context.newPage()
  const other = await context.newPage()
  const pageErrors: string[] = []
  for (const page of [renewed, other]) page.on('pageerror', (err) => pageErrors.push(err.message))

  await renewed.goto(`${gw.url}/`)
  // Two sign-ins and a renewal (2–3 s on a busy machine) before it ends.
  const exp = inSeconds(10)
  await renewed.getByTestId('signin-token').fill(await jwt('tenant-a', exp))
  await renewed.getByTestId('signin-submit').click()
  await renewed.getByTestId('session-list').waitFor({ timeout: STEP_MS })
  // The second tab gets the token from the first (BroadcastChannel), as a session link opened in a new tab does.
  await other.goto(`${gw.url}/`)
  await other.getByTestId('session-list').waitFor({ timeout: STEP_MS })

  // Asked a fifth of its life before it ends (2 s): the tabs' clock goes to just before the end, firing what
  // falls due on the way, once; the banner is drawn in the timer's own task, so it is there now if it was asked.
  await context.clock.pauseAt(exp * 1000 - 200)
  assert.equal(await renewed.getByTestId('renew-banner').count(), 1, 'not asked before the JWT ends')
  await context.clock.resume()
  await renewed.getByTestId('renew-token').fill(await jwt('tenant-a', inSeconds(600)))
  await renewed.getByTestId('renew-submit').click()
  await renewed.getByTestId('renew-banner').waitFor({ state: 'detached', timeout: STEP_MS })
  assert.ok(Date.now() < exp * 1000, 'renewed before the old JWT ended')

  // The other tab's old JWT ends: its next poll is refused and it goes back to sign-in.
  await other.getByTestId('signin-token').waitFor({ timeout: STEP_MS })
  assert.match(await other.getByTestId('signin-error').innerText(), /no longer accepts your token/)
  // The renewed tab polls on after that with its newer token, or is sent back to sign-in: whichever comes first.
  const outcome = Promise.race([
    renewed.waitForResponse((r) => r.url().includes('/v1/') && r.status() === 200, { timeout: STEP_MS }).then(() => 'polled', () => 'no poll'),
    renewed.getByTestId('signin-token').waitFor({ timeout: STEP_MS }).then(() => 'signed out', () => 'no sign-in')
  ])
  // Its next polls (due within 5 s) made now, on the tabs' clock.
  await context.clock.fastForward(5000)
  assert.equal(await outcome, 'polled', 'the tab given a newer token is signed out with the other one')
  assert.equal(await renewed.getByTestId('signin-token').count(), 0, 'the tab given a newer token is signed out with the other one')
  assert.equal(await renewed.getByTestId('session-list').count(), 1)

  // "Sign out", pressed, still signs out every tab.
  await other.getByTestId('signin-token').fill(await jwt('tenant-a', inSeconds(600)))
  await other.getByTestId('signin-submit').click()
  await other.getByTestId('session-list').waitFor({ timeout: STEP_MS })
  // Pressed in the tab in front, as a person does (a click in a tab behind waits on its throttled frames, 2 s).
  await renewed.bringToFront()
  await renewed.getByTestId('signout').click()
  await other.getByTestId('signin-token').waitFor({ timeout: STEP_MS })
  assert.deepEqual(pageErrors, [])
})
