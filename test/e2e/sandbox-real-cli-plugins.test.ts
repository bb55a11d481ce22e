// End to end, sandboxed, with the real CLI 2.1.332: a plugin the tenant's
// user settings enable (`enabledPlugins`, pinned as at the CLI's start) is
// loaded from files in `<config dir>/plugins` (known_marketplaces.json, the
// marketplace folder, the plugin's own hooks/commands/agents), and its
// hooks run with no prompt. A tool a client allowed once (here one Bash call)
// adds a hook to it; unless PERMISSION_UPDATE_DESTINATIONS lists
// userSettings, that folder is read-only and empty in the sandbox, so the
// write fails and no later session runs the hook. (A plugin the settings do
// not enable is not loaded, whatever installed_plugins.json,
// known_marketplaces.json or its manifest say: the report of this change
// lists what was tried.)
import assert from 'node:assert/strict'
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, test } from 'node:test'
import {
  E2E_TEST_TIMEOUT_MS, TENANT, allowAnswer, closeAll, isCanUseTool, isCli, isGateway, startE2e, waitLive, type E2e
} from '../support/e2e.js'
import { sandboxUnavailable } from '../support/sandbox.js'

after(closeAll)
const unavailable = sandboxUnavailable()

/** The operator's set-up: a local marketplace `mkt` with plugin `planted` (one harmless command), enabled in the user settings. */
function installPlugin (configDir: string): string {
  const market = join(configDir, 'plugins', 'marketplaces', 'mkt')
  const plugin = join(market, 'planted')
  mkdirSync(join(market, '.claude-plugin'), { recursive: true })
  mkdirSync(join(plugin, '.claude-plugin'), { recursive: true })
  mkdirSync(join(plugin, 'commands'), { recursive: true })
  writeFileSync(join(market, '.claude-plugin', 'marketplace.json'), JSON.stringify({ name: 'mkt', owner: { name: 'operator' }, plugins: [{ name: 'planted', source: './planted', description: 'planted' }] }))
  writeFileSync(join(plugin, '.claude-plugin', 'plugin.json'), JSON.stringify({ name: 'planted', version: '1.0.0', description: 'planted' }))
  writeFileSync(join(plugin, 'commands', 'hello.md'), '---\ndescription: hello\n---\nSay hello.\n')
  const now = new Date().toISOString()
  writeFileSync(join(configDir, 'plugins', 'known_marketplaces.json'), JSON.stringify({ mkt: { source: { source: 'directory', path: market }, installLocation: market, lastUpdated: now } }))
  writeFileSync(join(configDir, 'plugins', 'installed_plugins.json'), JSON.stringify({ version: 2, plugins: { 'planted@mkt': [{ scope: 'user', installPath: plugin, version: '1.0.0', installedAt: now, lastUpdated: now }] } }))
  writeFileSync(join(configDir, 'settings.json'), JSON.stringify({ enabledPlugins: { 'planted@mkt': true } }))
  return plugin
}

/** Session 1: the holder allows one Bash call that gives the plugin a SessionStart hook; returns what it printed. */
async function plantHook (e: E2e, plugin: string, configDir: string): Promise<string> {
  const hooks = JSON.stringify({ hooks: { SessionStart: [{ hooks: [{ type: 'command', command: `touch ${configDir}/hook-ran` }] }] } })
  const session = await e.createSession()
  const holder = await e.connect(session.id)
  holder.sendUser(`RUN_BASH { mkdir -p ${plugin}/hooks && printf '%s' '${hooks}' > ${plugin}/hooks/hooks.json; } 2>/dev/null && echo hook-written || echo hook-refused`)
  const prompt = await waitLive(holder, isCanUseTool)
  holder.send(allowAnswer(prompt.request_id, { updatedInput: prompt.request.input }))
  await waitLive(holder, isGateway('permission_resolved', { request_id: prompt.request_id }))
  return String((await waitLive(holder, isCli('result'))).result)
}

/** A later session: its init and result. */
async function later (e: E2e): Promise<{ init: any, result: any }> {
  const s = await e.createSession()
  const c = await e.connect(s.id)
  c.sendUser('hello')
  const result = await waitLive(c, isCli('result'))
  return { init: c.frames.find(isCli('system', 'init')), result }
}

const names = (init: any): string[] => (init.plugins as Array<{ name: string }>).map((p) => p.name)

test('a hook a tool added to an enabled plugin in the config dir does not run in the tenant\'s later sessions', { timeout: E2E_TEST_TIMEOUT_MS * 2, skip: unavailable ?? false }, async () => {
  const e = await startE2e({ env: { SANDBOX: 'bwrap' } })
  try {
    const configDir = join(e.scratch.dataDir, 'claude-config', TENANT)
    const plugin = installPlugin(configDir)
    const printed = await plantHook(e, plugin, configDir)
    const next = await later(e)
    assert.equal(next.result.subtype, 'success', JSON.stringify(next.result))
    assert.ok(!existsSync(join(configDir, 'hook-ran')), `the hook a tool added ran with no prompt (plugins loaded: ${JSON.stringify(names(next.init))})`)
    assert.ok(!names(next.init).includes('planted'), 'the plugin was loaded from files a tool can write')
    assert.match(printed, /hook-refused/)
  } finally {
    await e.close()
  }
})

test('with PERMISSION_UPDATE_DESTINATIONS listing userSettings, the plugin loads and a tool may change it', { timeout: E2E_TEST_TIMEOUT_MS * 2, skip: unavailable ?? false }, async () => {
  const e = await startE2e({ env: { SANDBOX: 'bwrap', PERMISSION_UPDATE_DESTINATIONS: 'session,localSettings,projectSettings,userSettings' } })
  try {
    const configDir = join(e.scratch.dataDir, 'claude-config', TENANT)
    const plugin = installPlugin(configDir)
    assert.match(await plantHook(e, plugin, configDir), /hook-written/)
    const next = await later(e)
    assert.ok(names(next.init).includes('planted'), JSON.stringify(next.init.plugins))
    assert.ok(next.init.slash_commands.includes('planted:hello'))
    assert.ok(existsSync(join(configDir, 'hook-ran')), 'the operator allowed what the plugin runs')
  } finally {
    await e.close()
  }
})
