/**
 * Session working folders. Each tenant has its own root under
 * WORKSPACE_ROOT; a client may name a sub-folder of it, never a path outside,
 * checked after resolving `..` and symlinks.
 */
import { existsSync, mkdirSync, realpathSync } from 'node:fs'
import { dirname, isAbsolute, join, resolve, sep } from 'node:path'
import { GatewayError } from '../errors.js'

export function tenantRoot (workspaceRoot: string, tenant: string): string {
  return join(workspaceRoot, tenant)
}

/**
 * Creates (if needed) and returns the real path of a session's folder:
 * `<root>/<tenant>/<cwd>` when the client named one, else `<root>/<tenant>/<sessionId>`.
 */
export function sessionWorkspace (workspaceRoot: string, tenant: string, sessionId: string, cwd?: string): string {
  const root = tenantRoot(workspaceRoot, tenant)
  mkdirSync(root, { recursive: true })
  const realRoot = realpathSync(root)
  const wanted = cwd ?? sessionId
  if (isAbsolute(wanted)) throw new GatewayError('bad_request', 'cwd must be relative to the workspace root')
  const target = resolve(realRoot, wanted)
  if (!inside(realRoot, target)) throw new GatewayError('bad_request', 'cwd is outside the workspace root')
  // A symlink inside the root may point anywhere: check where the existing part
  // really leads before creating anything, and the whole path after.
  if (!inside(realRoot, realpathSync(existingAncestor(target)))) throw new GatewayError('bad_request', 'cwd is outside the workspace root')
  mkdirSync(target, { recursive: true })
  const real = realpathSync(target)
  if (!inside(realRoot, real)) throw new GatewayError('bad_request', 'cwd is outside the workspace root')
  return real
}

function inside (root: string, path: string): boolean {
  return path === root || path.startsWith(root + sep)
}

function existingAncestor (path: string): string {
  let at = path
  while (!existsSync(at)) at = dirname(at)
  return at
}

/**
 * SANDBOX=bwrap: the tenant's root (created and resolved here: every part of
 * it is the operator's or the gateway's) and the session's folder as a plain
 * path under it, checked lexically only. Nothing is created or resolved
 * through the tenant-chosen part on the host: the sandbox creates and enters
 * it inside, where a symlink can only lead to what the tenant sees anyway.
 */
export function sandboxWorkdir (workspaceRoot: string, tenant: string, sessionId: string, cwd?: string): { tenantRoot: string, workdir: string } {
  const wanted = cwd ?? sessionId
  if (wanted.includes('\0')) throw new GatewayError('bad_request', 'cwd must not contain NUL')
  if (isAbsolute(wanted)) throw new GatewayError('bad_request', 'cwd must be relative to the workspace root')
  const root = tenantRoot(workspaceRoot, tenant)
  mkdirSync(root, { recursive: true })
  const realRoot = realpathSync(root)
  const workdir = resolve(realRoot, wanted)
  if (!inside(realRoot, workdir)) throw new GatewayError('bad_request', 'cwd is outside the workspace root')
  return { tenantRoot: realRoot, workdir }
}
