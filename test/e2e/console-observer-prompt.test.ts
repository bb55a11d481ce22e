/**
 * A console tab observing a session someone else holds may answer its
 * permission prompt over HTTP. It must not offer "Allow once" on the model's
 * own description alone: the observer's `request_pending` has no input, so
 * the console has to show the command it approves (as the HTTP API gives it)
 * before it can be allowed. The fake CLI's `ask-described` asks for a Bash
 * command whose description says something else.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { STEP_MS, consoleGateway, signedInPage } from '../support/console-page.js'
import { isHello } from '../support/frames.js'

test('an observer\'s permission prompt shows the command it would allow', { timeout: 90_000 }, async (t) => {
  const gw = await consoleGateway(t)
  const session = await gw.createSession()
  // Another client (an SDK) holds the session and has been asked.
  const holder = await gw.connect(session.id, 'role=controller')
  await holder.waitFor(isHello)
  holder.sendUser('ask-described List the files -- touch pwned-by-observer')
  const asked = await holder.waitFor((f) => f.type === 'control_request' && f.request?.subtype === 'can_use_tool', STEP_MS)

  const { page, pageErrors } = await signedInPage(t, gw)
  await page.goto(`${gw.url}/#/session/${session.id as string}`)
  await page.getByTestId('role').and(page.locator('[data-role="observer"]')).waitFor({ timeout: STEP_MS })
  const dialog = page.getByTestId('permission-dialog')
  await dialog.waitFor({ state: 'visible', timeout: STEP_MS })

  // Whenever "Allow once" can be clicked, the command it allows is on screen.
  await page.getByTestId('permission-allow').and(page.locator(':enabled')).waitFor({ timeout: STEP_MS })
  const shown = await dialog.innerText()
  assert.match(shown, /touch pwned-by-observer/, `an observer could allow, having been shown: ${JSON.stringify(shown)}`)

  // And allowing it over HTTP allows that very request.
  await page.getByTestId('permission-allow').click()
  const resolved = await holder.waitFor((f) => f.type === 'gateway' && f.subtype === 'permission_resolved' && f.request_id === asked.request_id, STEP_MS)
  assert.equal(resolved.decision, 'allowed')
  await dialog.waitFor({ state: 'hidden', timeout: STEP_MS })
  assert.deepEqual(pageErrors, [])
})
