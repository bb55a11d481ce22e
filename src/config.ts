/**
 * Configuration from environment variables: reads `<NAME>_FILE` secrets,
 * validates every setting with the schema of src/config/settings.ts, then
 * applies the start-up rules that join several settings. A bad value stops
 * the gateway at start with a message naming every variable at fault.
 */
import { readFileSync } from 'node:fs'
import { sep } from 'node:path'
import { isLoopback } from './net/loopback.js'
import { type Config, SECRET_FILE_VARIABLES, configSchema } from './config/settings.js'
import { ConfigError } from './config/values.js'

export { type Config, SECRET_FILE_VARIABLES } from './config/settings.js'
export { ConfigError, defaultClaudeBin, parseTokens, parseTrustProxy } from './config/values.js'

export interface LoadConfigOptions {
  /** Reads a `<NAME>_FILE` secret (default: the file system, as UTF-8). */
  readFile?: (path: string) => string
}

/** Reads and validates the environment; throws ConfigError listing every bad variable. */
export function loadConfig (env: NodeJS.ProcessEnv = process.env, options: LoadConfigOptions = {}): Config {
  const blanksRemoved = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''))
  const fromFiles = readSecretFiles(blanksRemoved, options.readFile ?? ((path) => readFileSync(path, 'utf8')))
  const parsed = configSchema.safeParse(blanksRemoved)
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => {
      const name = i.path.join('.')
      return `  ${fromFiles.has(name) ? `${name} (read from ${name}_FILE)` : name}: ${i.message}`
    })
    throw new ConfigError(`invalid configuration:\n${lines.join('\n')}`)
  }
  const config = parsed.data
  const problems = startupRules.map((rule) => rule(config)).filter((p) => p !== null)
  if (problems.length > 0) throw new ConfigError(`invalid configuration:\n${problems.map((p) => `  ${p}`).join('\n')}`)
  return config
}

/**
 * Rules that join several settings, each a problem (naming the variables)
 * or null. Every rule that can refuse a start from configuration alone is
 * here, so a bad deployment fails in loadConfig, not halfway through
 * building the app.
 */
const startupRules: Array<(config: Config) => string | null> = [
  headersTimeoutProblem,
  openHostProblem,
  unsandboxedProblem,
  dataDirProblem,
  metricsPortProblem,
  redisClusterProblem,
  cliCgroupProblem,
  tenantLimitsProblem
]

/** A parent for the CLIs' cgroups with no limit to put in them would look like limits that hold none. */
function cliCgroupProblem (config: Config): string | null {
  const set = [config.cliLimits, config.tenantLimits].some((l) => l.memoryBytes !== undefined || l.pids !== undefined || l.cpus !== undefined)
  if (config.cliCgroup === undefined || set) return null
  return 'CLI_CGROUP: set, but no limit to apply there (CLI_ or TENANT_ MEMORY_MAX_MB, PIDS_MAX or CPUS)'
}

/** A tenant's limit below one CLI's: that CLI's own limit could never be reached, which is not what was meant. */
function tenantLimitsProblem (config: Config): string | null {
  const names = { memoryBytes: 'MEMORY_MAX_MB', pids: 'PIDS_MAX', cpus: 'CPUS' } as const
  const below = (Object.keys(names) as Array<keyof typeof names>).filter((k) => {
    const cli = config.cliLimits[k]
    const tenant = config.tenantLimits[k]
    return cli !== undefined && tenant !== undefined && tenant < cli
  })
  if (below.length === 0) return null
  return below.map((k) => `TENANT_${names[k]}: below CLI_${names[k]} (all of a tenant's CLIs together may not have less than one of them)`).join('; ')
}

/** A cluster flag without a seed node would silently fall back to the in-memory store. */
function redisClusterProblem (config: Config): string | null {
  return config.redisCluster && config.redisUrl === undefined ? 'REDIS_CLUSTER: needs REDIS_URL (a seed node of the cluster)' : null
}

function headersTimeoutProblem (config: Config): string | null {
  if (config.requestTimeoutMs === 0 || config.headersTimeoutMs <= config.requestTimeoutMs) return null
  return 'HEADERS_TIMEOUT_MS: must not be greater than REQUEST_TIMEOUT_MS'
}

/**
 * Each tenant's root is `<WORKSPACE_ROOT>/<tenant>`, mounted read-write into
 * its sandbox. With DATA_DIR at or under WORKSPACE_ROOT, a tenant named after
 * a folder on the way (`data`, or `claude-config` when the two are equal)
 * would get the gateway's own data (pid files, the store secret, every
 * tenant's CLI config) as its workspace.
 */
function dataDirProblem (config: Config): string | null {
  const root = config.workspaceRoot
  const data = config.dataDir
  if (data !== root && !data.startsWith(root.endsWith(sep) ? root : root + sep)) return null
  return `WORKSPACE_ROOT: ${root} holds DATA_DIR (${data}); a tenant's workspace could then be the gateway's data. ` +
    'Put WORKSPACE_ROOT beside or inside DATA_DIR (the default is $DATA_DIR/workspaces)'
}

/**
 * With neither GATEWAY_TOKENS nor a JWT key the gateway makes up a token and
 * prints it to its terminal: fine for one person on this machine, not for a
 * listener others reach. Any configured credential (tokens or JWTs) will do.
 */
function openHostProblem (config: Config): string | null {
  if (isLoopback(config.host) || config.tokens !== null || config.jwt !== null) return null
  return `HOST: ${config.host} is not loopback; set GATEWAY_TOKENS (or GATEWAY_TOKENS_FILE) or JWT_SECRET/JWT_PUBLIC_KEY to listen beyond this machine`
}

/**
 * SANDBOX=none (with no CLAUDE_LAUNCHER) is for one tenant on this machine:
 * every tool then runs as the gateway's user, beside its secrets, Redis and
 * the other tenants' files. Anything wider needs ALLOW_UNSANDBOXED=true.
 */
function unsandboxedProblem (config: Config): string | null {
  if (config.sandbox !== 'none' || config.claudeLauncher !== undefined || config.allowUnsandboxed) return null
  const why: string[] = []
  const tenants = new Set(config.tokens?.values() ?? [])
  if (tenants.size > 1) why.push(`GATEWAY_TOKENS names ${tenants.size} tenants`)
  if (config.jwt !== null) why.push('JWT_SECRET/JWT_PUBLIC_KEY lets any tenant in')
  if (!isLoopback(config.host)) why.push(`HOST ${config.host} is not loopback`)
  if (why.length === 0) return null
  return `SANDBOX: none runs every tool unconfined, but ${why.join(' and ')}; ` +
    'use SANDBOX=bwrap (or a CLAUDE_LAUNCHER), or set ALLOW_UNSANDBOXED=true to accept the risk'
}

/**
 * A separate metrics listener on the main port would fail to bind after the
 * app is built; and it has no credential of its own but METRICS_TOKEN, so
 * beyond loopback it needs one (as the main listener needs tokens).
 */
function metricsPortProblem (config: Config): string | null {
  if (config.metricsPort === 0) return null
  if (config.metricsPort === config.port) return `METRICS_PORT: ${config.metricsPort} is PORT too; set METRICS_PORT=0 to serve /metrics on PORT, or another port`
  if (config.metricsToken === null && !isLoopback(config.host)) return `METRICS_PORT: a separate metrics listener on ${config.host} (not loopback) needs METRICS_TOKEN (or METRICS_TOKEN_FILE)`
  return null
}

/**
 * Replaces each `<NAME>_FILE` of SECRET_FILE_VARIABLES in `env` (blanks
 * already removed) by `<NAME>` holding the file's content, one trailing
 * newline trimmed. Both set, or an unreadable file, is a ConfigError naming
 * the variables. Returns the names that came from files.
 */
function readSecretFiles (env: Record<string, string | undefined>, readFile: (path: string) => string): Set<string> {
  const problems: string[] = []
  const fromFiles = new Set<string>()
  for (const name of SECRET_FILE_VARIABLES) {
    const path = env[`${name}_FILE`]
    delete env[`${name}_FILE`]
    if (path === undefined) continue
    if (env[name] !== undefined) {
      problems.push(`  ${name}, ${name}_FILE: both are set; set one`)
      continue
    }
    let text: string
    try {
      text = readFile(path)
    } catch (err) {
      problems.push(`  ${name}_FILE: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`)
      continue
    }
    const value = text.replace(/\r?\n$/, '')
    // An empty file is a mistake (a secret not yet written), not "unset".
    if (value === '') {
      problems.push(`  ${name}_FILE: ${path} is empty`)
      continue
    }
    env[name] = value
    fromFiles.add(name)
  }
  if (problems.length > 0) throw new ConfigError(`invalid configuration:\n${problems.join('\n')}`)
  return fromFiles
}
