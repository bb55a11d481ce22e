/**
 * The console's permission prompt must show the command it approves as the
 * CLI will run it, whatever the model put in it: a second line, a line longer
 * than a summary, or bidi controls that reorder what is drawn (Trojan Source:
 * a command drawn as if commented out). The fake CLI's `ask-described` gives
 * the Bash call a description of the model's own, so only the command itself
 * tells what runs. The "Needs attention" list's summary of it names such
 * characters too.
 */
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import type { Page } from 'playwright-core'
import { STEP_MS, consoleGateway, newSessionHeld, signedInPage } from '../support/console-page.js'

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

/**
 * Sends `prompt` from the composer, waits for the permission prompt it asks and gives `check` its summary,
 * then denies it and waits for the turn to end, so the next case starts from a quiet session whatever `check` says.
 */
async function whilePrompted (prompt: string, check: (summary: ReturnType<Page['getByTestId']>) => Promise<void>): Promise<void> {
  const dialog = page.getByTestId('permission-dialog')
  const results = await page.getByTestId('msg-result').count()
  await page.getByTestId('prompt-input').fill(prompt)
  await page.getByTestId('prompt-send').click()
  await dialog.waitFor({ state: 'visible', timeout: STEP_MS })
  try {
    await check(page.getByTestId('permission-summary'))
  } finally {
    await page.getByTestId('permission-deny').click()
    await dialog.waitFor({ state: 'hidden', timeout: STEP_MS })
    await page.getByTestId('msg-result').nth(results).waitFor({ timeout: STEP_MS })
  }
}

test('a command\'s second line is in the prompt', { timeout: 60_000 }, async () => {
  await whilePrompted('ask-described List the files -- ls\ntouch pwned-second-line', async (summary) => {
    const shown = await summary.innerText()
    assert.match(shown, /touch pwned-second-line/, `the prompt shows: ${JSON.stringify(shown)}`)
  })
})

test('the end of a long command line is in the prompt', { timeout: 60_000 }, async () => {
  await whilePrompted(`ask-described Print a banner -- echo ${'='.repeat(200)} ; touch pwned-long-line`, async (summary) => {
    const shown = await summary.innerText()
    assert.match(shown, /; touch pwned-long-line/, `the prompt shows: ${JSON.stringify(shown)}`)
  })
})

test('bidi controls in a command cannot reorder what the prompt draws', { timeout: 60_000 }, async () => {
  // Bash runs `touch pwned-bidi` (the isolates are just bytes to it); drawn raw, its `#` comes first, as if it were a comment.
  const command = 'echo hi \u2067; touch pwned-bidi \u2066#\u2069\u2069'
  await whilePrompted(`ask-described Say hi -- ${command}`, async (summary) => {
    const drawn = await summary.evaluate((summary) => {
      // Where the `#` and the `touch` are drawn, found through the text nodes whatever elements hold them.
      const walker = document.createTreeWalker(summary, NodeFilter.SHOW_TEXT)
      const at: Record<string, number> = {}
      for (let node = walker.nextNode(); node !== null; node = walker.nextNode()) {
        const text = node.textContent ?? ''
        for (const needle of ['#', 'touch']) {
          const i = text.indexOf(needle)
          if (i < 0 || at[needle] !== undefined) continue
          const range = document.createRange()
          range.setStart(node, i)
          range.setEnd(node, i + 1)
          at[needle] = range.getBoundingClientRect().left
        }
      }
      return { hash: at['#'], touch: at.touch }
    })
    assert.ok(drawn.hash !== undefined && drawn.touch !== undefined, 'both are shown')
    assert.ok(drawn.touch < drawn.hash, `"touch" (x ${drawn.touch}) is drawn before the "#" (x ${drawn.hash}), as it runs`)
    const text = await summary.innerText()
    assert.doesNotMatch(text, /[\u2066-\u2069]/, 'no bidi control reaches the page raw')
    assert.match(text, /U\+2067/, 'each is named where it is')
    // The "Needs attention" list names the prompt by the gateway's summary of its command: named there too.
    // The list is polled: the item of this prompt (named by its hidden characters), not one of a prompt before.
    const item = page.getByTestId('attention-item').filter({ hasText: 'U+2067' }).first()
    await item.waitFor({ state: 'attached', timeout: STEP_MS })
    const listed = await item.evaluate((el) => el.textContent ?? '')
    assert.doesNotMatch(listed, /[\u2066-\u2069]/, `no bidi control reaches the attention list raw: ${JSON.stringify(listed)}`)
  })
  assert.deepEqual(pageErrors, [])
})
