/**
 * The gateway's sandbox setting in one place, for app.ts: whether CLIs run
 * sandboxed (SANDBOX=bwrap and no CLAUDE_LAUNCHER), the launcher that does
 * it, the start-up check (probe, or the warning that CLIs run unconfined),
 * and the cleanup of the proxies' socket folder.
 */
import { mkdtempSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import type { Logger } from 'pino'
import type { CliLauncher } from '../cli/cli-handle.js'
import type { MetricsSink } from '../metrics/sink.js'
import { ConfigError, type Config } from '../config.js'
import { systemMounts } from './bwrap-spec.js'
import { defaultDestinations, destinationText } from './destinations.js'
import { type ProbeRunner, findTools, probeSandbox } from './probe.js'
import { sandboxedLauncher } from './sandboxed-launcher.js'

export interface GatewaySandboxOptions {
  /** Starts a CLI from a spawn spec (CliProcess in production). */
  inner: CliLauncher
  logger: Logger
  /** The environment the CLI's own is taken from (for ANTHROPIC_BASE_URL). */
  cliEnv: NodeJS.ProcessEnv
  /** Runs the start-up probe; false skips it (tests that inject their own parts). */
  probe: ProbeRunner | false
  /** Counts what the CLIs' egress proxies refuse. */
  metrics?: MetricsSink
}

export interface GatewaySandbox {
  /** True when every CLI runs in a bwrap sandbox. */
  readonly active: boolean
  readonly launch: CliLauncher
  /** At start: probes the sandbox (throws ConfigError when it cannot run) or warns that CLIs run unconfined. */
  start: () => Promise<void>
  close: () => void
}

export function gatewaySandbox (config: Config, options: GatewaySandboxOptions): GatewaySandbox {
  const { logger } = options
  if (config.sandbox === 'none' || config.claudeLauncher !== undefined) {
    return {
      active: false,
      launch: options.inner,
      start: async () => {
        if (config.claudeLauncher !== undefined) {
          logger.info({ launcher: config.claudeLauncher }, 'CLIs run through CLAUDE_LAUNCHER; SANDBOX is not used')
        } else {
          logger.warn({ allowUnsandboxed: config.allowUnsandboxed },
            'SANDBOX=none: CLIs and their tools run unconfined, as the gateway\'s user (they can read its environment in /proc, reach Redis and every tenant\'s files)')
        }
      },
      close: () => {}
    }
  }

  const tools = findTools()
  const system = systemMounts()
  const realCli = realCliPath(config.claudeBin)
  const cliDir = realCli === null ? null : dirname(realCli)
  const egress = config.sandboxEgress ?? defaultDestinations(options.cliEnv)
  let socketDir: string | null = null
  let launcher: CliLauncher | null = null
  const launch: CliLauncher = (spec, callbacks) => {
    // Made at the first session: short and private (0700), as proxy socket paths must fit in 107 bytes.
    socketDir ??= mkdtempSync(join(tmpdir(), 'cgw-egress-'))
    launcher ??= sandboxedLauncher(options.inner, {
      bwrap: tools.bwrap ?? 'bwrap',
      socat: tools.socat ?? 'socat',
      system,
      cliDir: cliDir ?? dirname(resolve(config.claudeBin)),
      egress,
      socketDir,
      credentials: config.sandboxCredentials,
      apiPaths: config.sandboxApiPaths,
      egressConnectionsPerTenant: config.sandboxEgressConnectionsPerTenant,
      pinUserSettings: !config.permissionUpdateDestinations.includes('userSettings'),
      strictMcpConfig: !config.clientMcpServerTypes.includes('stdio'),
      logger,
      metrics: options.metrics
    })
    // Only the CLI's real folder is mounted: run it by its real path, or a symlink on the way
    // (a linked node_modules, /usr/local/bin/claude → …) would not exist inside.
    return launcher(spec.command === config.claudeBin && realCli !== null ? { ...spec, command: realCli } : spec, callbacks)
  }

  return {
    active: true,
    launch,
    start: async () => {
      if (cliDir === null) throw new ConfigError(`invalid configuration:\n  CLAUDE_BIN: ${config.claudeBin} not found (the sandbox shows the CLI's real folder)`)
      if (options.probe !== false) {
        const problem = await probeSandbox(tools, system, options.probe)
        if (problem !== null) throw new ConfigError(`invalid configuration:\n  ${problem}`)
      }
      logger.info({ egress: egress.map(destinationText), credentials: config.sandboxCredentials, bwrap: tools.bwrap, socat: tools.socat },
        'SANDBOX=bwrap: every CLI runs in its own sandbox; network only through the egress proxy')
    },
    close: () => {
      if (socketDir !== null) rmSync(socketDir, { recursive: true, force: true })
    }
  }
}

/** The real path of the CLI binary (a name is looked up on PATH); null when it is not found. */
function realCliPath (bin: string): string | null {
  const candidates = bin.includes('/')
    ? [resolve(bin)]
    : (process.env.PATH ?? '').split(':').filter((d) => d !== '').map((d) => join(d, bin))
  for (const c of candidates) {
    try {
      return realpathSync(c)
    } catch {
      // not there
    }
  }
  return null
}
