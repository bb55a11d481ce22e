/**
 * Choosing a session in the sidebar never takes it from a client that holds
 * it, even when the list was drawn before that client attached (the list is
 * polled every few seconds, and not at all while the tab is hidden): the
 * console asks who holds it now and attaches as an observer. The page's clock
 * is paused after the list is drawn, so no poll brings the list up to date.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { isHello } from '../support/frames.js'
import { launchChromium } from '../support/chromium.js'
import { STEP_MS, consoleGateway } from '../support/console-page.js'
import { TOKEN_A } from '../support/gateway.js'

test('a session taken by an SDK client after the list was drawn opens as observer, not taken from it', { timeout: 90_000 }, async (t) => {
  const gw = await consoleGateway(t)
  const { id } = await gw.createSession()
  const browser = await launchChromium()
  t.after(() => browser.close())
  const page = await (await browser.newContext()).newPage()
  const pageErrors: string[] = []
  page.on('pageerror', (err) => pageErrors.push(err.message))
  await page.clock.install()
  await page.goto(`${gw.url}/`)
  await page.getByTestId('signin-token').fill(TOKEN_A)
  await page.getByTestId('signin-submit').click()
  const item = page.getByTestId('session-list').locator(`[data-session-id="${id}"]`)
  await item.waitFor({ timeout: STEP_MS })
  await page.clock.pauseAt(Date.now() + 1000)

  const sdk = await gw.connect(id, 'role=controller')
  const hello = await sdk.waitFor(isHello)
  assert.equal(hello.role, 'controller')
  await item.click()
  await page.getByTestId('role').and(page.locator('[data-role="observer"], [data-role="holder"]')).waitFor({ timeout: STEP_MS })
  assert.equal(await page.getByTestId('role').getAttribute('data-role'), 'observer', 'the console took the session from the SDK client')
  assert.deepEqual(pageErrors, [])
})
