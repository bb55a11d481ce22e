// End to end with the real CLI 2.1.332: a user message that is `/config …`
// (or its alias `/settings`) is a command the CLI runs itself, even in
// stream-json mode. `/config permissionMode=acceptEdits` writes the tenant's
// user settings, and the tenant's next session starts in that mode and runs
// Bash with no prompt. Clients may not write userSettings, so the gateway
// refuses the message before it reaches the CLI.
import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import {
  E2E_TEST_TIMEOUT_MS, TENANT, denyAnswer, isCanUseTool, isCli, isGateway, startE2e, waitLive, type E2e
} from '../support/e2e.js'

// One gateway for both cases (each its own sessions): the close at the end still checks no CLI survived.
let e: E2e
before(async () => { e = await startE2e() })
// Not closeAll(): it drops the close's failures, and this close is where they are checked.
after(async () => { await e.close() })

test('a /config or /settings user message is refused: the tenant\'s settings keep their mode, its next session still asks before Bash', { timeout: E2E_TEST_TIMEOUT_MS }, async () => {
  const session = await e.createSession()
  const holder = await e.connect(session.id)
  const attempts: unknown[] = [
    '/config permissionMode=acceptEdits',
    // The CLI runs a command in any text block of a message.
    [{ type: 'text', text: 'hi' }, { type: 'text', text: '/settings permissionMode=auto' }]
  ]
  const answers: any[] = []
  for (const content of attempts) {
    const mark = holder.frames.length
    holder.send({ type: 'user', message: { role: 'user', content }, parent_tool_use_id: null })
    answers.push(await waitLive(holder, (f) => isGateway('error')(f) || isCli('result')(f), mark))
  }

  // The tenant's next session: its Bash call is asked, nothing ran before the answer.
  const next = await e.createSession()
  const client = await e.connect(next.id)
  client.sendUser('RUN_BASH touch unasked.txt && echo unasked-ran')
  const first = await waitLive(client, (f) => isCanUseTool(f) || isCli('result')(f))
  assert.ok(isCanUseTool(first), `Bash ran without a prompt: ${JSON.stringify(first.result)}`)
  assert.equal(client.frames.find(isCli('system', 'init')).permissionMode, 'default')
  assert.ok(!existsSync(join(e.workspace(next.id), 'unasked.txt')))
  client.send(denyAnswer(first.request_id, 'not in this test'))
  await waitLive(client, isCli('result'))

  const userSettings = join(e.scratch.dataDir, 'claude-config', TENANT, 'settings.json')
  assert.ok(!existsSync(userSettings) || !readFileSync(userSettings, 'utf8').includes('defaultMode'), 'no permission mode in the tenant\'s settings')
  for (const [i, answer] of answers.entries()) {
    assert.equal(answer.type, 'gateway', `the CLI ran ${JSON.stringify(attempts[i])}: ${JSON.stringify(answer.result)}`)
    assert.equal(answer.code, 'permission_update_not_allowed')
  }
})

test('other slash commands still reach the CLI: /model sets the model for the session only', { timeout: E2E_TEST_TIMEOUT_MS }, async () => {
  const session = await e.createSession()
  const holder = await e.connect(session.id)
  holder.sendUser('/model opus')
  const result = await waitLive(holder, (f) => isGateway('error')(f) || isCli('result')(f))
  assert.equal(result.type, 'result', JSON.stringify(result))
  assert.match(String(result.result), /for this session only/)
})
