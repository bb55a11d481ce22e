/**
 * Changing only `?role=` in the address for the session already shown
 * attaches again in that role: `?role=observer` gives the session up (the
 * gateway lists no holder), `?role=controller` takes it again. It used to do
 * nothing, because the session shown is left as it is when chosen again.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { STEP_MS, consoleGateway, newSessionHeld, signedInPage } from '../support/console-page.js'

test('changing only ?role= for the session shown attaches again in that role', { timeout: 90_000 }, async (t) => {
  const gw = await consoleGateway(t)
  const { page, pageErrors } = await signedInPage(t, gw)
  await newSessionHeld(page)
  const id = /#\/session\/([0-9a-f-]{36})/.exec(page.url())?.[1] as string
  const role = page.getByTestId('role')

  await page.evaluate((sid) => { location.hash = `#/session/${sid}?role=observer` }, id)
  await role.and(page.locator('[data-role="observer"]')).waitFor({ timeout: 10_000 })
  const watched = await gw.request('GET', `/v1/sessions/${id}`)
  assert.equal(watched.body.holder, null, 'the console still holds the session it was asked to watch')

  await page.evaluate((sid) => { location.hash = `#/session/${sid}?role=controller` }, id)
  await role.and(page.locator('[data-role="holder"]')).waitFor({ timeout: STEP_MS })
  const held = await gw.request('GET', `/v1/sessions/${id}`)
  assert.notEqual(held.body.holder, null, 'nobody holds the session the console was asked to control')
  await page.getByTestId('prompt-input').fill('as holder again')
  await page.getByTestId('prompt-send').click()
  await page.getByTestId('msg-user').filter({ hasText: 'as holder again' }).waitFor({ timeout: STEP_MS })
  assert.deepEqual(pageErrors, [])
})
