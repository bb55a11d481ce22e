/**
 * The keyboard path of the double click in console-prompt-swap.test.ts:
 * "Allow once" has the focus, Enter allows the first prompt of `ask2`, and
 * a second Enter (meant for the first prompt too, pressed twice, or the key
 * held) must not allow the second prompt, drawn in its place milliseconds
 * later, unseen. After it, a deliberate "Deny" of the second prompt: the
 * answer the gateway got first wins.
 */
import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import type { Browser } from 'playwright-core'
import { launchChromium } from '../support/chromium.js'
import { STEP_MS, consoleGateway, newSessionHeld, signedInPage } from '../support/console-page.js'
import { TOKEN_A, type TestGateway, suiteScope } from '../support/gateway.js'

// One gateway and one Chromium for both cases: each signs in a page of its own and holds a session of its own.
const scope = suiteScope()
let gw: TestGateway
let browser: Browser

before(async () => {
  gw = await consoleGateway(scope)
  browser = await launchChromium()
  scope.after(() => browser.close())
})

test('a second Enter meant for a prompt does not answer the one drawn in its place', { timeout: 90_000 }, async (t) => {
  const { page, pageErrors } = await signedInPage(t, gw, TOKEN_A, browser)
  await newSessionHeld(page)
  // Nothing focused: the prompt takes the focus once its Allow takes answers.
  await page.getByTestId('prompt-input').fill('ask2')
  await page.getByTestId('prompt-send').click()
  await page.evaluate(() => { (document.activeElement as HTMLElement | null)?.blur() })
  const dialog = page.getByTestId('permission-dialog')
  await dialog.filter({ hasText: 'touch fake-one.txt' }).waitFor({ timeout: STEP_MS })
  await page.getByTestId('permission-allow').and(page.locator(':focus')).waitFor({ timeout: STEP_MS })

  await page.keyboard.press('Enter')
  await page.keyboard.press('Enter')
  await dialog.filter({ hasText: 'fake-two' }).waitFor({ timeout: STEP_MS })
  await page.keyboard.press('Enter')
  await page.getByTestId('permission-deny').click()

  const resolved = page.getByTestId('msg-permission-resolved')
  await resolved.nth(1).waitFor({ timeout: STEP_MS })
  assert.match(await resolved.nth(0).innerText(), /allowed/, 'the first prompt, Enter pressed on it, is allowed')
  assert.match(await resolved.nth(1).innerText(), /denied/, 'the second prompt is what the person chose for it')
  const banner = page.getByTestId('error-banner')
  assert.equal(await banner.isVisible(), false, `no refusal of a second answer to the first prompt is shown: ${await banner.innerText()}`)
  assert.deepEqual(pageErrors, [])
})

test('Enter held down does not answer the prompt drawn after the one it answered', { timeout: 90_000 }, async (t) => {
  const { page, pageErrors } = await signedInPage(t, gw, TOKEN_A, browser)
  await newSessionHeld(page)
  await page.getByTestId('prompt-input').fill('ask2')
  await page.getByTestId('prompt-send').click()
  await page.evaluate(() => { (document.activeElement as HTMLElement | null)?.blur() })
  const dialog = page.getByTestId('permission-dialog')
  await dialog.filter({ hasText: 'touch fake-one.txt' }).waitFor({ timeout: STEP_MS })
  await page.getByTestId('permission-allow').and(page.locator(':focus')).waitFor({ timeout: STEP_MS })

  // The key goes down on the first prompt and stays down (the keyboard repeats it) until the second one's
  // "Allow once" has the focus, and a few repeats after: what a key held a moment too long sends.
  const secondFocused = dialog.filter({ hasText: 'fake-two' }).locator('[data-testid="permission-allow"]:focus')
  await page.keyboard.down('Enter')
  while (await secondFocused.count() === 0 && await page.getByTestId('msg-permission-resolved').count() < 2) await page.keyboard.down('Enter')
  for (let i = 0; i < 3; i++) await page.keyboard.down('Enter')
  await page.keyboard.up('Enter')
  const deny = page.getByTestId('permission-deny')
  if (await deny.isVisible()) await deny.click()

  const resolved = page.getByTestId('msg-permission-resolved')
  await resolved.nth(1).waitFor({ timeout: STEP_MS })
  assert.match(await resolved.nth(0).innerText(), /allowed/, 'the first prompt, Enter pressed on it, is allowed')
  assert.match(await resolved.nth(1).innerText(), /denied/, 'the second prompt is not allowed by a key held from the first')
  assert.deepEqual(pageErrors, [])
})
