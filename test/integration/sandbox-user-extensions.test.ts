/**
 * SANDBOX=bwrap with the fake CLI: the tenant's user skills, subagents and
 * slash commands and plugins (`<config dir>/skills`, `agents`, `commands`, `plugins`) are empty and
 * read-only inside every sandbox unless PERMISSION_UPDATE_DESTINATIONS lists
 * userSettings. The real CLI's behaviour (a later session loading what a tool
 * wrote there) is in test/e2e/sandbox-real-cli-user-extensions.test.ts; this
 * covers what a tool may leave at those paths: a symlink to another tenant's
 * folder is moved aside, never followed or written through.
 */
import assert from 'node:assert/strict'
import { lstatSync, mkdirSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { before, describe, it } from 'node:test'
import { TOKEN_B, type TestGateway, suiteScope } from '../support/gateway.js'
import { run, sandboxUnavailable } from '../support/sandbox.js'
import { bwrapGateway, sandboxHolder } from '../support/sandbox-holder.js'

const unavailable = sandboxUnavailable()

describe('SANDBOX=bwrap: the tenant\'s user skills, subagents and commands (fake CLI)', { skip: unavailable ?? false }, () => {
  // The first two cases share a gateway (default settings): each looks at its folders on a new session's start.
  const scope = suiteScope()
  let shared: TestGateway
  before(async () => { shared = await bwrapGateway(scope) })

  it('are empty and read-only; a tool\'s write fails and the host folders stay as they were', async (t) => {
    const gw = shared
    const configDir = join(gw.dataDir, 'claude-config', 'tenant-a')
    mkdirSync(join(configDir, 'agents'), { recursive: true })
    writeFileSync(join(configDir, 'agents', 'kept.md'), 'operator\'s\n')
    const holder = await sandboxHolder(gw, t)
    assert.equal(await run(holder, 'for d in skills agents commands plugins; do echo "$d:$(ls -A "$CLAUDE_CONFIG_DIR/$d")"; done'), 'skills:\nagents:\ncommands:\nplugins:\n[exit 0]')
    const write = await run(holder, 'for d in skills agents commands plugins; do mkdir -p "$CLAUDE_CONFIG_DIR/$d/x" || echo "no-$d"; done; mv "$CLAUDE_CONFIG_DIR/skills" "$CLAUDE_CONFIG_DIR/s2" || echo no-move')
    assert.match(write, /no-skills[\s\S]*no-agents[\s\S]*no-commands[\s\S]*no-plugins[\s\S]*no-move/)
    assert.deepEqual(readdirSync(join(configDir, 'agents')), ['kept.md'])
    assert.deepEqual(readdirSync(join(configDir, 'skills')), [])
  })

  it('a symlink a tool left in their place is moved aside, never followed: another tenant\'s folder is neither shown nor covered', async (t) => {
    const gw = shared
    await sandboxHolder(gw, t, TOKEN_B) // makes tenant-b's config dir
    const skillsOfB = join(gw.dataDir, 'claude-config', 'tenant-b', 'skills')
    mkdirSync(join(skillsOfB, 'b-skill'), { recursive: true })
    writeFileSync(join(skillsOfB, 'b-skill', 'SKILL.md'), 'secret of b\n')
    // As a tool of a concurrent session could between two starts.
    const mine = join(gw.dataDir, 'claude-config', 'tenant-a', 'skills')
    mkdirSync(join(gw.dataDir, 'claude-config', 'tenant-a'), { recursive: true })
    rmSync(mine, { recursive: true, force: true })
    symlinkSync(skillsOfB, mine)
    const holder = await sandboxHolder(gw, t)
    assert.equal(await run(holder, 'ls -A "$CLAUDE_CONFIG_DIR/skills"'), '[exit 0]')
    assert.ok(lstatSync(mine).isDirectory() && !lstatSync(mine).isSymbolicLink(), 'a real folder the gateway made')
    assert.deepEqual(readdirSync(skillsOfB), ['b-skill'], 'tenant-b\'s skills untouched')
  })

  it('are writable when PERMISSION_UPDATE_DESTINATIONS lists userSettings', async (t) => {
    const gw = await bwrapGateway(t, { PERMISSION_UPDATE_DESTINATIONS: 'session,userSettings' })
    const holder = await sandboxHolder(gw, t)
    assert.match(await run(holder, 'mkdir -p "$CLAUDE_CONFIG_DIR/skills/x" && echo ok'), /^ok\n\[exit 0\]$/)
    assert.deepEqual(readdirSync(join(gw.dataDir, 'claude-config', 'tenant-a', 'skills')), ['x'])
  })
})
