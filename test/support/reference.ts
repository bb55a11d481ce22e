/**
 * Where the reference transcripts of the real CLI are. They are not part of
 * the repository: CLAUDE_REFERENCE_ROOT names the folder holding
 * `claude-code-<version>/`, else `../shared/reference` beside the repository
 * (as CI lays it out). Tests that compare against them skip without them,
 * saying which file is missing and how to provide it.
 */
import { existsSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const REPO_ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)))

export const REFERENCE_ROOT = process.env.CLAUDE_REFERENCE_ROOT ?? resolve(REPO_ROOT, '..', 'shared', 'reference')

/** The reference folder of one CLI version, e.g. `claude-code-2.1.332`. */
export const referenceDir = (version: string): string => join(REFERENCE_ROOT, version)

/** False when `path` exists, else the skip message: what is missing and how to provide it. */
export function referenceMissing (path: string): string | false {
  if (existsSync(path)) return false
  const how = process.env.CLAUDE_REFERENCE_ROOT === undefined
    ? `check out the shared reference set beside the repository (${resolve(REPO_ROOT, '..', 'shared', 'reference')}) or set CLAUDE_REFERENCE_ROOT to the folder holding claude-code-<version>/`
    : 'CLAUDE_REFERENCE_ROOT must name the folder holding claude-code-<version>/'
  return `reference transcripts not found: ${path} is missing; ${how}`
}
