/**
 * The web console in Chromium on a gateway with JWT_EXPIRY_ENDS_CONNECTIONS:
 * signed in with a JWT about to expire, it asks for a newer token in a
 * banner before the expiry (a wrong one is refused there), and once given
 * one keeps the same WebSocket and its REST calls past the old JWT's end.
 * The banner is asked on the page's clock (Playwright's, moved to just
 * before the JWT's end), the JWT ends on the gateway's real one: the test waits
 * for that end only, not for the fifth of the JWT's life before it as well.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { SignJWT } from 'jose'
import { buildConsole } from '../../scripts/build-console.mjs'
import { clockedPage } from '../support/console-page.js'
import { isHello } from '../support/frames.js'
import { gateway } from '../support/gateway.js'

const JWT_SECRET = 'jwt-secret-for-tests-0123456789-abcdefghijklmnop'
const STEP_MS = 30_000

async function jwt (tenant: string, exp: number): Promise<string> {
  return await new SignJWT({ tenant }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime(exp).sign(new TextEncoder().encode(JWT_SECRET))
}

const inSeconds = (s: number): number => Math.floor(Date.now() / 1000) + s

test('the console asks for a newer token before its JWT ends, then keeps its WebSocket and its REST calls past the old expiry', { timeout: 120_000 }, async (t) => {
  const consoleDir = mkdtempSync(join(tmpdir(), 'cgw-console-renewal-'))
  t.after(() => rmSync(consoleDir, { recursive: true, force: true }))
  await buildConsole({ outDir: consoleDir })
  const gw = await gateway(t, { env: { JWT_SECRET, JWT_EXPIRY_ENDS_CONNECTIONS: 'true' }, parts: { consoleDir } })
  const { context, page, pageErrors } = await clockedPage(t)
  // Every WebSocket the page opens is counted: a renewal must not reconnect.
  await page.addInitScript(() => {
    const Native = window.WebSocket
    let opened = 0
    ;(window as any).__opened = () => opened
    window.WebSocket = class extends Native {
      constructor (url: string | URL, protocols?: string | string[]) {
        super(url, protocols)
        opened++
      }
    }
  })

  // A sign-in, a session, a refused token and a renewal (3–4 s on a busy machine) before it ends.
  const exp = inSeconds(10)
  const short = await jwt('tenant-a', exp)
  await page.goto(`${gw.url}/`)
  await page.getByTestId('signin-token').fill(short)
  await page.getByTestId('signin-submit').click()
  await page.getByTestId('session-list').waitFor({ timeout: STEP_MS })
  await page.getByTestId('new-session').click()
  await page.getByTestId('new-session-submit').click()
  await page.waitForURL(/#\/session\/[0-9a-f-]{36}$/, { timeout: STEP_MS })
  const id = /#\/session\/([0-9a-f-]{36})$/.exec(page.url())?.[1] as string
  await page.getByTestId('connection-state').filter({ hasText: /open|connected/i }).waitFor({ timeout: STEP_MS })
  // An observer living by the same JWT: its close 4401 says the old deadline has passed.
  const fence = await gw.connect(id, 'role=observer', short)
  await fence.waitFor(isHello)

  // Asked a fifth of its life before it ends (2 s): the page's clock goes to just before the end, firing what
  // falls due on the way, once; the banner is drawn in the timer's own task, so it is there now if it was asked.
  const banner = page.getByTestId('renew-banner')
  await context.clock.pauseAt(exp * 1000 - 200)
  assert.equal(await banner.count(), 1, 'not asked before the JWT ends')
  await context.clock.resume()
  assert.match(await banner.innerText(), /Your sign-in ends at/)
  await page.getByTestId('renew-token').fill('not-a-valid-token-0123456789')
  await page.getByTestId('renew-submit').click()
  await page.getByTestId('renew-error').filter({ hasText: /refused this token/ }).waitFor({ timeout: STEP_MS })
  const newer = await jwt('tenant-a', inSeconds(600))
  await page.getByTestId('renew-token').fill(newer)
  await page.getByTestId('renew-submit').click()
  await banner.waitFor({ state: 'detached', timeout: STEP_MS })
  assert.ok(Date.now() < exp * 1000, 'renewed before the old expiry')
  assert.equal(await page.evaluate(() => sessionStorage.getItem('claude-gateway.token')), newer, 'kept for the tab')

  assert.equal(await fence.waitClose(STEP_MS), 4401, 'the old JWT did end its connections')
  assert.ok(Date.now() >= exp * 1000 - 5)
  // The console's own socket lived on: a turn runs on it, and it never reconnected.
  await page.getByTestId('prompt-input').fill('after the renewal')
  await page.getByTestId('prompt-send').click()
  await page.getByTestId('msg-assistant').filter({ hasText: 'after the renewal' }).waitFor({ timeout: STEP_MS })
  assert.equal(await page.evaluate(() => (window as any).__opened() as number), 1)
  assert.match(await page.getByTestId('connection-state').innerText(), /open|connected/i)
  // REST with the newer JWT: still signed in, and a reload signs in from the kept token.
  await page.reload()
  await page.getByTestId('session-list').locator(`[data-session-id="${id}"]`).waitFor({ timeout: STEP_MS })
  assert.equal(await page.getByTestId('signin-token').count(), 0, 'not sent back to sign-in')
  assert.deepEqual(pageErrors, [])
})
