/**
 * The CLI's own copy of a conversation, which `--resume` needs: one file,
 * `<config dir>/projects/<project>/<session id>.jsonl` (<project> is the
 * CLI's name for the working folder). Nodes whose config dirs are on local
 * disk carry it through the store: the owner saves it after each turn and
 * when its CLI ends, and a node that takes the session over writes it back
 * before it starts the CLI with `--resume`. Copying this one file is enough
 * for the CLI to continue (seen with 2.1.332).
 *
 * The stored form is `<project>\n<file bytes>`.
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

/** The conversation file of `sessionId` under `configDir`, as the stored form; null when the CLI wrote none. */
export function readConversation (configDir: string, sessionId: string): Buffer | null {
  const projects = join(configDir, 'projects')
  let dirs: string[]
  try {
    dirs = readdirSync(projects)
  } catch {
    return null
  }
  for (const project of dirs) {
    const file = join(projects, project, `${sessionId}.jsonl`)
    if (!existsSync(file)) continue
    return Buffer.concat([Buffer.from(`${project}\n`), readFileSync(file)])
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
