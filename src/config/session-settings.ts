/**
 * Settings of a session's control traffic and timing: what clients may ask
 * of the CLI, where permission answers may write, and how long keep-alives,
 * prompts, control requests, idle CLIs and shutdown wait. One group of
 * settings.ts's schema, kept apart to keep each file small.
 */
import { defaulted } from './setting-docs.js'
import { flag, listOf, ms } from './setting-rules.js'

/** Environment variable → rule, default and meaning. */
export const sessionSettings = {
  CLIENT_CONTROL_ALLOW: defaulted(listOf(/^(\*|[a-z][a-z0-9_]{0,99})$/, 'control subtypes (lower_snake_case) or *'),
    'interrupt,set_permission_mode,set_model,set_max_thinking_tokens,mcp_status,mcp_set_servers,mcp_reconnect,mcp_toggle,mcp_read_resource,get_context_usage,get_session_cost,list_models,get_binary_version,rewind_files,stop_task,background_tasks,get_task_output,cancel_async_message,rename_session,reload_skills,reload_output_styles',
    'client control subtypes forwarded to the CLI (docs/PROTOCOL.md, Control policy); `*` = all. The default is the Agent SDK\'s ordinary calls: nothing that runs commands, reads files or rewrites settings'),
  CLIENT_MCP_SERVER_TYPES: defaulted(listOf(/^(sdk|http|sse|stdio)$/, 'MCP server types among sdk, http, sse, stdio'), 'sdk',
    'server types a client may add with `mcp_set_servers` (`sdk`, `http`, `sse`, `stdio`); `sdk` runs in the client, `stdio` would be a command the CLI runs'),
  PERMISSION_UPDATE_DESTINATIONS: defaulted(listOf(/^(session|localSettings|projectSettings|userSettings|cliArg)$/, 'destinations among session, localSettings, projectSettings, userSettings, cliArg'),
    'session,localSettings,projectSettings', 'where a permission answer\'s `updatedPermissions` may write'),
  PERMISSION_BROAD_RULE_TOOLS: defaulted(listOf(/^[A-Za-z0-9_.-]{1,200}$/, 'tool names'), 'Bash',
    'tools whose allow rule without a specifier (`Bash`, `Bash(*)`) counts as bypass (refused while `ALLOW_BYPASS_PERMISSIONS=false`)'),
  KEEPALIVE_INTERVAL_MS: defaulted(ms(100), 15_000, '`keep_alive` frame and ping to every client'),
  IDLE_TIMEOUT_MS: defaulted(ms(0), 1_800_000, 'stop a CLI with no client, no turn and no prompt for this long (0 = never)'),
  SHUTDOWN_GRACE_MS: defaulted(ms(0), 5_000, 'at shutdown (SIGTERM), time running turns get to finish before their CLIs are stopped, and the store to take the last frames (docs/SCALING.md, draining)'),
  PERMISSION_TIMEOUT_MS: defaulted(ms(0), 0, 'unanswered permission prompts are denied (with interrupt) after this; 0 = wait for ever'),
  CONTROL_REQUEST_TIMEOUT_MS: defaulted(ms(1), 60_000, 'other CLI control requests (hooks, MCP) get an error answer after this'),
  INITIALIZE_HOLD_MS: defaulted(ms(0), 2_000,
    'a new CLI waits this long for the holder\'s own `initialize` (the SDK\'s: hooks, system prompt, …) before the gateway sends a bare one; 0 = no wait'),
  CLIENT_REQUEST_TIMEOUT_MS: defaulted(ms(1), 30_000, 'a client\'s control request the CLI does not answer gets `request_timeout`'),
  ALLOW_BYPASS_PERMISSIONS: defaulted(flag(), 'false', 'whether clients may use `permission_mode` `bypassPermissions`')
}
