/**
 * A prompt answered once is answered: "Allow once" double-clicked (a habit)
 * sends one answer, not two, so the gateway has no second answer to refuse
 * and the page shows no "already answered" error for what the person did
 * right. The prompt stays until the gateway says it is resolved, so the
 * second click lands on the same button.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { STEP_MS, consoleGateway, newSessionHeld, signedInPage } from '../support/console-page.js'

test('a double click on "Allow once" answers once, with no error shown', { timeout: 90_000 }, async (t) => {
  const gw = await consoleGateway(t)
  const { page, pageErrors } = await signedInPage(t, gw)
  await newSessionHeld(page)
  await page.getByTestId('prompt-input').fill('ask')
  await page.getByTestId('prompt-send').click()
  await page.getByTestId('permission-allow').and(page.locator(':enabled')).waitFor({ timeout: STEP_MS })
  await page.getByTestId('permission-allow').dblclick()

  await page.getByTestId('msg-result').waitFor({ timeout: STEP_MS })
  assert.match(await page.getByTestId('msg-permission-resolved').innerText(), /allowed/)
  // The gateway answers a socket's frames in order: once a model switch sent after the clicks is answered, a refusal
  // of a second answer would have come (and switching the model clears no banner).
  await page.getByTestId('model-select').selectOption('haiku')
  await page.getByTestId('msg-note').filter({ hasText: 'Model set to haiku' }).waitFor({ timeout: STEP_MS })
  const banner = page.getByTestId('error-banner')
  assert.equal(await banner.isVisible(), false, `an error is shown: ${await banner.innerText()}`)
  assert.deepEqual(pageErrors, [])
})
