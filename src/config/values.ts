/**
 * Parsers for the settings whose values are more than a number or a word
 * (GATEWAY_TOKENS, TRUST_PROXY, JWT_PUBLIC_KEY, CLAUDE_BIN's fallback) and
 * ConfigError, kept apart from the schema so both it and loadConfig can use
 * them without importing each other.
 */
import { createPublicKey } from 'node:crypto'
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { isIP } from 'node:net'
import { dirname, join } from 'node:path'
import { isTenantName } from '../auth/tenant-name.js'

export class ConfigError extends Error {
  override name = 'ConfigError'
}

/**
 * A listener the gateway could not have (`setting`'s port in use or not
 * allowed, HOST not an address of this machine or not resolving), as the
 * one-line ConfigError a bad value gets, instead of a stack trace naming no
 * setting. Null when `err` is not that listener's.
 */
export function listenError (setting: string, host: string, port: number, err: unknown): ConfigError | null {
  const e = err as NodeJS.ErrnoException & { port?: number, hostname?: string }
  if (e.syscall === 'getaddrinfo' && e.hostname === host) return new ConfigError(`invalid configuration:\n  HOST: cannot listen on ${host} (${e.code ?? e.message})`)
  if (e.syscall !== 'listen' || e.port !== port) return null
  return new ConfigError(`invalid configuration:\n  ${setting}: cannot listen on ${host}:${port} (${e.code ?? e.message})`)
}

/** A comma list, entries trimmed, empty entries dropped. */
export function list (text: string): string[] {
  return text.split(',').map((v) => v.trim()).filter((v) => v !== '')
}

/** `token=tenant,token2=tenant2` → Map. Tokens shorter than 16 characters are refused. */
export function parseTokens (text: string): Map<string, string> {
  const tokens = tokensOrProblem(text)
  if (typeof tokens === 'string') throw new ConfigError(`invalid configuration:\n  GATEWAY_TOKENS: ${tokens}`)
  return tokens
}

/** parseTokens, with the problem returned instead of thrown (it never quotes a token). */
export function tokensOrProblem (text: string): Map<string, string> | string {
  const tokens = new Map<string, string>()
  for (const pair of list(text)) {
    const at = pair.lastIndexOf('=')
    const token = pair.slice(0, at)
    const tenant = pair.slice(at + 1)
    if (at < 1 || !isTenantName(tenant)) {
      return 'expected token=tenant[,token=tenant...] with tenant of [A-Za-z0-9._-]'
    }
    if (token.length < 16) return `token for tenant ${tenant} is shorter than 16 characters`
    tokens.set(token, tenant)
  }
  if (tokens.size === 0) return 'no token=tenant pair'
  return tokens
}

/**
 * TENANT_API_KEYS: `tenant=key[,tenant=key...]` (a key runs to the next
 * comma, so it may hold `=`); the map, or the problem. Keys are never
 * named in the problem.
 */
export function tenantKeysOrProblem (text: string): Map<string, string> | string {
  const keys = new Map<string, string>()
  for (const pair of list(text)) {
    const at = pair.indexOf('=')
    const tenant = pair.slice(0, at)
    if (at < 1 || !isTenantName(tenant)) return 'expected tenant=key[,tenant=key...] with tenant of [A-Za-z0-9._-]'
    if (at === pair.length - 1) return `the key for tenant ${tenant} is empty`
    if (keys.has(tenant)) return `tenant ${tenant} is named twice`
    keys.set(tenant, pair.slice(at + 1))
  }
  if (keys.size === 0) return 'no tenant=key pair'
  return keys
}

/**
 * TRUST_PROXY in Fastify's terms: `true`/`false`, a hop count, or a list of
 * addresses/CIDRs (and proxy-addr's names); null when not valid, so a typo
 * stops the gateway instead of making Fastify throw later.
 */
export function parseTrustProxy (text: string): boolean | number | string[] | null {
  const v = text.trim().toLowerCase()
  if (v === 'true') return true
  if (v === 'false' || v === '') return false
  if (/^\d+$/.test(v)) return Number(v)
  const entries = list(v)
  const named = new Set(['loopback', 'linklocal', 'uniquelocal'])
  const valid = entries.length > 0 && entries.every((entry) => {
    if (named.has(entry)) return true
    const [address, bits, ...rest] = entry.split('/')
    const family = isIP(address ?? '')
    if (family === 0 || rest.length > 0) return false
    return bits === undefined || (/^\d+$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128))
  })
  return valid ? entries : null
}

/** EC curves of ES256/ES384/ES512, in OpenSSL's names. */
const JWT_CURVES = new Set(['prime256v1', 'secp384r1', 'secp521r1'])

/**
 * Whether src/auth/jwt.ts can verify with this PEM: `jose`'s importSPKI wants
 * an SPKI PEM (`-----BEGIN PUBLIC KEY-----` first) of a key it has an
 * algorithm for (RSA, EC P-256/P-384/P-521, Ed25519). Checked at start
 * because the authenticator finds out only asynchronously, as an unhandled
 * rejection that ends the process with a stack trace.
 */
export function isJwtPublicKey (pem: string): boolean {
  if (!pem.startsWith('-----BEGIN PUBLIC KEY-----')) return false
  let key
  try {
    key = createPublicKey(pem)
  } catch {
    return false
  }
  const type = key.asymmetricKeyType
  if (type === 'rsa' || type === 'ed25519') return true
  return type === 'ec' && JWT_CURVES.has(key.asymmetricKeyDetails?.namedCurve ?? '')
}

/** The `claude` binary of the @anthropic-ai/claude-code dependency, else `claude` on PATH. */
export function defaultClaudeBin (): string {
  try {
    const pkg = createRequire(import.meta.url).resolve('@anthropic-ai/claude-code/package.json')
    const bin = join(dirname(pkg), 'bin', 'claude.exe')
    if (existsSync(bin)) return bin
  } catch {
    // not installed as a dependency: fall back to PATH
  }
  return 'claude'
}
