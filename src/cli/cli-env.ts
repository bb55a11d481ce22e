/**
 * The CLI's environment: a documented allowlist of the gateway's own, never
 * its secrets. The CLI runs tools that can print their environment, so
 * whatever passes here is readable by the model and by whoever drives the
 * session. Hence exact names, not whole families such as `ANTHROPIC_*` (an
 * operator's ANTHROPIC_ADMIN_KEY would pass) or `MCP_*`; an operator who
 * needs more (AWS_ for Bedrock, GOOGLE_ for Vertex) lists it in CLI_ENV_ALLOW.
 * The names were checked against those the CLI reads (strings of 2.1.332).
 */

const allowedNames = new Set([
  // the system
  'PATH', 'HOME', 'LANG', 'LANGUAGE', 'TZ', 'TERM', 'TMPDIR', 'USER', 'LOGNAME', 'SHELL',
  'XDG_RUNTIME_DIR', 'XDG_CONFIG_HOME', 'XDG_CACHE_HOME', 'XDG_DATA_HOME',
  // network: proxies and trust roots, the CLI's client certificate (mTLS to an API gateway)
  'HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY', 'http_proxy', 'https_proxy', 'no_proxy',
  'NODE_EXTRA_CA_CERTS', 'SSL_CERT_FILE', 'SSL_CERT_DIR',
  'CLAUDE_CODE_CLIENT_CERT', 'CLAUDE_CODE_CLIENT_KEY', 'CLAUDE_CODE_CLIENT_KEY_PASSPHRASE',
  // the Anthropic API: credentials, endpoint, headers, models
  'ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN', 'ANTHROPIC_BASE_URL', 'ANTHROPIC_CUSTOM_HEADERS', 'ANTHROPIC_BETAS',
  'ANTHROPIC_MODEL', 'ANTHROPIC_SMALL_FAST_MODEL', 'ANTHROPIC_SMALL_FAST_MODEL_AWS_REGION',
  'ANTHROPIC_DEFAULT_OPUS_MODEL', 'ANTHROPIC_DEFAULT_SONNET_MODEL', 'ANTHROPIC_DEFAULT_HAIKU_MODEL',
  // other providers: the switches and endpoints (their cloud credentials come through CLI_ENV_ALLOW)
  'CLAUDE_CODE_USE_BEDROCK', 'CLAUDE_CODE_USE_VERTEX', 'CLAUDE_CODE_USE_FOUNDRY',
  'CLAUDE_CODE_SKIP_BEDROCK_AUTH', 'CLAUDE_CODE_SKIP_VERTEX_AUTH', 'CLAUDE_CODE_SKIP_FOUNDRY_AUTH',
  'ANTHROPIC_BEDROCK_BASE_URL', 'ANTHROPIC_VERTEX_BASE_URL', 'ANTHROPIC_VERTEX_PROJECT_ID', 'CLOUD_ML_REGION',
  'ANTHROPIC_FOUNDRY_API_KEY', 'ANTHROPIC_FOUNDRY_BASE_URL', 'ANTHROPIC_FOUNDRY_RESOURCE',
  // behaviour the operator may tune
  'CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC', 'DISABLE_AUTOUPDATER', 'DISABLE_TELEMETRY', 'DISABLE_ERROR_REPORTING',
  'CLAUDE_CODE_MAX_OUTPUT_TOKENS', 'MAX_THINKING_TOKENS', 'CLAUDE_CODE_API_KEY_HELPER_TTL_MS',
  'BASH_DEFAULT_TIMEOUT_MS', 'BASH_MAX_TIMEOUT_MS', 'BASH_MAX_OUTPUT_LENGTH',
  'MCP_TIMEOUT', 'MCP_TOOL_TIMEOUT', 'MAX_MCP_OUTPUT_TOKENS',
  'CLAUDE_CONFIG_DIR'
])
const allowedPrefixes = ['LC_', 'VERTEX_REGION_']
/** The gateway's own settings never pass, whatever CLI_ENV_ALLOW says. */
const deniedNames = new Set([
  'GATEWAY_TOKENS', 'GATEWAY_TOKENS_FILE', 'REDIS_URL', 'REDIS_URL_FILE', 'JWT_SECRET', 'JWT_SECRET_FILE', 'JWT_PUBLIC_KEY', 'JWT_PUBLIC_KEY_FILE',
  'STORE_SECRET', 'STORE_SECRET_FILE', 'METRICS_TOKEN', 'METRICS_TOKEN_FILE', 'WEBHOOK_SECRET', 'WEBHOOK_SECRET_FILE',
  'TENANT_API_KEYS', 'TENANT_API_KEYS_FILE',
  // A webhook receiver's URL may carry its Basic credentials, or be the credential itself.
  'WEBHOOK_URL', 'WEBHOOK_URL_FILE'
])

export const ENTRYPOINT = 'claude-gateway'

/**
 * CLI_ENV_ALLOW entries: exact names, and prefixes (`AWS_`, or `AWS*`). A bare
 * `*` or an empty prefix would pass everything, so such entries are dropped.
 */
export function parseEnvAllow (entries: readonly string[]): { names: Set<string>, prefixes: string[] } {
  const names = new Set<string>()
  const prefixes: string[] = []
  for (const entry of entries) {
    const star = entry.endsWith('*')
    const name = star ? entry.slice(0, -1) : entry
    if (name === '') continue
    if (star || name.endsWith('_')) prefixes.push(name)
    else names.add(name)
  }
  return { names, prefixes }
}

export function buildCliEnv (source: NodeJS.ProcessEnv, overrides: Record<string, string> = {}, allow: readonly string[] = []): Record<string, string> {
  const extra = parseEnvAllow(allow)
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(source)) {
    if (value === undefined || deniedNames.has(name)) continue
    const listed = allowedNames.has(name) || allowedPrefixes.some((p) => name.startsWith(p))
    if (listed || extra.names.has(name) || extra.prefixes.some((p) => name.startsWith(p))) env[name] = value
  }
  env.CLAUDE_CODE_ENTRYPOINT = ENTRYPOINT
  // system/session_state_changed (running / requires_action / idle): what UIs and the Agent SDK read.
  env.CLAUDE_CODE_SDK_READS_SESSION_STATE = '1'
  return { ...env, ...overrides }
}
