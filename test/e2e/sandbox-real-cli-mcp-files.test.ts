// End to end, sandboxed, with the real CLI 2.1.332: MCP servers named in
// files a tool can write. A workspace's `.mcp.json` (here written by a Bash
// call the holder allowed, in a folder the tenant's sessions keep using) and
// the config dir's `.claude.json` (`mcpServers`, user scope) each name a
// stdio server, a command the CLI runs at its start with no prompt: so one
// approval would run that command at every later start of the tenant's
// sessions, which CLIENT_MCP_SERVER_TYPES (no `stdio` by default) forbids a
// client to ask for directly. The sandbox starts the CLI with
// `--strict-mcp-config`, so it loads neither file; with `stdio` allowed they
// load as before.
import assert from 'node:assert/strict'
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { E2E_TEST_TIMEOUT_MS, TENANT, allowAnswer, closeAll, isCanUseTool, isCli, isGateway, startE2e, waitLive, type E2e } from '../support/e2e.js'
import { sandboxUnavailable } from '../support/sandbox.js'

after(closeAll)
const unavailable = sandboxUnavailable()

/** Session 1 (cwd `proj`) writes `.mcp.json` there with an allowed Bash call; `.claude.json` gets a user server. Returns the marker folder. */
async function plantServers (e: E2e): Promise<string> {
  const configDir = join(e.scratch.dataDir, 'claude-config', TENANT)
  mkdirSync(configDir, { recursive: true })
  const server = (marker: string): Record<string, unknown> => ({ type: 'stdio', command: '/bin/sh', args: ['-c', `touch ${join(configDir, marker)}; exec sleep 60`] })
  writeFileSync(join(configDir, '.claude.json'), JSON.stringify({ mcpServers: { planted_user: server('user-server-ran') } }))
  const session = await e.createSession({ cwd: 'proj' })
  const holder = await e.connect(session.id)
  const project = JSON.stringify({ mcpServers: { planted_project: server('project-server-ran') } })
  holder.sendUser(`RUN_BASH printf '%s' '${project}' > .mcp.json && echo planted`)
  const prompt = await waitLive(holder, isCanUseTool)
  holder.send(allowAnswer(prompt.request_id, { updatedInput: prompt.request.input }))
  await waitLive(holder, isGateway('permission_resolved', { request_id: prompt.request_id }))
  assert.match(String((await waitLive(holder, isCli('result'))).result), /planted/)
  return configDir
}

/** Session 2 in the same folder: the MCP servers its CLI lists at its first turn. */
async function nextSessionServers (e: E2e): Promise<string[]> {
  const next = await e.createSession({ cwd: 'proj' })
  const client = await e.connect(next.id)
  client.sendUser('hello')
  await waitLive(client, isCli('result'))
  return client.frames.find(isCli('system', 'init')).mcp_servers.map((s: any) => s.name).sort()
}

test('MCP servers a tool wrote into the workspace or the config dir are not started by the tenant\'s later sessions', { timeout: E2E_TEST_TIMEOUT_MS, skip: unavailable ?? false }, async () => {
  const e = await startE2e({ env: { SANDBOX: 'bwrap' } })
  try {
    const configDir = await plantServers(e)
    assert.deepEqual(await nextSessionServers(e), [])
    assert.ok(!existsSync(join(configDir, 'user-server-ran')), 'the user-scope server\'s command never ran')
    assert.ok(!existsSync(join(configDir, 'project-server-ran')), 'the project server\'s command never ran')
  } finally {
    await e.close()
  }
})

test('with CLIENT_MCP_SERVER_TYPES listing stdio, the CLI loads them as it would alone', { timeout: E2E_TEST_TIMEOUT_MS, skip: unavailable ?? false }, async () => {
  const e = await startE2e({ env: { SANDBOX: 'bwrap', CLIENT_MCP_SERVER_TYPES: 'sdk,stdio' } })
  try {
    await plantServers(e)
    assert.deepEqual(await nextSessionServers(e), ['planted_project', 'planted_user'])
  } finally {
    await e.close()
  }
})
