/**
 * SANDBOX=bwrap with the fake CLI: the tenant's user settings
 * (`<config dir>/settings.json`) are read-only inside every sandbox (a copy
 * made at the CLI's start), unless PERMISSION_UPDATE_DESTINATIONS lists
 * userSettings. The real CLI's behaviour (a later session following what a
 * tool wrote) is in test/e2e/sandbox-real-cli-user-settings.test.ts; this
 * covers what a tool may leave at that path for the gateway to copy: a
 * symlink to another tenant's settings must not become a mount of them.
 */
import assert from 'node:assert/strict'
import { lstatSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { TOKEN_B } from '../support/gateway.js'
import { run, sandboxUnavailable } from '../support/sandbox.js'
import { bwrapGateway, sandboxHolder } from '../support/sandbox-holder.js'

const unavailable = sandboxUnavailable()

describe('SANDBOX=bwrap: the tenant\'s user settings (fake CLI)', { skip: unavailable ?? false }, () => {
  it('are shown as they were at the start, read-only; a tool\'s write fails and the file is unchanged', async (t) => {
    const gw = await bwrapGateway(t)
    const holder = await sandboxHolder(gw, t)
    const file = join(gw.dataDir, 'claude-config', 'tenant-a', 'settings.json')
    assert.equal(await run(holder, 'cat "$CLAUDE_CONFIG_DIR/settings.json"'), '{}\n[exit 0]')
    const write = await run(holder, 'echo \'{"permissions":{"defaultMode":"acceptEdits"}}\' > "$CLAUDE_CONFIG_DIR/settings.json"')
    assert.match(write, /Read-only file system/)
    assert.match(await run(holder, 'rm -f "$CLAUDE_CONFIG_DIR/settings.json"; mv "$CLAUDE_CONFIG_DIR/settings.json" "$CLAUDE_CONFIG_DIR/x"'), /busy/i)
    assert.equal(readFileSync(file, 'utf8'), '{}\n')
    // The rest of the config dir stays writable (the CLI's own .claude.json, conversations).
    assert.match(await run(holder, 'echo {} > "$CLAUDE_CONFIG_DIR/.claude.json" && echo ok'), /^ok\n\[exit 0\]$/)
  })

  it('a symlink a tool left in their place is moved aside, never followed: another tenant\'s settings are not shown', async (t) => {
    const gw = await bwrapGateway(t)
    await sandboxHolder(gw, t, TOKEN_B) // makes tenant-b's config dir
    const settingsOfB = join(gw.dataDir, 'claude-config', 'tenant-b', 'settings.json')
    writeFileSync(settingsOfB, '{"env":{"SECRET_OF_B":"b"}}')
    const first = await sandboxHolder(gw, t)
    // The tool cannot see tenant-b's folder, but can name it.
    assert.match(await run(first, `ln -sf ${settingsOfB} "$CLAUDE_CONFIG_DIR/settings.json.new" && mv -f "$CLAUDE_CONFIG_DIR/settings.json.new" "$CLAUDE_CONFIG_DIR/settings.json"; echo done`), /busy[\s\S]*done/i)
    // Its own start's file is mounted, so the swap fails there; make it on the host as a tool of a
    // concurrent session could between two starts.
    const mine = join(gw.dataDir, 'claude-config', 'tenant-a', 'settings.json')
    rmSync(mine)
    symlinkSync(settingsOfB, mine)
    const next = await sandboxHolder(gw, t)
    assert.equal(await run(next, 'cat "$CLAUDE_CONFIG_DIR/settings.json"'), '{}\n[exit 0]')
    assert.ok(lstatSync(mine).isFile(), 'a regular file the gateway made')
    assert.equal(readFileSync(settingsOfB, 'utf8'), '{"env":{"SECRET_OF_B":"b"}}', 'tenant-b\'s settings untouched')
  })

  it('are writable when PERMISSION_UPDATE_DESTINATIONS lists userSettings', async (t) => {
    const gw = await bwrapGateway(t, { PERMISSION_UPDATE_DESTINATIONS: 'session,userSettings' })
    const holder = await sandboxHolder(gw, t)
    assert.match(await run(holder, 'echo \'{"a":1}\' > "$CLAUDE_CONFIG_DIR/settings.json" && echo ok'), /^ok\n\[exit 0\]$/)
    assert.equal(readFileSync(join(gw.dataDir, 'claude-config', 'tenant-a', 'settings.json'), 'utf8'), '{"a":1}\n')
  })
})
