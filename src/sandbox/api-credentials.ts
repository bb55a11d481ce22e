/**
 * SANDBOX_CREDENTIALS=proxy: the CLI's Anthropic API credential stays with
 * the gateway. Whatever is in a CLI's environment its tools can print, and
 * one operator key usually serves every tenant; so the sandboxed CLI gets a
 * placeholder in its place and an ANTHROPIC_BASE_URL on its own egress proxy,
 * which sends each of its API requests on to the real API with the real
 * credential (egress-proxy.ts, http-relay.ts). Given the spec's live
 * credential, the proxy reads it at each request, so a running CLI's API
 * calls carry a rotated key from the moment the gateway reloads it.
 * ANTHROPIC_CUSTOM_HEADERS go with the credential: an LLM gateway's own
 * credential is often one of them.
 */
import { readFileSync } from 'node:fs'
import type { ApiCredential } from '../cli/cli-handle.js'

/** What a sandboxed CLI finds in ANTHROPIC_API_KEY / ANTHROPIC_AUTH_TOKEN instead of the credential. */
export const CREDENTIAL_PLACEHOLDER = 'held-by-claude-gateway'

const ANTHROPIC_API_URL = 'https://api.anthropic.com'

/** Providers that take their credentials from elsewhere: their variables pass as they are (CLI_ENV_ALLOW). */
const OTHER_PROVIDERS = ['CLAUDE_CODE_USE_BEDROCK', 'CLAUDE_CODE_USE_VERTEX', 'CLAUDE_CODE_USE_FOUNDRY']

export interface HeldCredentials {
  /** The real API: the CLI's ANTHROPIC_BASE_URL, else the Anthropic API. */
  upstream: URL
  /** Set on every forwarded request (ANTHROPIC_CUSTOM_HEADERS included), in place of whatever credential headers the CLI sent; asked per request. */
  headers: () => Record<string, string>
  /** The client certificate the CLI would have presented (CLAUDE_CODE_CLIENT_CERT / _KEY / _KEY_PASSPHRASE). */
  tls?: { cert: Buffer, key: Buffer, passphrase?: string }
}

export interface SandboxCredentials {
  /** The environment the sandboxed CLI gets. */
  env: Record<string, string>
  /** What its egress proxy adds to API requests; null when nothing is held (the env is unchanged). */
  held: HeldCredentials | null
}

/**
 * Takes the API credential out of a CLI's environment. `inBoxUrl` is the
 * base URL the CLI uses instead (its egress proxy, as seen inside the
 * sandbox). Nothing is held, and the environment is returned unchanged,
 * when there is no ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN, when another
 * provider is switched on, or when ANTHROPIC_BASE_URL is not an http(s) URL
 * (the CLI then fails as it would have without a sandbox). `live`, when
 * given, is the credential now (it may change, or go): the requests then
 * carry whatever it says, not what `env` had.
 */
export function holdCredentials (env: Record<string, string>, inBoxUrl: string, live?: () => ApiCredential): SandboxCredentials {
  const key = nonEmpty(env.ANTHROPIC_API_KEY)
  const token = nonEmpty(env.ANTHROPIC_AUTH_TOKEN)
  if ((key === undefined && token === undefined) || OTHER_PROVIDERS.some((name) => truthy(env[name]))) return { env, held: null }
  let upstream: URL
  try {
    upstream = new URL(nonEmpty(env.ANTHROPIC_BASE_URL) ?? ANTHROPIC_API_URL)
  } catch {
    return { env, held: null }
  }
  if (upstream.protocol !== 'https:' && upstream.protocol !== 'http:') return { env, held: null }

  const inside: Record<string, string> = { ...env, ANTHROPIC_BASE_URL: inBoxUrl }
  if (key !== undefined) inside.ANTHROPIC_API_KEY = CREDENTIAL_PLACEHOLDER
  if (token !== undefined) inside.ANTHROPIC_AUTH_TOKEN = CREDENTIAL_PLACEHOLDER
  // The proxy adds them to each API request as the CLI would have; the CLI never sees them.
  const custom = customHeaders(env.ANTHROPIC_CUSTOM_HEADERS ?? '')
  delete inside.ANTHROPIC_CUSTOM_HEADERS
  const atSpawn = { ...credentialHeaders({ apiKey: key, authToken: token }), ...custom }
  const held: HeldCredentials = { upstream, headers: live === undefined ? () => atSpawn : () => ({ ...credentialHeaders(live()), ...custom }) }
  const cert = nonEmpty(env.CLAUDE_CODE_CLIENT_CERT)
  const certKey = nonEmpty(env.CLAUDE_CODE_CLIENT_KEY)
  if (cert !== undefined && certKey !== undefined) {
    // Read by the gateway, which now makes the TLS connection; a missing file fails the start, as it would fail the CLI.
    const passphrase = nonEmpty(env.CLAUDE_CODE_CLIENT_KEY_PASSPHRASE)
    held.tls = { cert: readFileSync(cert), key: readFileSync(certKey), ...(passphrase === undefined ? {} : { passphrase }) }
  }
  // The CLI talks plain HTTP to its proxy: it has no use for a client certificate, and its key's passphrase is a secret too.
  for (const name of ['CLAUDE_CODE_CLIENT_CERT', 'CLAUDE_CODE_CLIENT_KEY', 'CLAUDE_CODE_CLIENT_KEY_PASSPHRASE']) delete inside[name]
  return { env: inside, held }
}

/** The headers that carry `credential` (a key as x-api-key, a token as a bearer), each only when set. */
function credentialHeaders (credential: ApiCredential): Record<string, string> {
  const headers: Record<string, string> = {}
  const key = nonEmpty(credential.apiKey)
  const token = nonEmpty(credential.authToken)
  if (key !== undefined) headers['x-api-key'] = key
  if (token !== undefined) headers.authorization = `Bearer ${token}`
  return headers
}

/**
 * ANTHROPIC_CUSTOM_HEADERS read as the CLI reads it (2.1.332): one `Name: value`
 * a line, split at the first colon, trimmed; lines without a name are skipped.
 * Names are lower-cased (so they replace what the CLI sent); a name or value
 * that is not valid in HTTP is left out (it would fail every API request).
 */
function customHeaders (text: string): Record<string, string> {
  const headers: Record<string, string> = {}
  for (const line of text.split(/\r?\n/)) {
    const at = line.indexOf(':')
    const name = at === -1 ? '' : line.slice(0, at).trim().toLowerCase()
    const value = line.slice(at + 1).trim()
    if (/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(name) && !/[^\t\x20-\x7e\x80-\xff]/.test(value)) headers[name] = value
  }
  return headers
}

function nonEmpty (value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value
}

function truthy (value: string | undefined): boolean {
  return value !== undefined && value !== '' && value !== '0' && value.toLowerCase() !== 'false'
}
