/**
 * Creates, finds and stops sessions. Sessions are loaded from the store on
 * demand, so after a gateway restart every stored session can be listed,
 * read, attached to and resumed; those whose CLI died with the old process
 * are marked stopped (`exit.reason: "lost"`) when first loaded, with a status
 * frame in their own log so every reader and follower learns it.
 *
 * The boundary between routes and the store: a store call that fails here
 * becomes `store_unavailable` (503), while sessions already loaded keep
 * answering from memory. When the store answers again after a lost
 * connection, every loaded session's record is written again (the store
 * may have lost it).
 */
import { randomUUID } from 'node:crypto'
import { mkdirSync, realpathSync, rmdirSync } from 'node:fs'
import { join, resolve } from 'node:path'
import type { Logger } from 'pino'
import { buildCliArgs } from '../cli/cli-args.js'
import { buildCliEnv } from '../cli/cli-env.js'
import type { CliLauncher, CliSpawnSpec } from '../cli/cli-handle.js'
import type { ControlPolicy, PolicyScope } from '../control/control-policy.js'
import { GatewayError } from '../errors.js'
import { type MetricsSink, noopMetrics } from '../metrics/sink.js'
import type { SessionOptions } from '../protocol/session-options.js'
import { type EventStore, type SessionPage, type SessionRecord, isFinal } from '../store/store.js'
import { Session, type SessionLimits } from './session.js'
import { sandboxWorkdir, sessionWorkspace } from './workspace.js'

export interface SessionManagerOptions {
  store: EventStore
  launch: CliLauncher
  logger: Logger
  claudeBin: string
  claudeArgsExtra: string[]
  workspaceRoot: string
  maxSessions: number
  maxSessionsPerTenant: number
  /** What clients may ask of the CLI: control requests, permission answers, granting session options. */
  policy: ControlPolicy
  /** Each tenant's CLI config dir is `<configRoot>/<tenant>` (CLAUDE_CONFIG_DIR); null leaves the CLI's default. */
  configRoot: string | null
  /**
   * SANDBOX=bwrap (and no launcher): specs carry the sandbox's folders and the
   * gateway never creates or resolves the tenant-chosen `cwd` on the host.
   */
  sandboxed?: boolean
  /** Operator command wrapping each CLI: gets `<workspace> <config dir> -- <cli> <args...>`. */
  launcher?: string | undefined
  limits: SessionLimits
  /** Environment the CLI's allowlisted env is taken from. */
  env?: NodeJS.ProcessEnv
  /** CLI_ENV_ALLOW: names and prefixes passed to the CLI beyond the built-in list. */
  cliEnvAllow?: readonly string[]
  /** What sessions count for /metrics (default: nothing). */
  metrics?: MetricsSink
}

export class SessionManager {
  readonly #o: SessionManagerOptions
  readonly #sessions = new Map<string, Session>()
  readonly #loading = new Map<string, Promise<Session | null>>()
  readonly #running = new Set<Session>()
  /** Creates past admission whose CLI is not running yet: id → tenant. The limits count them. */
  readonly #reserved = new Map<string, string>()
  #closing = false
  /** Given to every session; routes count what only they see (client frames) on it too. */
  readonly metrics: MetricsSink

  constructor (options: SessionManagerOptions) {
    this.#o = options
    this.metrics = options.metrics ?? noopMetrics
    options.store.onReconnect?.(() => { void this.#saveRecordsAgain() })
  }

  /** Sessions whose CLI is running (what MAX_SESSIONS limits). */
  get runningCount (): number { return this.#running.size }
  get loaded (): Iterable<Session> { return this.#sessions.values() }
  get degraded (): boolean {
    for (const s of this.#sessions.values()) if (s.degraded) return true
    return false
  }

  async create (tenant: string, options: SessionOptions): Promise<Session> {
    if (this.#closing) throw new GatewayError('shutting_down')
    const granted = this.#o.policy.checkSessionOptions(options) // permission_mode bypass, allowed_tools ["Bash"]
    if (granted !== null) throw new GatewayError(granted.code, granted.message)
    const refused = this.#admit(tenant)
    if (refused !== null) throw refused
    const id = randomUUID()
    const place = this.#workspace(tenant, id, options.cwd) // validates cwd before anything is stored
    // The slot is held from here, across the store write: concurrent creates see it and
    // are refused above, before they store a record they could not start.
    this.#reserved.set(id, tenant)
    try {
      return await this.#createReserved(id, tenant, options)
    } catch (err) {
      // Nothing was stored: no folder named after a session that does not exist is left either.
      if (err instanceof GatewayError && err.code === 'store_unavailable' && options.cwd === undefined && place.sandbox === undefined) {
        try { rmdirSync(place.cwd) } catch { /* not empty, or gone: leave it */ }
      }
      throw err
    } finally {
      this.#reserved.delete(id)
    }
  }

  async #createReserved (id: string, tenant: string, options: SessionOptions): Promise<Session> {
    const now = new Date().toISOString()
    const record: SessionRecord = {
      id,
      tenant,
      status: 'starting',
      created_at: now,
      updated_at: now,
      options: { ...options, metadata: undefined },
      metadata: options.metadata ?? null,
      last_seq: 0,
      resumable: false,
      exit: null
    }
    delete record.options.metadata
    // Before anything is instantiated: a failed write leaves no session behind, only the 503.
    await this.#stored('save a new session record', () => this.#o.store.putSession(record))
    const session = this.#instantiate(record)
    // Never throws: a spawn that fails (E2BIG, ENOENT) comes back as an error, the session already `exited`.
    const failed = session.start()
    // Counted as running from here (or not at all): the reservation is done.
    this.#reserved.delete(id)
    if (failed !== null) {
      await this.#recordFailedCreate(record, failed)
      throw failed
    }
    return session
  }

  /**
   * A create whose record is stored but whose CLI never started: the record
   * says so (exited, `spawn_failed`) instead of staying "starting", and the
   * next lookup loads that record.
   */
  async #recordFailedCreate (record: SessionRecord, failed: GatewayError): Promise<void> {
    this.#sessions.delete(record.id)
    const at = new Date().toISOString()
    const final: SessionRecord = {
      ...structuredClone(record),
      status: 'exited',
      updated_at: at,
      exit: { code: null, signal: null, stderr_tail: [], reason: 'spawn_failed', at, error: failed.message }
    }
    try {
      await this.#o.store.putSession(final)
    } catch (err) {
      this.#o.logger.error({ err, session: record.id }, 'could not record a failed create; its record says "starting" until the next restart marks it lost')
    }
  }

  /** The session if it exists and belongs to `tenant`; otherwise null (callers answer 404). */
  async get (id: string, tenant: string): Promise<Session | null> {
    let session: Session | null | undefined = this.#sessions.get(id)
    if (session === undefined) {
      let loading = this.#loading.get(id)
      if (loading === undefined) {
        loading = this.#load(id).finally(() => this.#loading.delete(id))
        this.#loading.set(id, loading)
      }
      session = await loading
    }
    return session !== null && session.tenant === tenant ? session : null
  }

  async list (tenant: string, limit: number, cursor?: string): Promise<SessionPage> {
    return await this.#stored('list sessions', () => this.#o.store.listSessions(tenant, { limit, cursor }))
  }

  /**
   * Marks sessions left running by a previous gateway process as stopped.
   * Assumes one gateway per store (see docs/ARCHITECTURE.md, scale-out).
   */
  async recover (): Promise<number> {
    const live = await this.#stored('list live sessions', () => this.#o.store.listLive())
    for (const record of live) {
      try {
        await this.get(record.id, record.tenant)
      } catch (err) {
        // Marked when first loaded instead (any later lookup loads it the same way).
        this.#o.logger.warn({ session: record.id, err: (err as Error).message }, 'could not mark a session left running as lost')
      }
    }
    return live.length
  }

  /** Stops every CLI and flushes every log (gateway shutdown). */
  async shutdown (graceMs: number): Promise<void> {
    this.#closing = true
    await Promise.all([...this.#sessions.values()].map((s) => s.close(graceMs)))
  }

  async #load (id: string): Promise<Session | null> {
    const record = await this.#stored('read a session record', () => this.#o.store.getSession(id))
    if (record === null) return null
    // app.ts wraps every store in SignedStore (MAC, schema, bypass gate). The policy runs again
    // here, as at create, so a record written under looser settings (bypass allowed, a wider
    // PERMISSION_BROAD_RULE_TOOLS) never starts a CLI the operator now forbids.
    const refused = this.#o.policy.checkSessionOptions(record.options as SessionOptions)
    if (refused !== null) {
      this.#o.logger.error({ session: id, reason: refused.message }, 'stored session options break the current policy; treated as absent')
      return null
    }
    const existing = this.#sessions.get(id)
    if (existing !== undefined) return existing
    // Events written after the record's last save are in the store: continue after them
    // (never below the record's own last_seq: the store may have lost or trimmed its log).
    const stored = await this.#stored('read a session log', () => this.#o.store.lastSeq(id))
    record.last_seq = Math.max(record.last_seq, stored ?? 0)
    const session = this.#instantiate(record)
    // Its CLI belonged to a gateway process that is gone: recorded like any other end
    // (a status frame in its log, then the record), so followers and resuming clients learn it.
    if (!isFinal(record.status)) await session.markLost()
    return session
  }

  /** A store call whose failure is answered 503 `store_unavailable` (logged here, without a stack). */
  async #stored<T> (what: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call()
    } catch (err) {
      if (err instanceof GatewayError) throw err
      this.#o.logger.warn({ error: err instanceof Error ? err.message : String(err) }, `event store unavailable: could not ${what}`)
      throw new GatewayError('store_unavailable')
    }
  }

  /** The store answers again after a lost connection and may have lost every record (Redis without persistence). */
  async #saveRecordsAgain (): Promise<void> {
    const sessions = [...this.#sessions.values()]
    if (sessions.length === 0) return
    this.#o.logger.info({ sessions: sessions.length }, 'event store reconnected: saving loaded session records again')
    await Promise.all(sessions.map(async (session) => {
      try {
        await session.persistRecord()
      } catch (err) {
        this.#o.logger.warn({ session: session.id, err: (err as Error).message }, 'saving a session record again failed')
      }
    }))
  }

  #instantiate (record: SessionRecord): Session {
    const options = record.options as SessionOptions
    const session = new Session(record, {
      store: this.#o.store,
      launch: this.#o.launch,
      logger: this.#o.logger,
      limits: this.#o.limits,
      admit: () => this.#closing ? new GatewayError('shutting_down') : this.#admit(record.tenant, record.id),
      onStatus: (s) => { if (s.running) this.#running.add(s); else this.#running.delete(s) },
      spawnSpec: (resume) => this.#spawnSpec(record, options, resume),
      policy: this.#o.policy,
      policyScope: () => this.#policyScope(record, options),
      metrics: this.metrics
    })
    this.#sessions.set(record.id, session)
    return session
  }

  /** The session's folder; in the sandbox, only checked here (see sandboxWorkdir), created inside. */
  #workspace (tenant: string, id: string, cwd: string | undefined): { cwd: string, sandbox?: { tenantRoot: string, workdir: string } } {
    if (this.#o.sandboxed !== true) return { cwd: sessionWorkspace(this.#o.workspaceRoot, tenant, id, cwd) }
    const place = sandboxWorkdir(this.#o.workspaceRoot, tenant, id, cwd)
    return { cwd: place.tenantRoot, sandbox: place }
  }

  #spawnSpec (record: SessionRecord, options: SessionOptions, resume: boolean): CliSpawnSpec {
    const { cwd, sandbox } = this.#workspace(record.tenant, record.id, options.cwd)
    const args = buildCliArgs({ sessionId: record.id, resume, options, extra: this.#o.claudeArgsExtra })
    const configDir = this.#o.configRoot === null ? null : join(this.#o.configRoot, record.tenant)
    if (configDir !== null) mkdirSync(configDir, { recursive: true, mode: 0o700 })
    const overrides: Record<string, string> = configDir === null ? {} : { CLAUDE_CONFIG_DIR: configDir }
    if (options.entrypoint !== undefined) overrides.CLAUDE_CODE_ENTRYPOINT = options.entrypoint
    const env = buildCliEnv(this.#o.env ?? process.env, overrides, this.#o.cliEnvAllow)
    if (sandbox !== undefined) {
      if (configDir === null) throw new GatewayError('cli_start_failed', 'the sandbox needs a tenant config dir')
      return { command: this.#o.claudeBin, args, cwd, env, sessionId: record.id, sandbox: { ...sandbox, configDir } }
    }
    const launcher = this.#o.launcher
    return launcher === undefined
      ? { command: this.#o.claudeBin, args, cwd, env, sessionId: record.id }
      : { command: launcher, args: [cwd, configDir ?? '', '--', this.#o.claudeBin, ...args], cwd, env, sessionId: record.id }
  }

  /** The tenant's root as configured and as its real path, and the session's folder (real path when it exists). */
  #policyScope (record: SessionRecord, options: SessionOptions): PolicyScope {
    const root = resolve(this.#o.workspaceRoot, record.tenant)
    const real = (path: string): string => { try { return realpathSync(path) } catch { return path } }
    const roots = [...new Set([root, real(root)])]
    return { roots, cwd: real(resolve(root, options.cwd ?? record.id)) }
  }

  /** Refuses a start past MAX_SESSIONS / MAX_SESSIONS_PER_TENANT, counting reserved creates but `self`'s own. */
  #admit (tenant: string, self?: string): GatewayError | null {
    let reserved = 0
    let mine = 0
    for (const [id, owner] of this.#reserved) {
      if (id === self) continue
      reserved++
      if (owner === tenant) mine++
    }
    if (this.#running.size + reserved >= this.#o.maxSessions) {
      return new GatewayError('too_many_sessions', `The gateway runs MAX_SESSIONS (${this.#o.maxSessions}) sessions already`)
    }
    for (const s of this.#running) if (s.tenant === tenant) mine++
    return mine >= this.#o.maxSessionsPerTenant
      ? new GatewayError('tenant_session_limit', `This tenant runs MAX_SESSIONS_PER_TENANT (${this.#o.maxSessionsPerTenant}) sessions already`)
      : null
  }
}
