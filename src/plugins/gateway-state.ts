/**
 * What the built app exposes as `app.gateway` (server.ts reloads credentials
 * and prints the generated token through it; tests read the manager and the
 * store), and the request's `tenant`, declared on Fastify's types once.
 */
import type { CredentialsReloaded } from '../auth/credential-reload.js'
import type { Config } from '../config.js'
import type { SessionManager } from '../session/session-manager.js'
import type { EventStore } from '../store/store.js'
import type { Heartbeat } from '../ws/heartbeat.js'

export interface GatewayState {
  manager: SessionManager
  store: EventStore
  heartbeat: Heartbeat
  /** Set when GATEWAY_TOKENS was unset: the token generated for this run (tenant `default`). */
  generatedToken: string | null
  shuttingDown: boolean
  /**
   * Applies the credentials of `next` (a configuration read again: SIGHUP):
   * the tokens and JWT keys requests are checked with, ending each
   * connection opened with a credential they no longer admit, and the
   * shared and the tenants' API credentials for CLIs started from now on. Everything else in
   * `next` is ignored (it needs a restart). Throws ConfigError, changing
   * nothing, when `next` would leave no way to authenticate.
   */
  reloadCredentials: (next: Config) => Promise<CredentialsReloaded>
}

declare module 'fastify' {
  interface FastifyInstance {
    gateway: GatewayState
  }
  interface FastifyRequest {
    /** The authenticated caller's tenant (set for /v1 routes). */
    tenant: string
  }
}
