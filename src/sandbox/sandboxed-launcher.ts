/**
 * SANDBOX=bwrap: wraps the CLI launcher so every CLI starts inside its own
 * bubblewrap sandbox with its own egress proxy. The proxy opens before the
 * spawn and closes when that CLI has exited. The session manager marks each
 * spec with the folders the sandbox may show (`spec.sandbox`); a spec without
 * them is refused, never run unsandboxed. With SANDBOX_CREDENTIALS=proxy the
 * API credential stays with that proxy (api-credentials.ts), which reads the
 * spec's live credential at each request. A tenant's proxies share one
 * count of the connections they hold (connection-slots.ts).
 */
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import type { Logger } from 'pino'
import type { CliLauncher } from '../cli/cli-handle.js'
import type { MetricsSink } from '../metrics/sink.js'
import { ConnectionSlots } from '../net/connection-slots.js'
import { holdCredentials } from './api-credentials.js'
import { buildBwrapSpec } from './bwrap-spec.js'
import { type PinnedUserExtensions, pinUserExtensions } from './user-extensions.js'
import { type PinnedUserSettings, pinUserSettings } from './user-settings.js'
import type { Destination } from './destinations.js'
import { EgressProxy } from './egress-proxy.js'

export interface SandboxedLauncherOptions {
  bwrap: string
  socat: string
  /** Arguments for the read-only system (systemMounts(), computed once). */
  system: string[]
  /** Real folder of the CLI binary, shown read-only. */
  cliDir: string
  egress: readonly Destination[]
  /** Gateway-only folder (mode 0700) for the proxies' sockets; short, so paths fit in 107 bytes. */
  socketDir: string
  /** `proxy`: the CLI's API credential is held by its egress proxy, never in the sandbox; `env`: in its environment. */
  credentials: 'proxy' | 'env'
  /** API paths a CLI may call with the held credential (SANDBOX_API_PATHS). */
  apiPaths: readonly string[]
  /**
   * Shows the tenant's user settings read-only (a copy as at the CLI's start)
   * and its user skills, subagents, slash commands and plugins as empty
   * read-only folders (user-extensions.ts): true unless PERMISSION_UPDATE_DESTINATIONS
   * lists `userSettings`.
   */
  pinUserSettings: boolean
  /**
   * Adds `--strict-mcp-config`: the CLI then starts no MCP server named in
   * files a tool can write (the config dir's `.claude.json`, a workspace's
   * `.mcp.json`), each of which would be a command run with no prompt at
   * every later start. True unless CLIENT_MCP_SERVER_TYPES lists `stdio`.
   */
  strictMcpConfig: boolean
  /**
   * Connections a tenant's sandboxes may hold at once through their proxies,
   * both sides counted (a tunnel is two): default EGRESS_CONNECTIONS_PER_TENANT.
   */
  egressConnectionsPerTenant?: number
  logger: Logger
  /** Counts what the proxies refuse. */
  metrics?: MetricsSink | undefined
}

/** Port the in-sandbox forwarder listens on; another is picked when an allowed destination is on that loopback port. */
const PROXY_PORT = 3128

/** Room for a CLI's API streams, its tools' fetches and many sessions, far below the gateway's file descriptors. */
export const EGRESS_CONNECTIONS_PER_TENANT = 256

export function sandboxedLauncher (inner: CliLauncher, options: SandboxedLauncherOptions): CliLauncher {
  let port = PROXY_PORT
  while (options.egress.some((d) => d.port === port && /^(127\.|localhost$|::1$)/.test(d.host))) port++
  const slots = new ConnectionSlots(options.egressConnectionsPerTenant ?? EGRESS_CONNECTIONS_PER_TENANT)

  return (spec, callbacks) => {
    const mounts = spec.sandbox
    if (mounts === undefined) throw new Error(`session ${spec.sessionId}: no sandbox folders in the spawn spec; refusing to run the CLI unsandboxed`)
    const socketPath = join(options.socketDir, `${randomBytes(6).toString('hex')}.sock`)
    const { env, held } = options.credentials === 'proxy' ? holdCredentials(spec.env, `http://127.0.0.1:${port}`, spec.apiCredential) : { env: spec.env, held: null }
    // Before the proxy opens: a config dir the gateway cannot prepare fails the start with nothing to close.
    const settings: PinnedUserSettings | null = options.pinUserSettings ? pinUserSettings(mounts.configDir, options.socketDir) : null
    let extensions: PinnedUserExtensions | null = null
    try {
      extensions = options.pinUserSettings ? pinUserExtensions(mounts.configDir, options.socketDir) : null
    } catch (err) {
      settings?.remove()
      throw err
    }
    const release = (): void => {
      void proxy.close()
      settings?.remove()
      extensions?.remove()
    }
    const proxy = new EgressProxy({
      socketPath,
      allow: options.egress,
      logger: options.logger,
      sessionId: spec.sessionId,
      api: held === null ? undefined : { held, port, paths: options.apiPaths },
      onRefused: options.metrics === undefined ? undefined : (kind) => { options.metrics?.sandboxRefused(kind) },
      slots: () => slots.take(spec.tenant ?? `session:${spec.sessionId}`)
    })
    const sandboxed = buildBwrapSpec({
      bwrap: options.bwrap,
      socat: options.socat,
      cliDir: options.cliDir,
      tenantRoot: mounts.tenantRoot,
      configDir: mounts.configDir,
      workdir: mounts.workdir,
      egressSocket: socketPath,
      readOnly: [...(settings === null ? [] : [settings]), ...(extensions?.mounts ?? [])],
      proxyPort: port,
      command: spec.command,
      args: options.strictMcpConfig ? [...spec.args, '--strict-mcp-config'] : spec.args,
      env
    }, options.system)
    try {
      return inner({ ...sandboxed, sessionId: spec.sessionId, ...(spec.tenant === undefined ? {} : { tenant: spec.tenant }) }, {
        ...callbacks,
        onExit: (exit) => {
          release()
          callbacks.onExit(exit)
        },
        // Only when the caller listens: without it the handle reports the failure through onExit.
        ...(callbacks.onStartFailed === undefined
          ? {}
          : {
              onStartFailed: (err: Error) => {
                release()
                callbacks.onStartFailed?.(err)
              }
            })
      })
    } catch (err) {
      // spawn itself threw (E2BIG, …): no CLI, so no exit callback will close the proxy.
      release()
      throw err
    }
  }
}
