/**
 * The `claude` CLI's argv, as the Agent SDK (and IDE plugins, and scripts)
 * pass it, turned into what the gateway can do with it: session options
 * (POST /v1/sessions), fields of the host's `initialize`, a control request
 * after it, or an attach to an existing session. A flag the gateway cannot
 * honour is refused by name instead of being dropped: dropping it would run a
 * session that behaves differently from what the caller asked for.
 */

export interface RemoteArgs {
  /** Body of POST /v1/sessions (unused with `resume`, but compared to the session's own options). */
  options: Record<string, unknown>
  /** `--resume <id>`: attach to this gateway session instead of creating one. */
  resume: string | null
  /** Fields the host's `initialize` gets when it has none of its own (`--system-prompt`, `--json-schema`). */
  initFields: Record<string, unknown>
  /** `--max-thinking-tokens`: sent as a `set_max_thinking_tokens` control request. */
  maxThinkingTokens: number | null
  /** `--permission-prompt-tool stdio`: prompts go to the host; without it claude-remote denies them, as the CLI does. */
  promptTool: boolean
  /** `--debug` (stderr) or `--debug-file <path>`: claude-remote's own diagnostics. */
  debug: { stderr: boolean, file: string | null }
}

export class UsageError extends Error {}

type Handler = (value: string, out: RemoteArgs) => void

const refused = (why: string): { refuse: string } => ({ refuse: why })

/** Flags that take a value. `null` handler: protocol flag checked below. */
const valueFlags: Record<string, Handler | { refuse: string }> = {
  '--output-format': (v) => { if (v !== 'stream-json') throw new UsageError(`--output-format ${v}: claude-remote speaks only stream-json`) },
  '--input-format': (v) => { if (v !== 'stream-json') throw new UsageError(`--input-format ${v}: claude-remote speaks only stream-json`) },
  '--permission-prompt-tool': (v, out) => {
    if (v !== 'stdio') throw new UsageError(`--permission-prompt-tool ${v}: only "stdio" is supported through the gateway (MCP prompt tools would run on the gateway host)`)
    out.promptTool = true
  },
  '--model': (v, out) => { out.options.model = v },
  '--permission-mode': (v, out) => { out.options.permission_mode = v },
  '--allowedTools': (v, out) => { out.options.allowed_tools = [...asList(out.options.allowed_tools), ...splitRules(v)] },
  '--disallowedTools': (v, out) => { out.options.disallowed_tools = [...asList(out.options.disallowed_tools), ...splitRules(v)] },
  '--append-system-prompt': (v, out) => { out.options.append_system_prompt = v },
  '--max-turns': (v, out) => { out.options.max_turns = integer('--max-turns', v) },
  '--resume': (v, out) => { out.resume = v },
  '--system-prompt': (v, out) => { out.initFields.systemPrompt = [v] },
  '--json-schema': (v, out) => {
    let schema: unknown
    try {
      schema = JSON.parse(v)
    } catch {
      throw new UsageError('--json-schema: not JSON')
    }
    // A session option (the CLI gets the flag at boot, as when the SDK spawns it) and an
    // initialize field (for a host that sends no initialize of its own).
    out.options.json_schema = schema
    out.initFields.jsonSchema = schema
  },
  '--max-thinking-tokens': (v, out) => { out.maxThinkingTokens = integer('--max-thinking-tokens', v) },
  '--setting-sources': (v) => {
    const sources = new Set(v.split(',').map((s) => s.trim()).filter((s) => s !== ''))
    const all = ['user', 'project', 'local']
    if (sources.size !== all.length || !all.every((s) => sources.has(s))) {
      throw new UsageError(`--setting-sources ${JSON.stringify(v)}: the gateway's CLI reads the settings the operator set up (user, project, local); other sources cannot be chosen per session`)
    }
  },
  '--debug-file': (v, out) => { out.debug.file = v },
  '--session-id': refused('the gateway picks session ids; use --resume <id> to attach to an existing gateway session'),
  '--mcp-config': refused('MCP servers from the command line would run on the gateway host; use SDK MCP servers (createSdkMcpServer), which travel in initialize'),
  '--thinking': refused('no gateway session option'),
  '--thinking-display': refused('no gateway session option'),
  '--effort': refused('no gateway session option'),
  '--max-budget-usd': refused('no gateway session option'),
  '--task-budget': refused('no gateway session option'),
  '--agent': refused('no gateway session option'),
  '--agents': refused('no gateway session option (SDK agents travel in initialize)'),
  '--betas': refused('no gateway session option'),
  '--fallback-model': refused('no gateway session option'),
  '--tools': refused('no gateway session option; use --allowedTools / --disallowedTools'),
  '--permission-prompts': refused('no gateway session option'),
  '--channels': refused('no gateway session option'),
  '--add-dir': refused('directories outside the session folder are not granted per session'),
  '--project-config-root': refused('the gateway picks the session folder'),
  '--plugin-dir': refused('plugins would load from the gateway host'),
  '--plugin-dir-no-mcp': refused('plugins would load from the gateway host'),
  '--settings': refused('the gateway\'s CLI reads the settings the operator set up'),
  '--managed-settings': refused('the gateway\'s CLI reads the settings the operator set up'),
  '--initialize-fields': refused('no gateway session option'),
  '--resume-session-at': refused('the gateway resumes whole sessions'),
  '--resume-drops-turn': refused('the gateway resumes whole sessions')
}

/** Flags without a value. */
const booleanFlags: Record<string, Handler | { refuse: string }> = {
  '--verbose': () => {},
  '--print': () => {},
  '--include-partial-messages': (_v, out) => { out.options.include_partial_messages = true },
  '--debug': (_v, out) => { out.debug.stderr = true },
  '--continue': refused('the gateway does not pick "the most recent conversation"; use --resume <session id>'),
  '--fork-session': refused('the gateway cannot fork a session'),
  '--no-session-persistence': refused('the gateway keeps every session resumable'),
  '--strict-mcp-config': refused('MCP configuration is the gateway\'s'),
  '--dangerously-skip-permissions': refused('use --permission-mode bypassPermissions (the operator decides whether it is allowed)'),
  '--allow-dangerously-skip-permissions': refused('use --permission-mode bypassPermissions (the operator decides whether it is allowed)'),
  '--include-hook-events': refused('no gateway session option'),
  '--session-mirror': refused('no gateway session option'),
  '--await-initialize': refused('no gateway session option'),
  '--managed-settings-in-initialize': refused('the gateway\'s CLI reads the settings the operator set up'),
  '--debug-to-stderr': refused('use --debug'),
  '--hard-fail': refused('no gateway session option')
}

const aliases: Record<string, string> = {
  '--allowed-tools': '--allowedTools',
  '--disallowed-tools': '--disallowedTools',
  '-r': '--resume',
  '-p': '--print',
  '-c': '--continue',
  '-d': '--debug'
}

export function parseRemoteArgs (argv: readonly string[]): RemoteArgs {
  const out: RemoteArgs = { options: {}, resume: null, initFields: {}, maxThinkingTokens: null, promptTool: false, debug: { stderr: false, file: null } }
  const seen = new Set<string>()
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string
    if (!arg.startsWith('-') || arg === '-' || arg === '--') {
      throw new UsageError(`unexpected argument ${JSON.stringify(arg.slice(0, 80))}: claude-remote reads prompts from stdin (stream-json)`)
    }
    const eq = arg.startsWith('--') ? arg.indexOf('=') : -1
    const raw = eq > 0 ? arg.slice(0, eq) : arg
    const name = aliases[raw] ?? raw
    const boolHandler = booleanFlags[name]
    if (boolHandler !== undefined) {
      if (eq > 0 && !['true', '1'].includes(arg.slice(eq + 1))) throw new UsageError(`${raw} takes no value`)
      if ('refuse' in boolHandler) throw new UsageError(`${raw} is not supported through the gateway: ${boolHandler.refuse}`)
      boolHandler('', out)
      seen.add(name)
      continue
    }
    const handler = valueFlags[name]
    if (handler === undefined) throw new UsageError(`unknown flag ${raw}`)
    if ('refuse' in handler) throw new UsageError(`${raw} is not supported through the gateway: ${handler.refuse}`)
    let value: string
    if (eq > 0) {
      value = arg.slice(eq + 1)
    } else {
      if (i + 1 >= argv.length) throw new UsageError(`${raw} needs a value`)
      value = argv[++i] as string
    }
    handler(value, out)
    seen.add(name)
  }
  // What the CLI itself requires for stdio hosts (it exits 1 without --verbose).
  for (const needed of ['--output-format', '--input-format', '--verbose']) {
    if (!seen.has(needed)) throw new UsageError(`${needed} is required: claude-remote runs only as a stream-json stdio host (--output-format stream-json --verbose --input-format stream-json)`)
  }
  if (out.resume !== null && !/^[A-Za-z0-9-]{1,100}$/.test(out.resume)) throw new UsageError('--resume: not a session id')
  // Without the flag the CLI denies what needs a prompt itself (and lists fewer tools): so does the gateway's.
  out.options.permission_prompt_tool = out.promptTool ? 'stdio' : 'none'
  return out
}

function integer (flag: string, value: string): number {
  if (!/^\d{1,9}$/.test(value)) throw new UsageError(`${flag} ${JSON.stringify(value)}: not a non-negative integer`)
  return Number(value)
}

function asList (value: unknown): string[] {
  return Array.isArray(value) ? value as string[] : []
}

/** The CLI's list form: commas (and spaces) separate rules, but not inside `Tool(…)`. */
export function splitRules (value: string): string[] {
  const rules: string[] = []
  let depth = 0
  let current = ''
  for (const ch of value) {
    if (ch === '(') depth++
    if (ch === ')') depth = Math.max(0, depth - 1)
    if (depth === 0 && (ch === ',' || ch === ' ')) {
      if (current !== '') rules.push(current)
      current = ''
      continue
    }
    current += ch
  }
  if (current !== '') rules.push(current)
  return rules
}
