/**
 * A tool call's input as it streams in (partial messages: input_json_delta)
 * is drawn as its finished input is: the characters that draw nothing or
 * reorder the text (bidi overrides, zero-width) named where they are, and a
 * huge input cut, not drawn whole. The transcript module runs in Chromium,
 * fed the frames a session with include_partial_messages records (the fake
 * CLI sends a block's final line right after its deltas, too soon to look).
 */
import assert from 'node:assert/strict'
import { fileURLToPath } from 'node:url'
import { after, before, test } from 'node:test'
import { build } from 'esbuild'
import type { Browser, Page } from 'playwright-core'
import { launchChromium } from '../support/chromium.js'

let browser: Browser
let page: Page
const pageErrors: string[] = []

before(async () => {
  const src = fileURLToPath(new URL('../../src/console/', import.meta.url))
  const bundle = await build({
    stdin: { contents: "import { Transcript } from './transcript.ts'\n;(window as any).Transcript = Transcript\n", resolveDir: src, loader: 'ts' },
    bundle: true, format: 'iife', platform: 'browser', write: false, logLevel: 'warning'
  })
  browser = await launchChromium()
  page = await (await browser.newContext()).newPage()
  page.on('pageerror', (err) => pageErrors.push(err.message))
  await page.setContent('<!doctype html><html><body></body></html>')
  await page.addScriptTag({ content: bundle.outputFiles[0]?.text ?? '' })
})

after(async () => { await browser?.close() })

/** The streamed tool entry's text after a message_start, a tool_use block start and one input delta of `partialJson`. */
async function streamedToolInput (partialJson: string): Promise<{ text: string, hidden: string[] }> {
  return await page.evaluate((json) => {
    const t = new (window as any).Transcript()
    document.body.replaceChildren(t.element)
    const events = [
      { type: 'message_start', message: { id: 'msg_1' } },
      { type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id: 'toolu_1', name: 'Bash', input: {} } },
      { type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: json } }
    ]
    events.forEach((event, i) => { t.add({ type: 'stream_event', seq: i + 1, event, parent_tool_use_id: null }) })
    const tool = t.element.querySelector('[data-testid="msg-tool"]') as HTMLElement
    return { text: tool.textContent ?? '', hidden: [...tool.querySelectorAll('.hidden-char')].map((e) => e.textContent ?? '') }
  }, partialJson)
}

test('a streaming tool input names the bidi override and zero-width characters in it', async () => {
  const { text, hidden } = await streamedToolInput('{"command": "echo safe \u202Ecod.exe\u200B; rm -rf ~"')
  assert.ok(!/[\u202E\u200B]/.test(text), `drawn raw: ${JSON.stringify(text)}`)
  assert.deepEqual(hidden, ['U+202E', 'U+200B'])
  assert.deepEqual(pageErrors, [])
})

test('a huge streaming tool input is cut, not drawn whole', async () => {
  const { text } = await streamedToolInput(`{"command": "${'x'.repeat(300_000)}"`)
  assert.ok(text.length < 25_000, `drawn ${text.length} characters`)
  assert.match(text, /more characters/)
})
