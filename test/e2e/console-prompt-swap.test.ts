/**
 * Two prompts in a row (the fake CLI's `ask2`: the second is asked as soon
 * as the first is answered), drawn in the same place, milliseconds apart: a
 * click meant for the first (the second click of a double click on "Allow
 * once") must not allow the second, which the person never saw.
 * The stray click is made in the page the moment the second prompt is drawn,
 * followed by a "Deny" of it: whichever answer the gateway got first wins.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { STEP_MS, consoleGateway, newSessionHeld, signedInPage } from '../support/console-page.js'

test('a click meant for a prompt does not answer the one drawn in its place', { timeout: 90_000 }, async (t) => {
  const gw = await consoleGateway(t)
  const { page, pageErrors } = await signedInPage(t, gw)
  await newSessionHeld(page)

  await page.getByTestId('prompt-input').fill('ask2')
  await page.getByTestId('prompt-send').click()
  const dialog = page.getByTestId('permission-dialog')
  await dialog.filter({ hasText: 'touch fake-one.txt' }).waitFor({ timeout: STEP_MS })
  const allow = page.getByTestId('permission-allow').and(page.locator(':enabled'))
  await allow.waitFor({ timeout: STEP_MS })
  const box = await allow.boundingBox()
  assert.ok(box !== null)
  const x = box.x + box.width / 2
  const y = box.y + box.height / 2

  // The moment the second prompt is drawn: a click where "Allow once" was, then a deliberate "Deny" of what is shown.
  const stray = page.evaluate(([x, y]) => new Promise<string>((resolve) => {
    const shown = document.querySelector('[data-testid="permission-dialog"]') as HTMLElement
    new MutationObserver((_records, observer) => {
      if (shown.textContent?.includes('fake-two') !== true) return
      observer.disconnect()
      const target = document.elementFromPoint(x, y) as HTMLElement | null
      target?.click()
      ;(shown.querySelector('[data-testid="permission-deny"]') as HTMLElement).click()
      resolve(target?.closest('[data-testid]')?.getAttribute('data-testid') ?? '')
    }).observe(shown, { childList: true, subtree: true, characterData: true })
  }), [x, y] as const)
  await page.mouse.click(x, y)
  assert.equal(await stray, 'permission-allow', 'the second prompt\'s "Allow once" is where the first one\'s was')

  const resolved = page.getByTestId('msg-permission-resolved')
  await resolved.nth(1).waitFor({ timeout: STEP_MS })
  assert.match(await resolved.nth(0).innerText(), /allowed/, 'the first prompt, clicked, is allowed')
  assert.match(await resolved.nth(1).innerText(), /denied/, 'the second prompt is what the person chose for it')
  assert.deepEqual(pageErrors, [])
})
