// ControlPolicy (src/control/control-policy.ts), in-process: which client control
// requests pass, what a permission answer may grant, and which session options
// grant too much. No gateway, no CLI: the policy is pure.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { loadConfig } from '../../src/config.js'
import { ControlPolicy, type ControlPolicyOptions, type PolicyScope } from '../../src/control/control-policy.js'
import { controlErrorFrame } from '../../src/control/control-error.js'
import { errorTable } from '../../src/errors.js'

/** The policy exactly as the gateway builds it from the default configuration, plus overrides. */
function policy (env: Record<string, string> = {}): ControlPolicy {
  const c = loadConfig({ GATEWAY_TOKENS: 'token-tenant-a-0123456789=tenant-a', ...env })
  const options: ControlPolicyOptions = {
    clientControlAllow: c.clientControlAllow,
    mcpServerTypes: c.clientMcpServerTypes,
    permissionUpdateDestinations: c.permissionUpdateDestinations,
    broadRuleTools: c.permissionBroadRuleTools,
    allowBypassPermissions: c.allowBypassPermissions
  }
  return new ControlPolicy(options)
}

const scope: PolicyScope = { roots: ['/data/workspaces/tenant-a', '/srv/real/tenant-a'], cwd: '/data/workspaces/tenant-a/project' }
const ask = (p: ControlPolicy, request: Record<string, unknown>): string | null => p.checkClientRequest(request, scope)?.code ?? null
const grant = (p: ControlPolicy, updatedPermissions: unknown[], subtype = 'can_use_tool'): string | null =>
  p.checkAnswer(subtype, { behavior: 'allow', updatedInput: {}, updatedPermissions }, scope)?.code ?? null

describe('client control requests', () => {
  const p = policy()

  it("lets the Agent SDK's ordinary calls through by default", () => {
    for (const request of [
      { subtype: 'interrupt' },
      { subtype: 'set_model', model: 'claude-opus-4-1' },
      { subtype: 'set_permission_mode', mode: 'acceptEdits' },
      { subtype: 'set_max_thinking_tokens', max_thinking_tokens: 1024 },
      { subtype: 'mcp_status' },
      { subtype: 'mcp_reconnect', serverName: 'docs' },
      { subtype: 'mcp_toggle', serverName: 'docs', enabled: false },
      { subtype: 'get_context_usage' },
      { subtype: 'rewind_files', user_message_id: 'u1', dry_run: true },
      { subtype: 'stop_task', task_id: 't1' },
      { subtype: 'mcp_set_servers', servers: { mine: { type: 'sdk', name: 'mine' } } },
      { subtype: 'mcp_set_servers', servers: {} }
    ]) assert.equal(ask(p, request), null, JSON.stringify(request))
  })

  it('refuses by default what runs commands, reads files or rewrites settings, and every unlisted subtype', () => {
    for (const subtype of ['apply_flag_settings', 'update_settings', 'read_file', 'seed_read_state', 'register_repo_root', 'set_cwd', 'reload_plugins', 'get_settings', 'claude_authenticate', 'mcp_message', 'can_use_tool', 'no_such_subtype']) {
      assert.equal(ask(p, { subtype, settings: {}, path: '/etc/passwd' }), 'control_not_allowed', subtype)
    }
  })

  it('refuses mcp_set_servers naming a server the CLI would run (a command, type stdio, or no type) or a remote one by default', () => {
    const cases = [
      { evil: { command: 'sh', args: ['-c', 'touch /tmp/pwned'] } },
      { evil: { type: 'stdio', command: 'sh' } },
      { evil: { type: 'sdk', name: 'evil', command: 'sh' } },
      { evil: { type: 'http', url: 'http://169.254.169.254/' } },
      { evil: { type: 'sse', url: 'http://127.0.0.1:6379/' } },
      { ok: { type: 'sdk', name: 'ok' }, evil: { args: [] } },
      { evil: 'sh -c id' }
    ]
    for (const servers of cases) {
      const refusal = p.checkClientRequest({ subtype: 'mcp_set_servers', servers }, scope)
      assert.equal(refusal?.code, 'control_not_allowed', JSON.stringify(servers))
      assert.match(refusal?.message ?? '', /"evil"/)
    }
    assert.equal(ask(p, { subtype: 'mcp_set_servers' }), 'control_not_allowed')
  })

  it('CLIENT_CONTROL_ALLOW replaces the list; * lets every subtype through but the checks on content stay', () => {
    const narrow = policy({ CLIENT_CONTROL_ALLOW: 'interrupt, apply_flag_settings' })
    assert.equal(ask(narrow, { subtype: 'interrupt' }), null)
    assert.equal(ask(narrow, { subtype: 'apply_flag_settings', settings: { model: 'x' } }), null)
    assert.equal(ask(narrow, { subtype: 'set_model', model: 'x' }), 'control_not_allowed')
    const all = policy({ CLIENT_CONTROL_ALLOW: '*' })
    assert.equal(ask(all, { subtype: 'no_such_subtype' }), null)
    assert.equal(ask(all, { subtype: 'mcp_set_servers', servers: { s: { command: 'sh' } } }), 'control_not_allowed')
    assert.equal(ask(all, { subtype: 'set_permission_mode', mode: 'bypassPermissions' }), 'bypass_not_allowed')
    // Settings subtypes, once allowed, still pass the bypass gate and the grant rules.
    assert.equal(ask(all, { subtype: 'apply_flag_settings', settings: { permissions: { defaultMode: 'bypassPermissions' } } }), 'bypass_not_allowed')
    assert.equal(ask(all, { subtype: 'apply_flag_settings', settings: { permissions: { allow: ['Bash(*)'] } } }), 'permission_update_not_allowed')
    assert.equal(ask(all, { subtype: 'update_settings', source: 'localSettings', settings: { permissions: { additionalDirectories: ['/'] } } }), 'permission_update_not_allowed')
    assert.equal(ask(all, { subtype: 'apply_flag_settings', settings: { permissions: { allow: ['Bash(git log:*)'], defaultMode: 'acceptEdits' } } }), null)
  })

  it('CLIENT_MCP_SERVER_TYPES opens remote servers (and stdio only when listed)', () => {
    const remote = policy({ CLIENT_MCP_SERVER_TYPES: 'sdk,http,sse' })
    assert.equal(ask(remote, { subtype: 'mcp_set_servers', servers: { a: { type: 'http', url: 'https://mcp.example.com' }, b: { type: 'sse', url: 'https://x' } } }), null)
    assert.equal(ask(remote, { subtype: 'mcp_set_servers', servers: { a: { command: 'sh' } } }), 'control_not_allowed')
    assert.equal(ask(policy({ CLIENT_MCP_SERVER_TYPES: 'stdio' }), { subtype: 'mcp_set_servers', servers: { a: { command: 'sh' } } }), null)
  })

  it('looks at mode fields only: bypassPermissions in free text passes', () => {
    assert.equal(ask(p, { subtype: 'set_permission_mode', mode: 'bypassPermissions' }), 'bypass_not_allowed')
    assert.equal(ask(p, { subtype: 'set_model', model: 'bypassPermissions-lookalike' }), null)
    assert.equal(ask(p, { subtype: 'rename_session', title: 'notes on bypassPermissions' }), null)
    assert.equal(ask(policy({ ALLOW_BYPASS_PERMISSIONS: 'true' }), { subtype: 'set_permission_mode', mode: 'bypassPermissions' }), null)
  })

  it('gives frames of unknown types (forwarded as sent) the bypass gate on their mode fields, top-level and in request', () => {
    const near = { type: 'contol_request', request_id: 'x', request: { subtype: 'set_permission_mode', mode: 'bypassPermissions' } }
    assert.equal(p.checkOtherFrame(near)?.code, 'bypass_not_allowed')
    assert.equal(p.checkOtherFrame({ type: 'future_frame', permission_mode: 'bypassPermissions' })?.code, 'bypass_not_allowed')
    assert.equal(p.checkOtherFrame({ type: 'future_frame', note: 'bypassPermissions in text', request: { mode: 'plan' } }), null)
    assert.equal(policy({ ALLOW_BYPASS_PERMISSIONS: 'true' }).checkOtherFrame(near), null)
  })
})

describe('permission answers (updatedPermissions)', () => {
  const p = policy()

  it("passes exactly what the CLI suggests (2.1.332: addRules with the command to localSettings, its cwd to session, acceptEdits)", () => {
    const suggested = [
      { type: 'addRules', rules: [{ toolName: 'Bash', ruleContent: 'touch created-by-tool.txt && echo hello-from-tool' }], behavior: 'allow', destination: 'localSettings' },
      { type: 'addDirectories', directories: ['/data/workspaces/tenant-a/project'], destination: 'session' },
      { type: 'setMode', mode: 'acceptEdits', destination: 'session' }
    ]
    assert.equal(grant(p, suggested), null)
    assert.equal(grant(p, [{ type: 'addRules', rules: [{ toolName: 'Bash', ruleContent: 'git log:*' }, { toolName: 'Read' }], behavior: 'allow', destination: 'projectSettings' }]), null)
  })

  it('refuses an allow rule for the whole shell tool, in any spelling, while bypass is off', () => {
    for (const rule of [{ toolName: 'Bash' }, { toolName: 'Bash', ruleContent: '*' }, { toolName: 'Bash', ruleContent: ':*' }, { toolName: 'Bash', ruleContent: '' },
      { toolName: 'Bash', ruleContent: ' * ' }, { toolName: 'bash' }, { toolName: 'Bash(*)' }, { toolName: '*' }, { toolName: 'Ba*' }, { toolName: 42 }]) {
      for (const type of ['addRules', 'replaceRules']) {
        assert.equal(grant(p, [{ type, rules: [rule], behavior: 'allow', destination: 'session' }]), 'permission_update_not_allowed', `${type} ${JSON.stringify(rule)}`)
      }
    }
    assert.equal(grant(p, [{ type: 'addRules', rules: [{ toolName: 'Read*' }, { toolName: 'Bash', ruleContent: 'npm test *' }], behavior: 'allow', destination: 'session' }]), null)
    // Deny and ask rules narrow, so the whole tool is fine there; so is removing rules.
    assert.equal(grant(p, [{ type: 'addRules', rules: [{ toolName: 'Bash' }], behavior: 'deny', destination: 'session' }]), null)
    assert.equal(grant(p, [{ type: 'removeRules', rules: [{ toolName: 'Bash' }], behavior: 'allow', destination: 'session' }]), null)
    // With bypass allowed the rule is no more than the operator already permits.
    assert.equal(grant(policy({ ALLOW_BYPASS_PERMISSIONS: 'true' }), [{ type: 'addRules', rules: [{ toolName: 'Bash' }], behavior: 'allow', destination: 'session' }]), null)
    // PERMISSION_BROAD_RULE_TOOLS names the tools.
    const more = policy({ PERMISSION_BROAD_RULE_TOOLS: 'Bash,PowerShell' })
    assert.equal(grant(more, [{ type: 'addRules', rules: [{ toolName: 'PowerShell' }], behavior: 'allow', destination: 'session' }]), 'permission_update_not_allowed')
    assert.equal(grant(p, [{ type: 'addRules', rules: [{ toolName: 'PowerShell' }], behavior: 'allow', destination: 'session' }]), null)
  })

  it('refuses directories outside the tenant workspace, resolved lexically (.., relative, ~)', () => {
    for (const dir of ['/', '/etc', '/data/workspaces', '/data/workspaces/tenant-b', '/data/workspaces/tenant-a-evil', '/data/workspaces/tenant-a/../tenant-b',
      '../..', '../../tenant-b', '~', '~/x', '', 42]) {
      assert.equal(grant(p, [{ type: 'addDirectories', directories: [dir], destination: 'session' }]), 'permission_update_not_allowed', JSON.stringify(dir))
    }
    for (const dir of ['/data/workspaces/tenant-a', '/data/workspaces/tenant-a/other', '/srv/real/tenant-a/x', 'sub', '.', '..', '../sibling/./x']) {
      assert.equal(grant(p, [{ type: 'addDirectories', directories: [dir], destination: 'session' }]), null, JSON.stringify(dir))
    }
  })

  it('refuses destinations outside PERMISSION_UPDATE_DESTINATIONS and unknown update types', () => {
    for (const destination of ['userSettings', 'cliArg', 'policySettings', undefined]) {
      assert.equal(grant(p, [{ type: 'setMode', mode: 'acceptEdits', destination }]), 'permission_update_not_allowed', String(destination))
    }
    assert.equal(grant(policy({ PERMISSION_UPDATE_DESTINATIONS: 'session,userSettings' }), [{ type: 'setMode', mode: 'acceptEdits', destination: 'userSettings' }]), null)
    assert.equal(grant(p, [{ type: 'grantEverything', destination: 'session' }]), 'permission_update_not_allowed')
    assert.equal(grant(p, ['setMode']), 'permission_update_not_allowed')
    assert.equal(p.checkAnswer('can_use_tool', { behavior: 'allow', updatedPermissions: { type: 'setMode' } }, scope)?.code, 'permission_update_not_allowed')
  })

  it('setMode bypassPermissions is bypass_not_allowed; the word elsewhere (updatedInput, rule content, messages) is not', () => {
    assert.equal(grant(p, [{ type: 'setMode', mode: 'bypassPermissions', destination: 'session' }]), 'bypass_not_allowed')
    assert.equal(p.checkAnswer('can_use_tool', { behavior: 'allow', updatedInput: { command: 'touch notes-on-bypassPermissions.txt' } }, scope), null)
    assert.equal(grant(p, [{ type: 'addRules', rules: [{ toolName: 'Bash', ruleContent: 'touch notes-on-bypassPermissions.txt' }], behavior: 'allow', destination: 'localSettings' }]), null)
    assert.equal(p.checkAnswer('can_use_tool', { behavior: 'deny', message: 'no bypassPermissions for you' }, scope), null)
  })

  it('checks updatedPermissions nested in answers to other requests (hook outputs), but not MCP replies', () => {
    const hook = { hookSpecificOutput: { hookEventName: 'PermissionRequest', decision: { behavior: 'allow', updatedPermissions: [{ type: 'addDirectories', directories: ['/'], destination: 'session' }] } } }
    assert.equal(p.checkAnswer('hook_callback', hook, scope)?.code, 'permission_update_not_allowed')
    assert.equal(p.checkAnswer('mcp_message', { mcp_response: { result: { updatedPermissions: [{ type: 'x' }] } } }, scope), null)
    assert.equal(p.checkAnswer('hook_callback', { continue: true }, scope), null)
  })
})

describe('session options', () => {
  const p = policy()

  it('refuses allowed_tools that allow a whole shell tool (400) and permission_mode bypassPermissions (403)', () => {
    for (const rule of ['Bash', 'Bash(*)', 'Bash(:*)', 'Bash()', 'bash', '*', 'B*(*)']) {
      const refusal = p.checkSessionOptions({ allowed_tools: ['Read', rule] })
      assert.equal(refusal?.code, 'broad_rule_not_allowed', rule)
      assert.equal(errorTable.broad_rule_not_allowed.statusCode, 400)
    }
    assert.equal(p.checkSessionOptions({ allowed_tools: ['Read', 'Bash(git log:*)', 'mcp__docs'] }), null)
    assert.equal(p.checkSessionOptions({ permission_mode: 'bypassPermissions' })?.code, 'bypass_not_allowed')
    assert.equal(policy({ ALLOW_BYPASS_PERMISSIONS: 'true' }).checkSessionOptions({ permission_mode: 'bypassPermissions', allowed_tools: ['Bash'] }), null)
  })
})

describe('configuration and refusal frame', () => {
  it('refuses unknown destinations and server types at start, naming the variable', () => {
    assert.throws(() => policy({ PERMISSION_UPDATE_DESTINATIONS: 'session,everywhere' }), /PERMISSION_UPDATE_DESTINATIONS/)
    assert.throws(() => policy({ CLIENT_MCP_SERVER_TYPES: 'sdk,docker' }), /CLIENT_MCP_SERVER_TYPES/)
    assert.throws(() => policy({ CLIENT_CONTROL_ALLOW: 'interrupt,Set Model' }), /CLIENT_CONTROL_ALLOW/)
  })

  it('a refusal is a control_response error with the request_id, the message and the code', () => {
    assert.deepEqual(JSON.parse(controlErrorFrame('r-1', 'control_not_allowed', 'no')), {
      type: 'control_response',
      response: { subtype: 'error', request_id: 'r-1', error: 'no', code: 'control_not_allowed', error_code: 'control_not_allowed' }
    })
  })
})
