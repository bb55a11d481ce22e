/**
 * The CLI's own copy of a conversation, which `--resume` needs: one file,
 * `<config dir>/projects/<project>/<session id>.jsonl` (<project> is the
 * CLI's name for the working folder). Nodes whose config dirs are on local
 * disk carry it through the store: the owner saves it at each step of a turn
 * (a permission prompt, a tool's result), after each turn and when its CLI
 * ends, and a node that takes the session over writes it back
 * before it starts the CLI with `--resume`. Copying this one file is enough
 * for the CLI to continue (seen with 2.1.332).
 *
 * The stored form is `<project>\n<file bytes>`. As the CLI only appends to
 * the file, a save after the first sends only what is new, from where the
 * last one ended (`ConversationMark`), checked against the bytes it ended with.
 *
 * The gateway reads and writes these files on the host, below a config dir
 * the tenant's tools write to (in the sandbox too): every part below the
 * config dir is opened without following a symlink (openBelow), or a link
 * a tool left there would have the gateway read or write, on its tenant's
 * behalf, a file its sandbox hides (another tenant's, the gateway's own).
 */
import { closeSync, constants, existsSync, fstatSync, mkdirSync, openSync, readFileSync, readSync, readdirSync, writeSync } from 'node:fs'
import { join } from 'node:path'

const { O_RDONLY, O_WRONLY, O_CREAT, O_TRUNC, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK } = constants

/** Where the stored copy ends: its length, and its last bytes to recognise the file by. */
export interface ConversationMark {
  project: string
  /** Length of the stored form. */
  length: number
  /** Its last bytes (up to MARK_BYTES). */
  tail: Buffer
}

/** How many of the last saved bytes must still be where they were for the file to count as the same, grown. */
const MARK_BYTES = 256

/** The mark of a stored form; null when it is not one. */
export function markOf (stored: Buffer): ConversationMark | null {
  const newline = stored.indexOf(0x0a)
  if (newline < 1) return null
  return { project: stored.subarray(0, newline).toString('utf8'), length: stored.length, tail: Buffer.from(stored.subarray(Math.max(newline + 1, stored.length - MARK_BYTES))) }
}

/** The mark after `grown` was appended to what `mark` marks. */
export function advance (mark: ConversationMark, grown: Buffer): ConversationMark {
  const tail = Buffer.concat([mark.tail, grown])
  return { project: mark.project, length: mark.length + grown.length, tail: Buffer.from(tail.subarray(Math.max(0, tail.length - MARK_BYTES))) }
}

/**
 * What the CLI wrote to the file since `mark` (its whole lines; empty when
 * nothing), read from there only; null when the file is not that copy grown
 * (gone, shorter, or other bytes where the mark's last ones were): then it
 * must be saved whole.
 */
export function readSince (configDir: string, sessionId: string, mark: ConversationMark): Buffer | null {
  const prefix = Buffer.byteLength(mark.project) + 1
  let fd: number
  try {
    fd = openBelow(configDir, ['projects', mark.project], `${sessionId}.jsonl`, O_RDONLY)
  } catch {
    return null
  }
  try {
    const size = fstatSync(fd).size
    const from = mark.length - prefix - mark.tail.length
    if (from < 0 || size < mark.length - prefix) return null
    const bytes = Buffer.alloc(size - from)
    let read = 0
    while (read < bytes.length) {
      const n = readSync(fd, bytes, read, bytes.length - read, from + read)
      if (n === 0) break
      read += n
    }
    if (read < mark.tail.length || !bytes.subarray(0, mark.tail.length).equals(mark.tail)) return null
    return wholeLines(bytes.subarray(mark.tail.length, read))
  } finally {
    closeSync(fd)
  }
}

/** Where the CLI keeps the conversation of `sessionId` for the working folder it calls `project`. */
export function conversationPath (configDir: string, project: string, sessionId: string): string {
  return join(configDir, 'projects', project, `${sessionId}.jsonl`)
}

/**
 * Its whole lines only: the CLI may be writing the last one while it is
 * read, and a copy cut mid-line would be what a node resumes from.
 */
function wholeLines (bytes: Buffer): Buffer {
  return bytes.subarray(0, bytes.lastIndexOf(0x0a) + 1)
}

/** The conversation file of `sessionId` under `configDir` (its whole lines), as the stored form; null when the CLI wrote none. */
export function readConversation (configDir: string, sessionId: string): Buffer | null {
  const projects = join(configDir, 'projects')
  // Asked at every step of a turn until the file is found: no exception thrown (and its stack built) when there is none.
  if (!existsSync(projects)) return null
  let dirs: string[]
  try {
    const fd = folderBelow(configDir, ['projects'])
    try {
      dirs = readdirSync(inFolder(fd, '.'))
    } finally {
      closeSync(fd)
    }
  } catch {
    return null
  }
  for (const project of dirs) {
    if (!existsSync(conversationPath(configDir, project, sessionId))) continue
    let fd: number
    try {
      fd = openBelow(configDir, ['projects', project], `${sessionId}.jsonl`, O_RDONLY)
    } catch {
      continue // a link, a FIFO (or gone meanwhile): not the CLI's file
    }
    try {
      return Buffer.concat([Buffer.from(`${project}\n`), wholeLines(readFileSync(fd))])
    } finally {
      closeSync(fd)
    }
  }
  return null
}

/**
 * Writes a stored conversation back under `configDir` unless the file there
 * holds at least as much (a shared volume, or this node ran the last turns):
 * the CLI only appends to it, so the longer copy is the newer one. True when
 * it wrote the file.
 */
export function writeConversation (configDir: string, sessionId: string, stored: Buffer): boolean {
  const newline = stored.indexOf(0x0a)
  if (newline < 1) return false
  const project = stored.subarray(0, newline).toString('utf8')
  if (project.includes('/') || project === '.' || project === '..') return false
  const local = readConversation(configDir, sessionId)
  // Kept only when it is the stored copy grown: a longer file that is not (a frozen node's CLI wrote on while
  // another node ran the session from the stored copy) would resume without that node's turns.
  if (local !== null && local.length >= stored.length && local.subarray(0, stored.length).equals(stored)) return false
  let fd: number
  try {
    fd = openBelow(configDir, ['projects', project], `${sessionId}.jsonl`, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
  } catch (err) {
    // A link, a FIFO or a file where a folder should be, left by a tool: not written through; the CLI starts from no copy.
    if (['ELOOP', 'ENOTDIR', 'ENXIO', 'EFTYPE'].includes((err as NodeJS.ErrnoException).code ?? '')) return false
    throw err
  }
  try {
    const data = stored.subarray(newline + 1)
    for (let written = 0; written < data.length;) written += writeSync(fd, data, written)
  } finally {
    closeSync(fd)
  }
  return true
}

/** `name` in the folder open as `fd`, as a path: Linux's /proc/self/fd, so nothing but that folder is looked up again. */
function inFolder (fd: number, name: string): string {
  return `/proc/self/fd/${fd}/${name}`
}

/**
 * Opens the folder `<configDir>/<parts…>` (made, mode 0700, when `create`),
 * each part in the one before it and none of them a symlink (ELOOP), so a
 * folder swapped for a link meanwhile changes nothing. The config dir itself
 * is the gateway's. Returns its descriptor.
 */
function folderBelow (configDir: string, parts: readonly string[], create = false): number {
  if (create) mkdirSync(configDir, { recursive: true, mode: 0o700 })
  let fd = openSync(configDir, O_RDONLY | O_DIRECTORY)
  try {
    for (const part of parts) {
      if (create) {
        try {
          mkdirSync(inFolder(fd, part), { mode: 0o700 })
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
        }
      }
      const next = openSync(inFolder(fd, part), O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
      closeSync(fd)
      fd = next
    }
    return fd
  } catch (err) {
    closeSync(fd)
    throw err
  }
}

/**
 * Opens the regular file `name` in `<configDir>/<folders…>` (made when it is
 * created), no part of the path a symlink. Never waits: a FIFO there (open(2)
 * would block the gateway until a writer came) is refused, as any other file
 * that is not a regular one (EFTYPE), or ENXIO when opened to write.
 */
function openBelow (configDir: string, folders: readonly string[], name: string, flags: number, mode?: number): number {
  const folder = folderBelow(configDir, folders, (flags & O_CREAT) !== 0)
  let fd: number
  try {
    fd = openSync(inFolder(folder, name), flags | O_NOFOLLOW | O_NONBLOCK, mode)
  } finally {
    closeSync(folder)
  }
  if (fstatSync(fd).isFile()) return fd
  closeSync(fd)
  throw Object.assign(new Error(`${name}: not a regular file`), { code: 'EFTYPE' })
}
