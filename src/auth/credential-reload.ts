/**
 * A credential reload (SIGHUP, or a changed secret file): the credentials of
 * a configuration read again applied to the running gateway, everything
 * else in it left for a restart. Apart from app.ts, which builds the parts
 * a reload changes and hands them here.
 */
import type { Logger } from 'pino'
import { type Config, ConfigError } from '../config.js'
import type { LiveCredentials } from './live-credentials.js'
import type { Authenticator } from './static-tokens.js'

/** What a credential reload changed. */
export interface CredentialsReloaded {
  /** False when the authenticator was passed in (AppParts): only the tenants' API keys were applied. */
  authenticators: boolean
  /** Whether a shared ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN is set now (for CLIs started from now on). */
  sharedApiCredential: boolean
  /** Connections (WebSockets, event streams) ended because their credential no longer holds. */
  ended: number
  tenantApiKeys: number
}

export interface CredentialReloadParts {
  /** The authenticator requests are checked with; replaced on reload unless `injected`. */
  authenticator: LiveCredentials
  /** True when the authenticator was passed in: it is left alone. */
  injected: boolean
  /** The token generated at start (neither tokens nor a JWT key were set), else null. */
  generatedToken: string | null
  /** A config's tokens and JWT keys (or the generated token) as one authenticator. */
  authenticatorFor: (config: Config, generatedToken: string | null) => Authenticator
  /** The tenants' own API keys CliPlan reads at each CLI start: refilled in place. */
  tenantApiKeys: Map<string, string>
  /** The CLIs' environment source: its shared API credential replaced in place. */
  cliEnv: NodeJS.ProcessEnv
  logger: Logger
}

/**
 * Applies the credentials of `next`: the tokens and JWT keys requests are
 * checked with, ending each connection opened with a credential they no
 * longer admit, and the shared and the tenants' API credentials for CLIs
 * started from now on. Throws ConfigError, changing nothing, when `next`
 * would leave no way to authenticate.
 */
export function credentialReload (parts: CredentialReloadParts): (next: Config) => Promise<CredentialsReloaded> {
  const { authenticator, injected, generatedToken, tenantApiKeys, cliEnv, logger } = parts
  return async (next) => {
    if (!injected && next.tokens === null && next.jwt === null && generatedToken === null) {
      throw new ConfigError('credentials not reloaded: neither GATEWAY_TOKENS nor a JWT key is set now, so no one could sign in')
    }
    tenantApiKeys.clear()
    for (const [tenant, key] of next.tenantApiKeys ?? []) tenantApiKeys.set(tenant, key)
    delete cliEnv.ANTHROPIC_API_KEY
    delete cliEnv.ANTHROPIC_AUTH_TOKEN
    Object.assign(cliEnv, next.anthropicCredentials)
    // Without tokens or a JWT key now, the token generated at start stays (the only one anyone has).
    const ended = injected ? 0 : await authenticator.replace(parts.authenticatorFor(next, generatedToken))
    const result = { authenticators: !injected, sharedApiCredential: Object.keys(next.anthropicCredentials).length > 0, ended, tenantApiKeys: tenantApiKeys.size }
    logger.info(result, 'credentials reloaded')
    return result
  }
}
