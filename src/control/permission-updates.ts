/**
 * Structural checks of what a client may grant the CLI: permission rules,
 * `updatedPermissions` entries, directories and modes. They look only at the
 * fields that carry a grant (`toolName`/`ruleContent`, `destination`,
 * `directories`, `mode`), never at free text such as a tool's input, so a
 * command that merely mentions a mode's name is not mistaken for one.
 */
import { isAbsolute, resolve, sep } from 'node:path'
import type { ErrorCode } from '../errors.js'
import { isRecord } from '../protocol/is-record.js'

/** Why something was refused; the code comes from src/errors.ts. */
export interface Refusal {
  code: ErrorCode
  message: string
}

/** Where relative directories are resolved and what they must stay inside. */
export interface PolicyScope {
  /** The tenant's workspace root, as configured and as its real path (a symlinked WORKSPACE_ROOT has both). */
  roots: readonly string[]
  /** The session's working folder (relative directories are resolved against it, as the CLI does). */
  cwd: string
}

export interface GrantRules {
  allowBypassPermissions: boolean
  /** Lower-cased names of tools for which a rule with no specifier is bypass (default `bash`). */
  broadRuleTools: ReadonlySet<string>
  /** `updatedPermissions` destinations a client may write to. */
  destinations: ReadonlySet<string>
}

export const BYPASS_MODE = 'bypassPermissions'

/** A rule's specifier made only of wildcards, colons and blanks (`*`, `:*`, ``) matches every command. */
const UNSPECIFIC = /^[\s*:]*$/

/** `Bash`, `Bash(git log:*)` → name and content (undefined when there are no parentheses). */
export function parseRuleString (rule: string): { toolName: string, ruleContent: string | undefined } {
  const open = rule.indexOf('(')
  if (open < 0 || !rule.endsWith(')')) return { toolName: rule, ruleContent: undefined }
  return { toolName: rule.slice(0, open), ruleContent: rule.slice(open + 1, -1) }
}

/**
 * True when an allow rule would let every use of a listed tool through without
 * a prompt: `Bash`, `Bash(*)`, `Bash(:*)`, `Bash()`, or a wildcard tool name.
 */
export function isBroadRule (toolName: unknown, ruleContent: unknown, broadTools: ReadonlySet<string>): boolean {
  if (typeof toolName !== 'string') return true // not a rule the CLI can read the same way we do
  let name = toolName
  let content = ruleContent
  // The CLI writes a rule whose content is falsy as its bare name (`{toolName: "Bash(*)", ruleContent: ""}` → `Bash(*)`).
  if (name.includes('(') && (content === undefined || content === null || content === '')) {
    const parsed = parseRuleString(name)
    name = parsed.toolName
    content = parsed.ruleContent
  }
  const key = name.trim().toLowerCase()
  if (!broadTools.has(key) && !(key.includes('*') && [...broadTools].some((tool) => globMatches(key, tool)))) return false
  return content === undefined || content === null || (typeof content === 'string' && UNSPECIFIC.test(content))
}

/** A tool-name pattern such as `*` or `Ba*` read as a glob, in case the CLI ever matches names that way. */
function globMatches (pattern: string, name: string): boolean {
  const source = pattern.split('*').map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')
  return new RegExp(`^${source}$`).test(name)
}

/** Lexically resolved (no symlinks followed) and inside one of the scope's roots. */
export function directoryInside (dir: unknown, scope: PolicyScope): boolean {
  if (typeof dir !== 'string' || dir === '' || dir.includes('\0') || dir.startsWith('~')) return false
  const abs = isAbsolute(dir) ? resolve(dir) : resolve(scope.cwd, dir)
  return scope.roots.some((root) => abs === root || abs.startsWith(root.endsWith(sep) ? root : root + sep))
}

export function checkMode (mode: unknown, field: string, rules: GrantRules): Refusal | null {
  if (mode !== BYPASS_MODE || rules.allowBypassPermissions) return null
  return { code: 'bypass_not_allowed', message: `${field} bypassPermissions is disabled by the operator (ALLOW_BYPASS_PERMISSIONS)` }
}

/** Checks the rules of one allow grant (`addRules`/`replaceRules`, settings `permissions.allow`). */
export function checkAllowRules (rules: unknown, where: string, grant: GrantRules): Refusal | null {
  if (grant.allowBypassPermissions) return null
  if (!Array.isArray(rules)) return refuse(`${where}: rules must be a list`)
  for (const rule of rules) {
    const parts = typeof rule === 'string' ? parseRuleString(rule) : isRecord(rule) ? rule : null
    const broad = parts === null || isBroadRule(parts.toolName, parts.ruleContent, grant.broadRuleTools)
    if (broad) {
      return refuse(`${where}: a rule allowing ${describeRule(rule)} with no specifier lets every command through without a prompt (PERMISSION_BROAD_RULE_TOOLS); name the command instead`)
    }
  }
  return null
}

/**
 * Checks a permission answer's `updatedPermissions`: known types only, allowed
 * destinations, no whole-shell-tool allow rule and no bypass mode unless the
 * operator allows bypass, directories inside the tenant's workspace.
 */
export function checkPermissionUpdates (updates: unknown, scope: PolicyScope, grant: GrantRules): Refusal | null {
  if (!Array.isArray(updates)) return refuse('updatedPermissions must be a list')
  for (const [i, update] of updates.entries()) {
    const where = `updatedPermissions[${i}]`
    if (!isRecord(update)) return refuse(`${where} is not an object`)
    const destination = update.destination
    if (typeof destination !== 'string' || !grant.destinations.has(destination)) {
      return refuse(`${where}: destination ${JSON.stringify(destination)} is not allowed (PERMISSION_UPDATE_DESTINATIONS: ${[...grant.destinations].join(', ')})`)
    }
    let refusal: Refusal | null = null
    switch (update.type) {
      case 'addRules':
      case 'replaceRules':
        // Only allow rules widen what runs without a prompt; ask and deny rules narrow it.
        if (update.behavior !== 'deny' && update.behavior !== 'ask') refusal = checkAllowRules(update.rules, where, grant)
        break
      case 'removeRules':
      case 'removeDirectories':
        break
      case 'setMode':
        refusal = checkMode(update.mode, `${where} setMode`, grant)
        break
      case 'addDirectories':
        refusal = checkDirectories(update.directories, `${where} addDirectories`, scope)
        break
      default:
        refusal = refuse(`${where}: unknown type ${JSON.stringify(update.type)}`)
    }
    if (refusal !== null) return refusal
  }
  return null
}

export function checkDirectories (dirs: unknown, where: string, scope: PolicyScope): Refusal | null {
  if (!Array.isArray(dirs)) return refuse(`${where}: directories must be a list`)
  for (const dir of dirs) {
    if (!directoryInside(dir, scope)) return refuse(`${where}: ${JSON.stringify(dir)} is outside the tenant's workspace`)
  }
  return null
}

function refuse (message: string): Refusal {
  return { code: 'permission_update_not_allowed', message }
}

function describeRule (rule: unknown): string {
  if (typeof rule === 'string') return JSON.stringify(rule)
  if (isRecord(rule) && typeof rule.toolName === 'string') return JSON.stringify(rule.toolName)
  return 'a tool'
}

