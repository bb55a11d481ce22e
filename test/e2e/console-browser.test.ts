// The web console in a real browser (Debian's Chromium driven by
// playwright-core), on a gateway running the real CLI against the demo's
// scripted model (scripts/demo-model.ts) and a private Redis: sign in, create
// a session, stream an answer, approve a permission prompt and see the tool's
// result (and its file), interrupt a turn, reload and get the history back,
// watch from a second tab as an observer, and ride out a Redis outage with the
// degraded banner and no lost message. Screenshots go to
// $CONSOLE_SCREENSHOTS (default: a temporary folder); `UPDATE_SCREENSHOTS=1`
// writes them to docs/images/ for docs/CONSOLE.md.
import assert from 'node:assert/strict'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import type { Browser, Page } from 'playwright-core'
import { buildConsole } from '../../scripts/build-console.mjs'
import { DEMO_COMMAND, demoModel } from '../../scripts/demo-model.js'
import { TOKEN_A, eventually } from '../support/gateway.js'
import { type MockReply, startMockAnthropic } from '../support/mock-anthropic.js'
import { type E2e, closeAll, isCli, startE2e } from '../support/e2e.js'
import { launchChromium } from '../support/chromium.js'
import { type RedisServer, startRedisServer } from '../support/redis-server.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const STEP_MS = 30_000
const SHOTS = process.env.UPDATE_SCREENSHOTS === '1'
  ? join(ROOT, 'docs', 'images')
  : process.env.CONSOLE_SCREENSHOTS ?? mkdtempSync(join(tmpdir(), 'cgw-console-shots-'))

let browser: Browser
let redis: RedisServer
let e: E2e
let redisDir: string
let consoleDir: string

/**
 * The demo's model without its pace for people: replies stream at once,
 * except the long story, which stops once it has told four lines and waits
 * there until the CLI goes away (the interrupt). The interrupt step never
 * races the story's end.
 */
function testModel (body: unknown): MockReply {
  const { pace: _watchable, ...reply } = demoModel(body)
  if (!JSON.stringify(reply.content).includes('long story')) return reply
  let told = ''
  return {
    ...reply,
    pace: async (event, data) => {
      if (event === 'content_block_delta') told += (data as { delta?: { text?: string } }).delta?.text ?? ''
      if (told.includes('Line 4 ')) await new Promise(() => {})
    }
  }
}

before(async () => {
  // Its own build, apart from dist/console (which `npm run demo`'s test may be building meanwhile).
  consoleDir = mkdtempSync(join(tmpdir(), 'cgw-console-build-'))
  await buildConsole({ outDir: consoleDir })
  redisDir = mkdtempSync(join(tmpdir(), 'cgw-console-redis-'))
  // Kept on disk, so stopping it is an outage, not a loss of data.
  redis = await startRedisServer({ args: ['--appendonly', 'yes', '--appendfsync', 'always', '--dir', redisDir] })
  const mock = await startMockAnthropic({ handler: (body) => testModel(body) })
  e = await startE2e({ mock, consoleDir, env: { REDIS_URL: redis.url, REDIS_PREFIX: `cgw-console-${process.pid}:` } })
  browser = await launchChromium()
  mkdirSync(SHOTS, { recursive: true })
})

after(async () => {
  await browser?.close()
  await e?.mock.close()
  await closeAll()
  await redis?.kill()
  for (const dir of [redisDir, consoleDir]) if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
})

async function shot (page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(SHOTS, `console-${name}.png`) })
}

/** Sends a prompt from the console's prompt box. */
async function prompt (page: Page, text: string): Promise<void> {
  await page.getByTestId('prompt-input').fill(text)
  await page.getByTestId('prompt-send').click()
}

async function signIn (page: Page): Promise<void> {
  await page.goto(`${e.gw.url}/`)
  await page.getByTestId('signin-token').fill(TOKEN_A)
  await page.getByTestId('signin-submit').click()
  await page.getByTestId('session-list').waitFor({ timeout: STEP_MS })
}

/** The session's recorded history, from the store through the REST API. */
async function history (id: string): Promise<any[]> {
  const events = await e.history(id)
  assert.ok(events !== null)
  return events
}

test('the console in Chromium: a whole session, a reload, an observer tab and a Redis outage', { timeout: 240_000 }, async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 } })
  const page = await context.newPage()
  const pageErrors: string[] = []
  page.on('pageerror', (err) => pageErrors.push(err.message))

  // Sign in and create a session with partial messages on, so text streams as it is written.
  await signIn(page)
  await shot(page, 'signed-in')
  await page.getByTestId('new-session').click()
  if (await page.getByTestId('new-session-partial').count() > 0) await page.getByTestId('new-session-partial').check()
  await page.getByTestId('new-session-submit').click()
  await page.waitForURL(/#\/session\/[0-9a-f-]{36}$/, { timeout: STEP_MS })
  const id = /#\/session\/([0-9a-f-]{36})$/.exec(page.url())?.[1] as string
  await page.getByTestId('connection-state').filter({ hasText: /open|connected/i }).waitFor({ timeout: STEP_MS })
  assert.match(await page.getByTestId('role').innerText(), /holder|controller/i)

  // A streamed answer: the assistant text grows in several steps before the turn ends.
  await page.evaluate(() => {
    const seen: number[] = []
    ;(window as any).__lengths = seen
    new MutationObserver(() => {
      const last = [...document.querySelectorAll('[data-testid="msg-assistant"]')].at(-1)
      if (last !== undefined) seen.push(last.textContent?.length ?? 0)
    }).observe(document.body, { subtree: true, childList: true, characterData: true })
  })
  await prompt(page, 'hello')
  await page.getByTestId('msg-user').filter({ hasText: 'hello' }).waitFor({ timeout: STEP_MS })
  await page.getByTestId('msg-assistant').filter({ hasText: 'no API key' }).waitFor({ timeout: STEP_MS })
  await page.getByTestId('session-state').filter({ hasText: /idle/i }).waitFor({ timeout: STEP_MS })
  const lengths = new Set(await page.evaluate(() => (window as any).__lengths as number[]))
  assert.ok(lengths.size >= 3, `the answer streamed in steps (lengths seen: ${[...lengths].join(', ')})`)
  await shot(page, 'streamed-answer')

  // A tool call: the permission dialog, approved; the tool's result is shown and its file exists.
  await prompt(page, 'create a file')
  const dialog = page.getByTestId('permission-dialog')
  await dialog.waitFor({ timeout: STEP_MS })
  assert.match(await dialog.innerText(), /Bash/)
  assert.ok((await dialog.innerText()).includes('hello.txt'), 'the dialog shows the command')
  await page.getByTestId('session-state').filter({ hasText: /waiting/i }).waitFor({ timeout: STEP_MS })
  await shot(page, 'permission-prompt')
  await page.getByTestId('permission-allow').click()
  await page.getByTestId('msg-tool-result').filter({ hasText: 'Hello from Claude Code behind the gateway' }).waitFor({ timeout: STEP_MS })
  await page.getByTestId('msg-assistant').filter({ hasText: 'Done. The tool printed' }).waitFor({ timeout: STEP_MS })
  assert.equal(await dialog.isVisible(), false, 'the dialog closed')
  const file = join(e.workspace(id), 'hello.txt')
  assert.ok(existsSync(file), 'the tool created hello.txt in the session workspace')
  assert.equal(readFileSync(file, 'utf8'), 'Hello from Claude Code behind the gateway\n')
  const allowed = (await history(id)).find((f) => f.type === 'gateway' && f.subtype === 'permission_resolved')
  assert.equal(allowed?.decision, 'allowed')
  assert.ok(DEMO_COMMAND.includes('hello.txt'))
  await page.getByTestId('session-state').filter({ hasText: /idle/i }).waitFor({ timeout: STEP_MS })
  await shot(page, 'tool-result')

  // Interrupt a long answer: the turn ends early (the CLI's result says so).
  await prompt(page, 'tell a long story')
  await page.getByTestId('msg-assistant').filter({ hasText: 'Line 3 of a long story' }).waitFor({ timeout: STEP_MS })
  await page.getByTestId('interrupt').click()
  await page.getByTestId('msg-result').filter({ hasText: 'Turn interrupted' }).waitFor({ timeout: STEP_MS })
  await page.getByTestId('session-state').filter({ hasText: /idle/i }).waitFor({ timeout: STEP_MS })
  await eventually(async () => (await history(id)).some((f) => isCli('result')(f) && f.subtype === 'error_during_execution'), STEP_MS, 'an interrupted result')
  const story = (await history(id)).filter(isCli('assistant')).map((f) => JSON.stringify(f.message.content)).join('')
  assert.ok(!story.includes('Line 40 of a long story'), 'the story was cut short')

  // Reload: the history comes back from the store, questions included.
  const before = await page.getByTestId('msg-user').allInnerTexts()
  await page.reload()
  await page.getByTestId('msg-user').nth(2).waitFor({ timeout: STEP_MS })
  assert.deepEqual(await page.getByTestId('msg-user').allInnerTexts(), before)
  await page.getByTestId('msg-tool-result').filter({ hasText: 'Hello from Claude Code behind the gateway' }).waitFor({ timeout: STEP_MS })
  await shot(page, 'after-reload')

  // A second tab as observer sees the session live; the holder stays the holder.
  const observer = await context.newPage()
  await observer.goto(`${e.gw.url}/#/session/${id}?role=observer`)
  await observer.getByTestId('msg-user').nth(2).waitFor({ timeout: STEP_MS })
  await observer.getByTestId('role').filter({ hasText: /observer/i }).waitFor({ timeout: STEP_MS })
  await observer.getByTestId('take-over').waitFor({ timeout: STEP_MS })
  assert.match(await page.getByTestId('role').innerText(), /holder/i, 'the first tab still holds the session')
  assert.equal(await observer.getByTestId('prompt-send').isDisabled(), true, 'an observer cannot send')
  const [watcher, holder] = [observer, page]
  await prompt(holder, 'hello again')
  await watcher.getByTestId('msg-user').filter({ hasText: 'hello again' }).waitFor({ timeout: STEP_MS })
  await watcher.getByTestId('msg-assistant').nth(-1).filter({ hasText: 'no API key' }).waitFor({ timeout: STEP_MS })
  await shot(watcher, 'observer-tab')

  // Back in the holder's tab, as a person is to type there (a tab behind draws on throttled frames: clicks and
  // screenshots wait on them).
  await holder.bringToFront()
  // Redis stops: the degraded banner shows, a prompt still gets its answer, and once Redis is
  // back every frame is in history, contiguous, including what was said during the outage.
  await redis.stop()
  await prompt(holder, 'hello during the outage')
  await holder.getByTestId('store-banner').waitFor({ state: 'visible', timeout: STEP_MS })
  await holder.getByTestId('msg-user').filter({ hasText: 'hello during the outage' }).waitFor({ timeout: STEP_MS })
  await shot(holder, 'store-degraded')
  await redis.start()
  await holder.getByTestId('store-banner').waitFor({ state: 'hidden', timeout: STEP_MS })
  await eventually(async () => {
    const all = await history(id)
    return all.some((f) => f.type === 'gateway' && f.subtype === 'user_message' && f.message.content === 'hello during the outage') &&
      all.filter(isCli('result')).length >= 5
  }, STEP_MS, 'the outage\'s turn reached history')
  const all = await history(id)
  assert.deepEqual(all.map((f) => f.seq), all.map((_, i) => i + 1), 'history is contiguous from seq 1')
  assert.deepEqual(pageErrors, [], 'no uncaught error in the page')
  await context.close()
})
