/**
 * The tenant's user settings (`<config dir>/settings.json`), held read-only
 * in the sandbox. Every CLI of the tenant reads that file at its start:
 * permission rules, `permissions.defaultMode`, hooks, env. A tool a client
 * allowed once (a Bash command, a Write) could otherwise write it and so
 * grant every LATER session of the tenant what no client may grant
 * (PERMISSION_UPDATE_DESTINATIONS without `userSettings`). So each sandbox
 * gets a gateway-made copy of the file as it is at the CLI's start, bound
 * read-only over it; the rest of the config dir stays writable (the CLI's
 * `.claude.json`, conversations, todos).
 *
 * The copy lives in the gateway's private socket folder, so the mount's
 * source is never a path a tenant can redirect; the file in the config dir
 * is read through no symlink and only if regular, and whatever else a tool
 * left at its path (a symlink, a FIFO, a folder) is moved aside so that
 * bwrap's mount point is a regular file the gateway made.
 */
import { randomBytes } from 'node:crypto'
import { closeSync, constants, fstatSync, lstatSync, openSync, readSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK } = constants

/** The user settings file's name in the CLI's config dir (CLI 2.1.x). */
export const USER_SETTINGS_FILE = 'settings.json'
/** Larger than any settings file; a bigger one is not copied (the CLI then sees `{}`). */
const MAX_BYTES = 4 * 1024 * 1024

export interface PinnedUserSettings {
  /** Host path of the read-only copy (the mount's source). */
  source: string
  /** Path of the user settings inside the sandbox (the mount's target; the same path on the host). */
  target: string
  /** Removes the copy (after the CLI has exited). */
  remove: () => void
}

/**
 * Copies the tenant's user settings into `privateDir` and makes sure the
 * config dir holds a regular file at their path to mount the copy over.
 */
export function pinUserSettings (configDir: string, privateDir: string): PinnedUserSettings {
  const target = join(configDir, USER_SETTINGS_FILE)
  const text = readRegular(target) ?? replaceWithEmpty(target)
  const source = join(privateDir, `${randomBytes(6).toString('hex')}.settings.json`)
  writeFileSync(source, text, { mode: 0o400, flag: 'wx' })
  return { source, target, remove: () => { rmSync(source, { force: true }) } }
}

/** The file's text when it is a regular file of sane size; null when it is absent or anything else. */
function readRegular (path: string): string | null {
  let fd: number
  try {
    fd = openSync(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
  } catch {
    return null // absent, a symlink (ELOOP), …: replaced below
  }
  try {
    const st = fstatSync(fd)
    if (!st.isFile()) return null
    if (st.size > MAX_BYTES) return '{}\n'
    const buf = Buffer.alloc(st.size)
    let got = 0
    while (got < buf.length) {
      const n = readSync(fd, buf, got, buf.length - got, got)
      if (n === 0) break
      got += n
    }
    return buf.subarray(0, got).toString('utf8')
  } finally {
    closeSync(fd)
  }
}

/** Moves aside whatever is at `path` (never following it) and creates an empty settings file there; returns its text. */
function replaceWithEmpty (path: string): string {
  const text = '{}\n'
  let present = true
  try { lstatSync(path) } catch { present = false }
  if (present) renameSync(path, `${path}.moved-${randomBytes(4).toString('hex')}`)
  const fd = openSync(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600)
  try {
    writeFileSync(fd, text)
  } finally {
    closeSync(fd)
  }
  return text
}
