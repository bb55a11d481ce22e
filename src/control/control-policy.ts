/**
 * What clients may ask of the CLI. Every client control request, every answer
 * to a CLI control request and the session options that grant permissions pass
 * through here before anything reaches the CLI's stdin, because each of them
 * can hand the agent more than a permission prompt would: `mcp_set_servers`
 * with a stdio server runs a command with no prompt, `apply_flag_settings`
 * rewrites the CLI's settings, an allow rule for all of `Bash` is bypass for
 * that tool. Pure: no I/O; the caller gives the session's scope.
 */
import {
  type GrantRules,
  type PolicyScope,
  type Refusal,
  checkAllowRules,
  checkDirectories,
  checkMode,
  checkPermissionUpdates,
  isBroadRule,
  parseRuleString
} from './permission-updates.js'
import { isRecord } from '../protocol/is-record.js'

export type { PolicyScope, Refusal } from './permission-updates.js'

export interface ControlPolicyOptions {
  /** Client control_request subtypes forwarded to the CLI; `*` forwards every subtype. */
  clientControlAllow: readonly string[]
  /** `mcp_set_servers` server types a client may add (`stdio` = a command the CLI runs). */
  mcpServerTypes: readonly string[]
  /** `updatedPermissions` destinations a client may write to. */
  permissionUpdateDestinations: readonly string[]
  /** Tools for which an allow rule with no specifier is refused while bypass is off. */
  broadRuleTools: readonly string[]
  allowBypassPermissions: boolean
}

/** Session option fields that grant permissions (POST /v1/sessions, and records read back from the store). */
export interface GrantingOptions {
  permission_mode?: string | undefined
  allowed_tools?: readonly string[] | undefined
}

/** Top-level request fields that name a permission mode. */
const MODE_FIELDS = ['mode', 'permission_mode', 'permissionMode', 'defaultMode'] as const
/** Subtypes that carry CLI settings (`settings.permissions`). */
const SETTINGS_SUBTYPES = new Set(['apply_flag_settings', 'update_settings'])
/** Settings whose value is a command the CLI runs on the gateway host (hooks, helpers, status lines): never from a client. */
const COMMAND_SETTINGS = ['hooks', 'apiKeyHelper', 'awsAuthRefresh', 'awsCredentialExport', 'gcpAuthRefresh', 'otelHeadersHelper', 'statusLine', 'subagentStatusLine', 'fileSuggestion'] as const
/**
 * Slash commands the CLI (2.1.332) runs itself, even in stream-json mode, that
 * write its user settings: `/config permissionMode=auto` (alias `/settings`)
 * sets `permissions.defaultMode` in the tenant's settings.json, and every later
 * session of the tenant starts in that mode and runs Bash with no prompt.
 */
const USER_SETTINGS_COMMANDS = new Set(['config', 'settings'])

export class ControlPolicy {
  readonly #allowAll: boolean
  readonly #allow: ReadonlySet<string>
  readonly #mcpTypes: ReadonlySet<string>
  readonly #grant: GrantRules

  constructor (options: ControlPolicyOptions) {
    this.#allowAll = options.clientControlAllow.includes('*')
    this.#allow = new Set(options.clientControlAllow)
    this.#mcpTypes = new Set(options.mcpServerTypes)
    this.#grant = {
      allowBypassPermissions: options.allowBypassPermissions,
      broadRuleTools: new Set(options.broadRuleTools.map((t) => t.trim().toLowerCase()).filter((t) => t !== '')),
      destinations: new Set(options.permissionUpdateDestinations)
    }
  }

  /**
   * A client frame of a type the gateway does not know, forwarded as sent
   * (the CLI ignores unknown types today). Its mode fields, top-level and in a
   * `request` object, still get the bypass gate: a future CLI may act on a new
   * type, and a near-miss of `control_request` must not carry bypass through.
   */
  checkOtherFrame (frame: Record<string, unknown> & { type: string }): Refusal | null {
    const request = isRecord(frame.request) ? frame.request : {}
    for (const [where, holder] of [['', frame], ['request.', request]] as const) {
      for (const field of MODE_FIELDS) {
        const refusal = checkMode(holder[field], `${frame.type} ${where}${field}`, this.#grant)
        if (refusal !== null) return refusal
      }
    }
    return null
  }

  /**
   * A user message, before it is written to the CLI: the CLI runs a text (or
   * any text block) that starts with a slash command itself. Commands that
   * write the user settings are a permission update to `userSettings`, held to
   * PERMISSION_UPDATE_DESTINATIONS. Matched loosely (leading space, any case):
   * a near miss the CLI does not run loses nothing the model would need.
   */
  checkUserMessage (content: unknown): Refusal | null {
    if (this.#grant.destinations.has('userSettings')) return null
    const texts = typeof content === 'string' ? [content] : Array.isArray(content) ? content.map((b) => isRecord(b) ? b.text : undefined) : []
    for (const text of texts) {
      const name = typeof text === 'string' ? /^\s*\/([^\s/]+)/.exec(text)?.[1]?.toLowerCase() : undefined
      if (name === undefined || !USER_SETTINGS_COMMANDS.has(name)) continue
      return {
        code: 'permission_update_not_allowed',
        message: `The slash command /${name} writes the CLI's user settings (its permission mode among them) for every session of the tenant; clients may not write userSettings (PERMISSION_UPDATE_DESTINATIONS)`
      }
    }
    return null
  }

  /** A client's `control_request.request`, before it is written to the CLI. */
  checkClientRequest (request: Record<string, unknown>, scope: PolicyScope): Refusal | null {
    const subtype = String(request.subtype)
    // initialize is the protocol's handshake, always forwarded; its granting fields are vetted below.
    if (subtype !== 'initialize' && !this.#allowAll && !this.#allow.has(subtype)) {
      return { code: 'control_not_allowed', message: `The gateway does not forward ${JSON.stringify(subtype)} control requests (CLIENT_CONTROL_ALLOW)` }
    }
    for (const field of MODE_FIELDS) {
      const refusal = checkMode(request[field], `${subtype} ${field}`, this.#grant)
      if (refusal !== null) return refusal
    }
    if (subtype === 'mcp_set_servers') return this.#checkServers(request.servers, subtype)
    if (SETTINGS_SUBTYPES.has(subtype)) return this.#checkSettings(request.settings, subtype, scope)
    if (subtype === 'initialize') return this.#checkInitialize(request, scope)
    return null
  }

  /**
   * The holder's initialize. Text (systemPrompt, jsonSchema, …), SDK MCP server
   * names and callback hooks (answered by the client) pass; what would run
   * something on the gateway host or grant more is held to the rules of the
   * request that does the same: process MCP servers (top level and per agent)
   * to CLIENT_MCP_SERVER_TYPES, agent permission modes to the bypass gate,
   * settings to the settings subtypes' checks (and only when those subtypes
   * are allowed); command hooks and plugins (code loaded from a path) never.
   */
  #checkInitialize (request: Record<string, unknown>, scope: PolicyScope): Refusal | null {
    const refuse = (message: string): Refusal => ({ code: 'control_not_allowed', message: `initialize ${message}` })
    if (request.mcpServers !== undefined && request.mcpServers !== null) {
      const servers = this.#checkServers(request.mcpServers, 'initialize mcpServers')
      if (servers !== null) return servers
    }
    if (Array.isArray(request.plugins) && request.plugins.length > 0) return refuse('plugins: the gateway does not load plugins from a client (they run code on its host)')
    for (const field of ['settings', 'managedSettings'] as const) {
      const settings = request[field]
      if (settings === undefined || settings === null) continue
      if (!this.#allowAll && !this.#allow.has('apply_flag_settings')) return refuse(`${field}: settings from a client need apply_flag_settings in CLIENT_CONTROL_ALLOW`)
      if (isRecord(settings) && settings.hooks !== undefined) return refuse(`${field}.hooks: command hooks run on the gateway host; use callback hooks`)
      const refusal = this.#checkSettings(settings, `initialize ${field}`, scope)
      if (refusal !== null) return refusal
    }
    if (isRecord(request.hooks)) {
      for (const [event, matchers] of Object.entries(request.hooks)) {
        if (!Array.isArray(matchers)) continue
        // The SDK's shape is {matcher, hookCallbackIds, timeout}; a `hooks` list is the settings shape (command hooks).
        if (matchers.some((m) => isRecord(m) && 'hooks' in m)) return refuse(`hooks.${event}: command hooks run on the gateway host; only callback hooks (hookCallbackIds) are forwarded`)
      }
    }
    if (isRecord(request.agents)) {
      for (const [name, agent] of Object.entries(request.agents)) {
        if (!isRecord(agent)) continue
        const mode = checkMode(agent.permissionMode, `initialize agents.${name}.permissionMode`, this.#grant)
        if (mode !== null) return mode
        if (!Array.isArray(agent.mcpServers)) continue
        for (const spec of agent.mcpServers) {
          const servers = isRecord(spec) ? this.#checkServers(spec, `initialize agents.${name}.mcpServers`) : null
          if (servers !== null) return servers
        }
      }
    }
    return null
  }

  /**
   * The holder's (or an HTTP caller's) answer to a pending CLI request. A
   * refusal leaves the request pending. `can_use_tool` answers are checked on
   * `updatedPermissions`; answers to other requests (hook callbacks, …) on any
   * `updatedPermissions` list they carry. MCP replies are data and pass.
   */
  checkAnswer (pendingSubtype: string, response: unknown, scope: PolicyScope): Refusal | null {
    if (!isRecord(response)) return null
    if (pendingSubtype === 'can_use_tool') {
      return response.updatedPermissions === undefined ? null : checkPermissionUpdates(response.updatedPermissions, scope, this.#grant)
    }
    if (pendingSubtype === 'mcp_message') return null
    for (const updates of findUpdatedPermissions(response)) {
      const refusal = checkPermissionUpdates(updates, scope, this.#grant)
      if (refusal !== null) return refusal
    }
    return null
  }

  /** Session options: `permission_mode` bypass (403) and whole-shell-tool `allowed_tools` (400). */
  checkSessionOptions (options: GrantingOptions): Refusal | null {
    const mode = checkMode(options.permission_mode, 'permission_mode', this.#grant)
    if (mode !== null) return mode
    if (this.#grant.allowBypassPermissions) return null
    for (const rule of options.allowed_tools ?? []) {
      const { toolName, ruleContent } = parseRuleString(rule)
      if (isBroadRule(toolName, ruleContent, this.#grant.broadRuleTools)) {
        return {
          code: 'broad_rule_not_allowed',
          message: `allowed_tools ${JSON.stringify(rule)} lets every command of that tool run without a prompt, which is bypassPermissions for it (ALLOW_BYPASS_PERMISSIONS, PERMISSION_BROAD_RULE_TOOLS); name the command, e.g. "Bash(git log:*)"`
        }
      }
    }
    return null
  }

  #checkServers (servers: unknown, where: string): Refusal | null {
    if (!isRecord(servers)) return { code: 'control_not_allowed', message: `${where} needs a servers object` }
    for (const [name, config] of Object.entries(servers)) {
      // A config with a command is one the CLI runs, whatever its type says; no type means stdio.
      const type = !isRecord(config) ? 'invalid' : 'command' in config || config.type === undefined ? 'stdio' : String(config.type)
      if (!this.#mcpTypes.has(type)) {
        return {
          code: 'control_not_allowed',
          message: `${where}: server ${JSON.stringify(name)} is of type ${type}; clients may add ${[...this.#mcpTypes].join(', ') || 'none'} (CLIENT_MCP_SERVER_TYPES)`
        }
      }
    }
    return null
  }

  /** Only reached when the operator lets settings subtypes through: the bypass gate, grants and the environment gate still hold, commands never pass. */
  #checkSettings (settings: unknown, subtype: string, scope: PolicyScope): Refusal | null {
    if (isRecord(settings)) {
      const command = COMMAND_SETTINGS.find((key) => settings[key] !== undefined)
      if (command !== undefined) return { code: 'control_not_allowed', message: `${subtype} ${command}: settings that run a command on the gateway host are not taken from a client` }
      // Settings `env` sets the CLI's environment, as update_environment_variables does: the same gate.
      if (settings.env !== undefined && !this.#allowAll && !this.#allow.has('update_environment_variables')) {
        return { code: 'control_not_allowed', message: `${subtype} env: setting the CLI's environment needs update_environment_variables in CLIENT_CONTROL_ALLOW` }
      }
    }
    const permissions = isRecord(settings) && isRecord(settings.permissions) ? settings.permissions : null
    if (permissions === null) return null
    const mode = checkMode(permissions.defaultMode, `${subtype} permissions.defaultMode`, this.#grant)
    if (mode !== null) return mode
    if (permissions.allow !== undefined) {
      const rules = checkAllowRules(permissions.allow, `${subtype} permissions.allow`, this.#grant)
      if (rules !== null) return rules
    }
    if (permissions.additionalDirectories !== undefined) {
      return checkDirectories(permissions.additionalDirectories, `${subtype} permissions.additionalDirectories`, scope)
    }
    return null
  }
}

/** Every `updatedPermissions` list inside an answer (hook outputs nest it), without recursion. */
function findUpdatedPermissions (value: Record<string, unknown>): unknown[] {
  const found: unknown[] = []
  const stack: unknown[] = [value]
  for (let v = stack.pop(); v !== undefined; v = stack.pop()) {
    if (typeof v !== 'object' || v === null) continue
    for (const [key, child] of Object.entries(v)) {
      if (key === 'updatedPermissions') found.push(child)
      else stack.push(child)
    }
  }
  return found
}
