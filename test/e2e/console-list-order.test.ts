/**
 * The sidebar's lists are polled, and refreshed again after a change: two
 * requests can be out at once, and the older one can be answered last (a
 * slow network, a busy gateway). Its answer used to replace the newer one, so
 * a session just listed vanished until the next poll. The page's clock
 * (Playwright's) makes the polls; the older answer is read from the gateway
 * when it is asked and handed to the page only after the newer one.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { APIResponse, Route } from 'playwright-core'
import { STEP_MS, clockedPage, consoleGateway } from '../support/console-page.js'
import { TOKEN_A } from '../support/gateway.js'

test('a session list answered late does not replace a newer one', { timeout: 90_000 }, async (t) => {
  const gw = await consoleGateway(t)
  const { id: first } = await gw.createSession()
  const { context, page, pageErrors } = await clockedPage(t)
  await page.goto(`${gw.url}/`)
  await page.getByTestId('signin-token').fill(TOKEN_A)
  await page.getByTestId('signin-submit').click()
  const item = (id: string) => page.locator(`[data-testid="session-item"][data-session-id="${id}"]`)
  await item(first).waitFor({ timeout: STEP_MS })

  // The next list request is answered by the gateway now (one session) and given to the page later.
  let held: { route: Route, response: APIResponse } | null = null
  const asked = new Promise<void>((resolve) => {
    void page.route((url) => url.pathname === '/v1/sessions', async (route) => {
      if (route.request().method() !== 'GET' || held !== null) { await route.continue(); return }
      held = { route, response: await route.fetch() }
      resolve()
    })
  })
  await context.clock.fastForward(5000)
  await asked
  const { id: second } = await gw.createSession()
  await context.clock.fastForward(5000)
  await item(second).waitFor({ timeout: STEP_MS })

  // From here on, the second session's item must stay drawn.
  await page.evaluate((id) => {
    const list = document.querySelector('[data-testid="session-list"]') as Element
    const seen = globalThis as unknown as { lost: boolean }
    seen.lost = false
    new MutationObserver(() => { if (list.querySelector(`[data-session-id="${id}"]`) === null) seen.lost = true })
      .observe(list, { childList: true, subtree: true })
  }, second)
  const late = held as { route: Route, response: APIResponse } | null
  assert.ok(late !== null)
  await late.route.fulfill({ response: late.response })
  // One more poll, answered as usual: the late answer was handled before it (it arrived before it was asked).
  const next = page.waitForResponse((r) => new URL(r.url()).pathname === '/v1/sessions' && r.request() !== late.route.request(), { timeout: STEP_MS })
  await context.clock.fastForward(5000)
  await next
  await item(second).waitFor({ timeout: STEP_MS })
  assert.equal(await page.evaluate(() => (globalThis as unknown as { lost: boolean }).lost), false,
    'the session listed last vanished when an older list answer arrived')
  assert.deepEqual(pageErrors, [])
})
