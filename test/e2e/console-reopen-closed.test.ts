/**
 * A session whose connection the gateway ended for good (a close code that
 * says not to reconnect: here 4029, frame flood) shows "Disconnected"; choosing
 * it again in the sidebar attaches again, as a reload would, instead of
 * doing nothing because it is the session shown.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { WebSocketRoute } from 'playwright-core'
import { STEP_MS, consoleGateway, newSessionHeld, signedInPage } from '../support/console-page.js'

test('a session whose connection closed is attached again when chosen in the sidebar', { timeout: 90_000 }, async (t) => {
  const gw = await consoleGateway(t)
  const { page, pageErrors } = await signedInPage(t, gw)
  // Every socket passes through to the gateway; the test can close one as the gateway would.
  const sockets: WebSocketRoute[] = []
  await page.routeWebSocket(/\/v1\/sessions\/[^/]+\/ws/, (ws) => {
    ws.connectToServer()
    sockets.push(ws)
  })
  await page.reload() // the routing is set up in each new document
  await page.getByTestId('session-list').waitFor({ timeout: STEP_MS })
  await newSessionHeld(page)
  const id = /#\/session\/([0-9a-f-]{36})/.exec(page.url())?.[1] as string
  const connection = page.getByTestId('connection-state')
  await connection.and(page.locator('[data-state="open"]')).waitFor({ timeout: STEP_MS })
  assert.equal(sockets.length, 1)
  await sockets[0]?.close({ code: 4029, reason: 'frame flood' })
  await connection.and(page.locator('[data-state="closed"]')).waitFor({ timeout: STEP_MS })

  await page.getByTestId('session-list').locator(`[data-session-id="${id}"]`).click()
  await connection.and(page.locator('[data-state="open"]')).waitFor({ timeout: 5000 })
  assert.equal(sockets.length, 2, 'a new socket')
  await page.getByTestId('prompt-input').fill('after reopening')
  await page.getByTestId('prompt-send').click()
  await page.getByTestId('msg-user').filter({ hasText: 'after reopening' }).waitFor({ timeout: STEP_MS })
  assert.deepEqual(pageErrors, [])
})
