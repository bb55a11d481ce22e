/**
 * When the console asks for a newer JWT, on the page's own clock (Playwright's
 * clock, fast-forwarded; the gateway checks tokens on the real one): a JWT
 * valid for weeks is asked about a minute before it ends, not when the
 * longest browser timer (24.8 days) runs out; a renewed JWT is asked about
 * before it ends in turn; and a token handed over by a `#token=` link takes
 * the place of the one the banner was asking about.
 */
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import type { Page } from 'playwright-core'
import { SignJWT } from 'jose'
import { launchChromium } from '../support/chromium.js'
import { STEP_MS, consoleGateway } from '../support/console-page.js'
import type { TestGateway } from '../support/gateway.js'

const JWT_SECRET = 'jwt-secret-for-tests-0123456789-abcdefghijklmnop'
const MINUTE = 60_000
const DAY = 24 * 60 * MINUTE

let gw: TestGateway
let newPage: () => Promise<{ page: Page, pageErrors: string[] }>
const cleanups: Array<() => unknown> = []

before(async () => {
  gw = await consoleGateway({ after: (fn) => { cleanups.push(fn) } }, { env: { JWT_SECRET, JWT_MAX_TTL_SECONDS: String(40 * 86_400) } })
  const browser = await launchChromium()
  cleanups.push(() => browser.close())
  newPage = async () => {
    const page = await (await browser.newContext()).newPage()
    const pageErrors: string[] = []
    page.on('pageerror', (err) => pageErrors.push(err.message))
    await page.clock.install({ time: Date.now() })
    return { page, pageErrors }
  }
})

after(async () => {
  for (const fn of cleanups.reverse()) await fn()
})

/** A JWT of tenant-a ending `ms` from now (real time). */
async function jwt (ms: number): Promise<string> {
  return await new SignJWT({ tenant: 'tenant-a' }).setProtectedHeader({ alg: 'HS256' })
    .setExpirationTime(Math.floor((Date.now() + ms) / 1000)).sign(new TextEncoder().encode(JWT_SECRET))
}

async function signIn (page: Page, token: string): Promise<void> {
  await page.goto(`${gw.url}/`)
  await page.getByTestId('signin-token').fill(token)
  await page.getByTestId('signin-submit').click()
  await page.getByTestId('session-list').waitFor({ timeout: STEP_MS })
}

test('a JWT valid for 30 days is asked about a minute before it ends, not after the longest timer (24.8 days)', { timeout: 60_000 }, async () => {
  const { page, pageErrors } = await newPage()
  await signIn(page, await jwt(30 * DAY))
  // fastForward fires what falls due on the way, once, and the banner is drawn in the timer's own task: counted
  // right after, it is there if it was asked.
  await page.clock.fastForward(25 * DAY)
  assert.equal(await page.getByTestId('renew-banner').count(), 0, 'asked with 5 days left')
  await page.clock.fastForward(5 * DAY - 2 * MINUTE)
  assert.equal(await page.getByTestId('renew-banner').count(), 0, 'asked two minutes before the end')
  await page.clock.fastForward(90_000)
  assert.equal(await page.getByTestId('renew-banner').count(), 1, 'not asked 30 s before the end')
  assert.deepEqual(pageErrors, [])
})

test('a renewed JWT is asked about again before it ends', { timeout: 60_000 }, async () => {
  const { page, pageErrors } = await newPage()
  await signIn(page, await jwt(10 * MINUTE))
  await page.clock.fastForward(9.5 * MINUTE)
  assert.equal(await page.getByTestId('renew-banner').count(), 1, 'not asked 30 s before the end')
  await page.getByTestId('renew-token').fill(await jwt(60 * MINUTE))
  await page.getByTestId('renew-submit').click()
  await page.getByTestId('renew-banner').waitFor({ state: 'detached', timeout: STEP_MS })
  await page.clock.fastForward(40 * MINUTE)
  assert.equal(await page.getByTestId('renew-banner').count(), 0, 'asked 20 minutes early')
  await page.clock.fastForward(20 * MINUTE - 30_000)
  assert.equal(await page.getByTestId('renew-banner').count(), 1, 'the renewed JWT not asked about 30 s before its end')
  assert.deepEqual(pageErrors, [])
})

test('a #token= link signing the tab in again replaces the banner asking about the old token, and its own end is asked about', { timeout: 60_000 }, async () => {
  const { page, pageErrors } = await newPage()
  await signIn(page, await jwt(10 * MINUTE))
  await page.clock.fastForward(9.5 * MINUTE)
  assert.equal(await page.getByTestId('renew-banner').count(), 1, 'not asked 30 s before the end')
  const linked = await jwt(60 * MINUTE)
  await page.evaluate((token) => { location.hash = `#token=${encodeURIComponent(token)}` }, linked)
  await page.waitForFunction((token) => sessionStorage.getItem('claude-gateway.token') === token && location.hash === '', linked, { timeout: STEP_MS })
  await page.getByTestId('session-list').waitFor({ timeout: STEP_MS })
  await page.getByTestId('renew-banner').waitFor({ state: 'detached', timeout: 5000 })
  await page.clock.fastForward(60 * MINUTE - 30_000)
  assert.equal(await page.getByTestId('renew-banner').count(), 1, 'the linked JWT not asked about 30 s before its end')
  assert.deepEqual(pageErrors, [])
})
