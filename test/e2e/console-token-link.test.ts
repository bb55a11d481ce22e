/**
 * A `/#token=…` link opened in a console tab that is already signed in (the
 * demo's link pasted into its address bar: the same page, so no reload) must
 * not leave the token in the address, where history and bookmarks keep it.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { STEP_MS, consoleGateway, signedInPage } from '../support/console-page.js'
import { TOKEN_B } from '../support/gateway.js'

test('a #token= link opened in a signed-in tab is taken out of the address, and signs in with it', { timeout: 90_000 }, async (t) => {
  const gw = await consoleGateway(t)
  const mine = await gw.createSession({}, TOKEN_B)

  const { page, pageErrors } = await signedInPage(t, gw)

  await page.goto(`${gw.url}/#token=${TOKEN_B}`)
  await page.waitForFunction(() => !location.href.includes('token'), undefined, { timeout: STEP_MS })
    .catch(() => { assert.fail(`the address still holds the token: ${page.url()}`) })
  // Signed in with the token handed over, as a link opened in a new tab would: the other tenant's session is listed.
  await page.getByTestId('session-list').locator(`[data-session-id="${mine.id as string}"]`).waitFor({ timeout: STEP_MS })
  assert.equal(await page.evaluate(() => sessionStorage.getItem('claude-gateway.token')), TOKEN_B)
  assert.deepEqual(pageErrors, [])
})
