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
 */
import { closeSync, existsSync, fstatSync, mkdirSync, openSync, readFileSync, readSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

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
    fd = openSync(conversationPath(configDir, mark.project, sessionId), 'r')
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
    dirs = readdirSync(projects)
  } catch {
    return null
  }
  for (const project of dirs) {
    const file = conversationPath(configDir, project, sessionId)
    if (!existsSync(file)) continue
    return Buffer.concat([Buffer.from(`${project}\n`), wholeLines(readFileSync(file))])
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
  if (local !== null && local.length >= stored.length) return false
  const dir = join(configDir, 'projects', project)
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  writeFileSync(join(dir, `${sessionId}.jsonl`), stored.subarray(newline + 1), { mode: 0o600 })
  return true
}
