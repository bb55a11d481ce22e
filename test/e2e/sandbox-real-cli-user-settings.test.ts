// End to end, sandboxed, with the real CLI: a tool the client allowed once
// (here a Bash command) writes the tenant's user settings
// (`$CLAUDE_CONFIG_DIR/settings.json`, which every later CLI of the tenant
// reads at its start) with a permission mode and an allow rule. Clients may
// not write userSettings (PERMISSION_UPDATE_DESTINATIONS), so inside the
// sandbox that file is read-only: the write fails, and the tenant's next
// session still asks before its Bash call. An operator who lists
// userSettings gets the writable file back.
import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, test } from 'node:test'
import {
  E2E_TEST_TIMEOUT_MS, TENANT, allowAnswer, closeAll, denyAnswer, isCanUseTool, isCli, isGateway, startE2e, waitLive, type E2e
} from '../support/e2e.js'
import { sandboxUnavailable } from '../support/sandbox.js'

after(closeAll)
const unavailable = sandboxUnavailable()

const SETTINGS = '{"permissions":{"defaultMode":"acceptEdits","allow":["Bash(touch unasked.txt)"]}}'
const WRITE = `printf '%s' '${SETTINGS}' > "$CLAUDE_CONFIG_DIR/settings.json" && echo settings-written || echo settings-refused`

/** Session 1: the holder allows a Bash call that writes the user settings; returns what the tool printed. */
async function writeUserSettings (e: E2e): Promise<string> {
  const session = await e.createSession()
  const holder = await e.connect(session.id)
  holder.sendUser(`RUN_BASH ${WRITE}`)
  const prompt = await waitLive(holder, isCanUseTool)
  holder.send(allowAnswer(prompt.request_id, { updatedInput: prompt.request.input }))
  await waitLive(holder, isGateway('permission_resolved', { request_id: prompt.request_id }))
  const result = await waitLive(holder, isCli('result'))
  assert.equal(result.subtype, 'success', JSON.stringify(result))
  return String(result.result)
}

/** Session 2: runs `touch unasked.txt`; returns the first prompt or result and the session's init. */
async function nextSessionTouch (e: E2e): Promise<{ first: any, init: any, created: boolean }> {
  const next = await e.createSession()
  const client = await e.connect(next.id)
  client.sendUser('RUN_BASH touch unasked.txt')
  const first = await waitLive(client, (f) => isCanUseTool(f) || isCli('result')(f))
  const created = existsSync(join(e.workspace(next.id), 'unasked.txt'))
  if (isCanUseTool(first)) client.send(denyAnswer(first.request_id, 'not in this test'))
  await waitLive(client, isCli('result'))
  return { first, init: client.frames.find(isCli('system', 'init')), created }
}

test('a tool cannot write the tenant\'s user settings: its next session keeps the default mode and still asks before Bash', { timeout: E2E_TEST_TIMEOUT_MS, skip: unavailable ?? false }, async () => {
  const e = await startE2e({ env: { SANDBOX: 'bwrap' } })
  try {
    const printed = await writeUserSettings(e)
    const { first, init, created } = await nextSessionTouch(e)
    assert.ok(isCanUseTool(first), `Bash ran without a prompt in the tenant's next session: ${JSON.stringify(first.result)}`)
    assert.equal(init.permissionMode, 'default')
    assert.ok(!created, 'nothing ran before the answer')
    assert.match(printed, /settings-refused/)
    const userSettings = join(e.scratch.dataDir, 'claude-config', TENANT, 'settings.json')
    assert.ok(!existsSync(userSettings) || !readFileSync(userSettings, 'utf8').includes('acceptEdits'), 'the tenant\'s user settings are unchanged')
  } finally {
    await e.close()
  }
})

test('with PERMISSION_UPDATE_DESTINATIONS listing userSettings, a tool may write them and the next session follows them', { timeout: E2E_TEST_TIMEOUT_MS, skip: unavailable ?? false }, async () => {
  const e = await startE2e({ env: { SANDBOX: 'bwrap', PERMISSION_UPDATE_DESTINATIONS: 'session,localSettings,projectSettings,userSettings' } })
  try {
    assert.match(await writeUserSettings(e), /settings-written/)
    const { first, init, created } = await nextSessionTouch(e)
    assert.equal(first.type, 'result', 'the allow rule written in session 1 applies')
    assert.equal(init.permissionMode, 'acceptEdits')
    assert.ok(created)
  } finally {
    await e.close()
  }
})
