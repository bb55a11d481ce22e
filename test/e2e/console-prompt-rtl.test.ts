/**
 * What the console's permission prompt draws of a command is what runs, in
 * the order it runs, even when the command holds letters of a right-to-left
 * script (Hebrew, Arabic): drawn as ordinary text, the bidi algorithm moves
 * the digits and words after such a letter before it (`rm -rf /tmp/שלום 1`
 * reads as `rm -rf /tmp/1 שלום`). Measured where each character is drawn,
 * in the prompt, the transcript's tool call and "Needs attention". And the
 * tool's name and the CLI's description, the other words of a prompt, name
 * the characters that draw nothing as its command does.
 */
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import type { Locator, Page } from 'playwright-core'
import { type DrawnChar, STEP_MS, consoleGateway, drawnChars, newSessionHeld, signedInPage } from '../support/console-page.js'

let page: Page
let pageErrors: string[]
const cleanups: Array<() => unknown> = []
const scope = { after: (fn: () => unknown) => { cleanups.push(fn) } }

before(async () => {
  ;({ page, pageErrors } = await signedInPage(scope, await consoleGateway(scope)))
  await newSessionHeld(page)
})

after(async () => {
  for (const fn of cleanups.reverse()) await fn()
})

/** Sends `prompt`, gives `check` the prompt it asks, then denies it and waits for the turn's end. */
async function whilePrompted (prompt: string, check: () => Promise<void>): Promise<void> {
  const dialog = page.getByTestId('permission-dialog')
  const results = await page.getByTestId('msg-result').count()
  await page.getByTestId('prompt-input').fill(prompt)
  await page.getByTestId('prompt-send').click()
  await dialog.waitFor({ state: 'visible', timeout: STEP_MS })
  try {
    await check()
  } finally {
    await page.getByTestId('permission-deny').click()
    await dialog.waitFor({ state: 'hidden', timeout: STEP_MS })
    await page.getByTestId('msg-result').nth(results).waitFor({ timeout: STEP_MS })
  }
}

const RTL = /[\p{Script=Hebrew}\p{Script=Arabic}]/u

/**
 * Asserts that `chars` (one line) are drawn in their logical order: every character but the right-to-left
 * letters left of the next one, and each run of those letters (a word, read right to left) between its neighbours.
 */
function assertLogicalOrder (chars: DrawnChar[], where: string): void {
  const drawn = chars.slice().sort((a, b) => a.x - b.x).map((c) => c.ch).join('')
  const logical = chars.map((c) => c.ch).join('')
  const message = `${where}: ${JSON.stringify(logical)} is drawn as ${JSON.stringify(drawn)}`
  assert.ok(chars.every((c) => Math.abs(c.y - (chars[0]?.y ?? 0)) < 2), `${where}: on one line`)
  let left = -Infinity
  for (let i = 0; i < chars.length;) {
    if (!RTL.test(chars[i]?.ch ?? '')) {
      const x = chars[i]?.x ?? 0
      assert.ok(x > left, message)
      left = x
      i++
      continue
    }
    let end = i
    while (end < chars.length && RTL.test(chars[end]?.ch ?? '')) end++
    const right = chars[end]?.x ?? Infinity
    for (const c of chars.slice(i, end)) assert.ok(c.x > left && c.x < right, message)
    left = Math.max(...chars.slice(i, end).map((c) => c.x))
    i = end
  }
}

/** The characters drawn of `locator`, but those of the names of hidden characters: the text as written. */
async function commandChars (locator: Locator): Promise<DrawnChar[]> {
  await locator.waitFor({ state: 'attached', timeout: STEP_MS })
  return await drawnChars(locator)
}

test('right-to-left letters do not reorder a command where it is approved', { timeout: 60_000 }, async () => {
  for (const command of ['rm -rf /tmp/שלום 1', 'cp notes /srv/ملف 10 20 && ls']) {
    await whilePrompted(`ask-described Tidy up -- ${command}`, async () => {
      const summary = page.getByTestId('permission-summary')
      assert.equal(await summary.innerText(), command)
      assertLogicalOrder(await commandChars(summary), 'the prompt')
      assertLogicalOrder(await commandChars(page.getByTestId('msg-tool').last().locator('.tool-summary')), 'the transcript\'s tool call')
      const item = page.getByTestId('attention-item').filter({ hasText: command.slice(-4) }).first()
      assertLogicalOrder(await commandChars(item.locator('.item-sub')), 'Needs attention')
    })
  }
  assert.deepEqual(pageErrors, [])
})

test('a tool name and a description name the characters that draw nothing', { timeout: 60_000 }, async () => {
  await whilePrompted('ask Bash\u2060\u202Etxt.exe', async () => {
    const title = await page.locator('#permission-title').evaluate((el) => el.textContent ?? '')
    assert.doesNotMatch(title, /[\u2060\u202E]/, `the prompt's title draws them raw: ${JSON.stringify(title)}`)
    assert.match(title, /U\+2060.*U\+202E/)
    const tool = await page.getByTestId('msg-tool').last().locator('.tool-name').evaluate((el) => el.textContent ?? '')
    assert.doesNotMatch(tool, /[\u2060\u202E]/, `the transcript's tool call draws them raw: ${JSON.stringify(tool)}`)
    const asked = await page.getByTestId('msg-permission').last().evaluate((el) => el.textContent ?? '')
    assert.doesNotMatch(asked, /[\u2060\u202E]/, `the transcript's note draws them raw: ${JSON.stringify(asked)}`)
    const item = page.getByTestId('attention-item').filter({ hasText: 'U+202E' }).first()
    await item.waitFor({ state: 'attached', timeout: STEP_MS })
    const listed = await item.evaluate((el) => el.textContent ?? '')
    assert.doesNotMatch(listed, /[\u2060\u202E]/, `Needs attention draws them raw: ${JSON.stringify(listed)}`)
  })
  await whilePrompted('ask-described Just looking\u202E around -- ls', async () => {
    const description = await page.locator('.permission-description').evaluate((el) => el.textContent ?? '')
    assert.doesNotMatch(description, /\u202E/, `the description draws it raw: ${JSON.stringify(description)}`)
    assert.match(description, /U\+202E/)
  })
  assert.deepEqual(pageErrors, [])
})
