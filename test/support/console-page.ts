/**
 * The web console in Chromium for the browser tests: a gateway serving a
 * console freshly built into a temp dir, and a page signed in to it with a
 * token, its uncaught errors collected (a test ends by asserting none).
 * Everything is ended with the scope.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core'
import { buildConsole } from '../../scripts/build-console.mjs'
import { launchChromium } from './chromium.js'
import { type GatewayOptions, type Scope, TOKEN_A, type TestGateway, gateway } from './gateway.js'

/** How long one step in the page (a sign-in, a prompt drawn) may take. */
export const STEP_MS = 30_000

export interface ConsolePage {
  page: Page
  /** Uncaught errors in the page, as they came. */
  pageErrors: string[]
}

/** A gateway serving the console as built now. */
export async function consoleGateway (scope: Scope, options: GatewayOptions = {}): Promise<TestGateway> {
  const consoleDir = mkdtempSync(join(tmpdir(), 'cgw-console-'))
  scope.after(() => rmSync(consoleDir, { recursive: true, force: true }))
  await buildConsole({ outDir: consoleDir })
  return await gateway(scope, { ...options, parts: { ...options.parts, consoleDir } })
}

/**
 * A blank page in a Chromium of its own (closed with `scope`) whose clock is Playwright's: timers and
 * Date move when the test moves them (`context.clock`), the network and the gateway's clock do not.
 */
export async function clockedPage (scope: Scope): Promise<ConsolePage & { context: BrowserContext }> {
  const browser = await launchChromium()
  scope.after(() => browser.close())
  const context = await browser.newContext()
  await context.clock.install()
  const page = await context.newPage()
  const pageErrors: string[] = []
  page.on('pageerror', (err) => pageErrors.push(err.message))
  return { context, page, pageErrors }
}

/**
 * A new Chromium page on `gw`'s console, signed in with `token` (its session list shown). In a browser of
 * the caller's (shared by the tests of a file), it has a context of its own, closed with `scope`; else in a
 * Chromium of its own.
 */
export async function signedInPage (scope: Scope, gw: TestGateway, token = TOKEN_A, shared?: Browser): Promise<ConsolePage> {
  const browser = shared ?? await launchChromium()
  if (shared === undefined) scope.after(() => browser.close())
  const context = await browser.newContext()
  if (shared !== undefined) scope.after(() => context.close())
  const page = await context.newPage()
  const pageErrors: string[] = []
  page.on('pageerror', (err) => pageErrors.push(err.message))
  await page.goto(`${gw.url}/`)
  await page.getByTestId('signin-token').fill(token)
  await page.getByTestId('signin-submit').click()
  await page.getByTestId('session-list').waitFor({ timeout: STEP_MS })
  return { page, pageErrors }
}

/** Creates a session from the console's form; resolves once the page holds it. */
export async function newSessionHeld (page: Page): Promise<void> {
  await page.getByTestId('new-session').click()
  await page.getByTestId('new-session-submit').click()
  await page.getByTestId('role').and(page.locator('[data-role="holder"]')).waitFor({ timeout: STEP_MS })
}

/** One character of an element's text and where it is drawn (its box's left edge and top). */
export interface DrawnChar { ch: string, x: number, y: number }

/**
 * Every character of `locator`'s text, in the order the text holds it (logical order), with where it is
 * drawn: what the bidi algorithm did to the order shows in the positions, not in the DOM's text. An element
 * replaced meanwhile (a list polled and drawn again) is found again, up to `tries` times.
 */
export async function drawnChars (locator: Locator, tries = 5): Promise<DrawnChar[]> {
  const chars = await locator.evaluate((root) => {
    if (!root.isConnected) return null
    const out: Array<{ ch: string, x: number, y: number }> = []
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT)
    for (let node = walker.nextNode(); node !== null; node = walker.nextNode()) {
      const text = node.textContent ?? ''
      for (let i = 0; i < text.length; i++) {
        const range = document.createRange()
        range.setStart(node, i)
        range.setEnd(node, i + 1)
        const box = range.getBoundingClientRect()
        out.push({ ch: text[i] ?? '', x: box.left, y: box.top })
      }
    }
    return out
  })
  if (chars !== null) return chars
  if (tries <= 1) throw new Error('the element was replaced each time it was measured')
  return await drawnChars(locator, tries - 1)
}
