/**
 * How a session's CLI is started from its record: its folder (on the host,
 * or checked here and created inside the sandbox), its command, arguments and
 * allowlisted environment, the folders the control policy confines it to,
 * and, with several nodes, how its conversation file goes to and from the
 * store. Paths and specs only: the CLI process module spawns.
 */
import { mkdirSync, realpathSync, watch } from 'node:fs'
import { homedir } from 'node:os'
import { join, resolve } from 'node:path'
import type { Logger } from 'pino'
import { buildCliArgs } from '../cli/cli-args.js'
import { buildCliEnv } from '../cli/cli-env.js'
import type { ApiCredential, CliSpawnSpec } from '../cli/cli-handle.js'
import type { PolicyScope } from '../control/control-policy.js'
import { GatewayError } from '../errors.js'
import type { SessionOptions } from '../protocol/session-options.js'
import type { EventStore, SessionRecord } from '../store/store.js'
import { type ConversationMark, advance, conversationPath, markOf, readConversation, readSince, writeConversation } from './conversation-file.js'
import type { SessionDeps } from './session.js'
import { sandboxWorkdir, sessionWorkspace } from './workspace.js'

/** What a plan reads (part of SessionManagerOptions). */
export interface CliPlanOptions {
  store: EventStore
  logger: Logger
  claudeBin: string
  claudeArgsExtra: string[]
  workspaceRoot: string
  /** Each tenant's CLI config dir is `<configRoot>/<tenant>` (CLAUDE_CONFIG_DIR); null leaves the CLI's default. */
  configRoot: string | null
  /**
   * SANDBOX=bwrap (and no launcher): specs carry the sandbox's folders and the
   * gateway never creates or resolves the tenant-chosen `cwd` on the host.
   */
  sandboxed?: boolean
  /** Operator command wrapping each CLI: gets `<workspace> <config dir> -- <cli> <args...>`. */
  launcher?: string | undefined
  /** Environment the CLI's allowlisted env is taken from (default: the gateway's). */
  env?: NodeJS.ProcessEnv
  /** CLI_ENV_ALLOW: names and prefixes passed to the CLI beyond the built-in list. */
  cliEnvAllow?: readonly string[]
  /** TENANT_API_KEYS: a listed tenant's CLIs get its key as ANTHROPIC_API_KEY, and no shared credential. */
  tenantApiKeys?: ReadonlyMap<string, string> | null
}

export class CliPlan {
  readonly #o: CliPlanOptions

  constructor (options: CliPlanOptions) {
    this.#o = options
  }

  /** Where this session's CLI keeps its conversation, and how it goes to and from the store. */
  conversationCarry (record: SessionRecord): NonNullable<SessionDeps['conversation']> {
    const env = this.#o.env ?? process.env
    const configDir = this.#o.configRoot !== null
      ? join(this.#o.configRoot, record.tenant)
      : env.CLAUDE_CONFIG_DIR ?? join(env.HOME ?? homedir(), '.claude')
    const store = this.#o.store
    // Where the stored copy ends, while it is known to be the file's start: a save then sends what is new.
    let mark: ConversationMark | null = null
    return {
      save: async (lease) => {
        if (mark !== null) {
          const grown = readSince(configDir, record.id, mark)
          if (grown !== null && grown.length === 0) return
          if (grown !== null && await store.appendConversation(record.id, mark.length, grown, lease)) {
            mark = advance(mark, grown)
            return
          }
        }
        const data = readConversation(configDir, record.id)
        if (data === null) return
        await store.saveConversation(record.id, data, lease)
        mark = markOf(data)
      },
      watch: (changed) => {
        const file = mark === null ? null : conversationPath(configDir, mark.project, record.id)
        if (file === null) return null
        try {
          const watcher = watch(file, { persistent: false }, changed)
          watcher.on('error', () => { watcher.close() }) // the file went: saves at steps and turn ends go on without it
          return () => { watcher.close() }
        } catch {
          return null
        }
      },
      restore: async () => {
        const stored = await store.loadConversation(record.id)
        mark = null
        if (stored !== null && writeConversation(configDir, record.id, stored)) {
          mark = markOf(stored)
          this.#o.logger.info({ session: record.id, bytes: stored.length }, 'conversation brought from the store for --resume')
        }
      }
    }
  }

  /** The session's folder (validating the tenant-chosen `cwd`); in the sandbox, only checked here (see sandboxWorkdir), created inside. */
  workspace (tenant: string, id: string, cwd: string | undefined): { cwd: string, sandbox?: { tenantRoot: string, workdir: string } } {
    if (this.#o.sandboxed !== true) return { cwd: sessionWorkspace(this.#o.workspaceRoot, tenant, id, cwd) }
    const place = sandboxWorkdir(this.#o.workspaceRoot, tenant, id, cwd)
    return { cwd: place.tenantRoot, sandbox: place }
  }

  /** The command, arguments, folder and environment of the session's CLI; `resume` adds `--resume`. */
  spawnSpec (record: SessionRecord, options: SessionOptions, resume: boolean): CliSpawnSpec {
    const { cwd, sandbox } = this.workspace(record.tenant, record.id, options.cwd)
    const args = buildCliArgs({ sessionId: record.id, resume, options, extra: this.#o.claudeArgsExtra })
    const configDir = this.#o.configRoot === null ? null : join(this.#o.configRoot, record.tenant)
    if (configDir !== null) mkdirSync(configDir, { recursive: true, mode: 0o700 })
    const overrides: Record<string, string> = configDir === null ? {} : { CLAUDE_CONFIG_DIR: configDir }
    if (options.entrypoint !== undefined) overrides.CLAUDE_CODE_ENTRYPOINT = options.entrypoint
    const env = buildCliEnv(this.#o.env ?? process.env, overrides, this.#o.cliEnvAllow)
    const ownKey = this.#o.tenantApiKeys?.get(record.tenant)
    if (ownKey !== undefined) {
      // Its own key alone: a shared token beside it would be sent too, on the operator's account.
      env.ANTHROPIC_API_KEY = ownKey
      delete env.ANTHROPIC_AUTH_TOKEN
    }
    if (sandbox !== undefined) {
      if (configDir === null) throw new GatewayError('cli_start_failed', 'the sandbox needs a tenant config dir')
      const { tenant } = record
      return {
        command: this.#o.claudeBin,
        args,
        cwd,
        env,
        sessionId: record.id,
        tenant,
        sandbox: { ...sandbox, configDir },
        apiCredential: () => this.apiCredential(tenant)
      }
    }
    const launcher = this.#o.launcher
    return launcher === undefined
      ? { command: this.#o.claudeBin, args, cwd, env, sessionId: record.id, tenant: record.tenant }
      : { command: launcher, args: [cwd, configDir ?? '', '--', this.#o.claudeBin, ...args], cwd, env, sessionId: record.id, tenant: record.tenant }
  }

  /**
   * The API credential a CLI of `tenant` gets if started now: its own key
   * (TENANT_API_KEYS) alone, else the shared key and token. Read anew each
   * time: a credential reload replaces both sources in place.
   */
  apiCredential (tenant: string): ApiCredential {
    const own = this.#o.tenantApiKeys?.get(tenant)
    if (own !== undefined) return { apiKey: own }
    const env = this.#o.env ?? process.env
    return { apiKey: env.ANTHROPIC_API_KEY, authToken: env.ANTHROPIC_AUTH_TOKEN }
  }

  /**
   * The tenant's root as configured and as its real path, and the session's
   * folder (real path when it exists), resolved when first read: the real
   * paths cost synchronous file-system calls (an lstat per path component),
   * and most checks never read them (a plain allow or deny of a prompt: every
   * answer asked for the scope, about 30 µs of the event loop each).
   */
  policyScope (record: SessionRecord, options: SessionOptions): PolicyScope {
    let resolved: PolicyScope | undefined
    const now = (): PolicyScope => {
      if (resolved !== undefined) return resolved
      const root = resolve(this.#o.workspaceRoot, record.tenant)
      const real = (path: string): string => { try { return realpathSync(path) } catch { return path } }
      resolved = { roots: [...new Set([root, real(root)])], cwd: real(resolve(root, options.cwd ?? record.id)) }
      return resolved
    }
    return {
      get roots () { return now().roots },
      get cwd () { return now().cwd }
    }
  }
}
