/**
 * The CLI's environment: an allowlist of the gateway's own, never its
 * secrets. The CLI runs tools that can print their environment, so whatever
 * passes here is readable by the model and by whoever drives the session.
 */

const allowedNames = new Set([
  'PATH', 'HOME', 'LANG', 'LANGUAGE', 'TZ', 'TERM', 'TMPDIR', 'USER', 'LOGNAME', 'SHELL',
  'HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY', 'http_proxy', 'https_proxy', 'no_proxy',
  'NODE_EXTRA_CA_CERTS', 'SSL_CERT_FILE', 'SSL_CERT_DIR',
  'XDG_RUNTIME_DIR', 'XDG_CONFIG_HOME', 'XDG_CACHE_HOME', 'XDG_DATA_HOME',
  'DISABLE_AUTOUPDATER', 'DISABLE_TELEMETRY', 'DISABLE_ERROR_REPORTING', 'CLAUDE_CONFIG_DIR'
])
const allowedPrefixes = ['LC_', 'ANTHROPIC_', 'CLAUDE_CODE_', 'MCP_']
/** The gateway's own settings never pass, whatever their prefix. */
const deniedNames = new Set(['GATEWAY_TOKENS', 'REDIS_URL', 'JWT_SECRET', 'JWT_PUBLIC_KEY'])

export const ENTRYPOINT = 'claude-gateway'

export function buildCliEnv (source: NodeJS.ProcessEnv, overrides: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(source)) {
    if (value === undefined || deniedNames.has(name)) continue
    if (allowedNames.has(name) || allowedPrefixes.some((p) => name.startsWith(p))) env[name] = value
  }
  env.CLAUDE_CODE_ENTRYPOINT = ENTRYPOINT
  return { ...env, ...overrides }
}
