/**
 * A `/#token=…` link opened in a console tab that is already signed in (the
 * demo's link pasted into its address bar: the same page, so no reload) must
 * not leave the token in the address, where history and bookmarks keep it.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { buildConsole } from '../../scripts/build-console.mjs'
import { launchChromium } from '../support/chromium.js'
import { TOKEN_A, TOKEN_B, gateway } from '../support/gateway.js'

const STEP_MS = 30_000

test('a #token= link opened in a signed-in tab is taken out of the address, and signs in with it', { timeout: 90_000 }, async (t) => {
  const consoleDir = mkdtempSync(join(tmpdir(), 'cgw-console-link-'))
  t.after(() => rmSync(consoleDir, { recursive: true, force: true }))
  await buildConsole({ outDir: consoleDir })
  const gw = await gateway(t, { parts: { consoleDir } })
  const mine = await gw.createSession({}, TOKEN_B)

  const browser = await launchChromium()
  t.after(() => browser.close())
  const page = await (await browser.newContext()).newPage()
  const pageErrors: string[] = []
  page.on('pageerror', (err) => pageErrors.push(err.message))
  await page.goto(`${gw.url}/`)
  await page.getByTestId('signin-token').fill(TOKEN_A)
  await page.getByTestId('signin-submit').click()
  await page.getByTestId('session-list').waitFor({ timeout: STEP_MS })

  await page.goto(`${gw.url}/#token=${TOKEN_B}`)
  await page.waitForFunction(() => !location.href.includes('token'), undefined, { timeout: STEP_MS })
    .catch(() => { assert.fail(`the address still holds the token: ${page.url()}`) })
  // Signed in with the token handed over, as a link opened in a new tab would: the other tenant's session is listed.
  await page.getByTestId('session-list').locator(`[data-session-id="${mine.id as string}"]`).waitFor({ timeout: STEP_MS })
  assert.equal(await page.evaluate(() => sessionStorage.getItem('claude-gateway.token')), TOKEN_B)
  assert.deepEqual(pageErrors, [])
})
