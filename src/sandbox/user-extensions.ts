/**
 * The tenant's user skills, subagents, slash commands and plugins
 * (`<config dir>/skills`, `agents`, `commands`, `plugins`), shown as empty
 * read-only folders in the sandbox. Every CLI of the tenant loads them at its start,
 * and their frontmatter grants what no client approved: `allowed-tools`
 * (a skill the model invokes, a command a user types: its Bash runs with no
 * prompt), a subagent's `permissionMode: bypassPermissions`, and `hooks`
 * (commands run with no prompt at all, even for a subagent the model starts
 * on its own). A plugin the user settings enable is loaded from `plugins`
 * (known_marketplaces.json, its folder with its own hooks, commands, agents
 * and MCP servers), so a tool that rewrote it would run its hooks in every
 * later session. A tool a client allowed once could write them, so, like the
 * user settings (user-settings.ts), they are out of its reach unless
 * PERMISSION_UPDATE_DESTINATIONS lists `userSettings`.
 *
 * The mount source is one empty folder the gateway makes in its private
 * socket folder, never a tenant's path. In the config dir, whatever a tool
 * left at those names that is not a real folder (a symlink, a file) is
 * moved aside, never followed, so that bwrap's mount points are folders.
 */
import { randomBytes } from 'node:crypto'
import { lstatSync, mkdirSync, renameSync, rmSync } from 'node:fs'
import { join } from 'node:path'

/** Folders of the config dir whose files grant tools or run commands in later sessions (CLI 2.1.332). */
export const USER_EXTENSION_DIRS = ['skills', 'agents', 'commands', 'plugins'] as const

export interface PinnedUserExtensions {
  /** Read-only mounts: the empty folder over each of USER_EXTENSION_DIRS. */
  mounts: Array<{ source: string, target: string }>
  /** Removes the empty folder (after the CLI has exited). */
  remove: () => void
}

/** Makes the empty folder in `privateDir` and a real folder at each name in the config dir to mount it over. */
export function pinUserExtensions (configDir: string, privateDir: string): PinnedUserExtensions {
  const source = join(privateDir, `${randomBytes(6).toString('hex')}.empty`)
  mkdirSync(source, { mode: 0o500 })
  const mounts = USER_EXTENSION_DIRS.map((name) => {
    const target = join(configDir, name)
    ensureFolder(target)
    return { source, target }
  })
  return { mounts, remove: () => { rmSync(source, { recursive: true, force: true }) } }
}

/** A real folder at `path`: kept if it is one, else what is there is moved aside (not followed) and a folder made. */
function ensureFolder (path: string): void {
  let kind: 'dir' | 'other' | 'absent' = 'absent'
  try { kind = lstatSync(path).isDirectory() ? 'dir' : 'other' } catch { /* absent */ }
  if (kind === 'dir') return
  if (kind === 'other') renameSync(path, `${path}.moved-${randomBytes(4).toString('hex')}`)
  mkdirSync(path, { mode: 0o700 })
}
