/**
 * Creates, finds and stops sessions. Sessions are loaded from the store on
 * demand, so after a gateway restart every stored session can be listed,
 * read, attached to and resumed; those whose CLI died with the old process
 * are marked stopped (`exit.reason: "lost"`) when first loaded.
 */
import { randomUUID } from 'node:crypto'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import type { Logger } from 'pino'
import { buildCliArgs } from '../cli/cli-args.js'
import { buildCliEnv } from '../cli/cli-env.js'
import type { CliLauncher, CliSpawnSpec } from '../cli/cli-handle.js'
import { GatewayError } from '../errors.js'
import type { SessionOptions } from '../protocol/session-options.js'
import type { EventStore, SessionPage, SessionRecord } from '../store/store.js'
import { Session, type SessionLimits } from './session.js'
import { sessionWorkspace } from './workspace.js'

export interface SessionManagerOptions {
  store: EventStore
  launch: CliLauncher
  logger: Logger
  claudeBin: string
  claudeArgsExtra: string[]
  workspaceRoot: string
  maxSessions: number
  maxSessionsPerTenant: number
  allowBypassPermissions: boolean
  /** Each tenant's CLI config dir is `<configRoot>/<tenant>` (CLAUDE_CONFIG_DIR); null leaves the CLI's default. */
  configRoot: string | null
  /** Operator command wrapping each CLI: gets `<workspace> <config dir> -- <cli> <args...>`. */
  launcher?: string | undefined
  limits: SessionLimits
  /** Environment the CLI's allowlisted env is taken from. */
  env?: NodeJS.ProcessEnv
}

export class SessionManager {
  readonly #o: SessionManagerOptions
  readonly #sessions = new Map<string, Session>()
  readonly #loading = new Map<string, Promise<Session | null>>()
  readonly #running = new Set<Session>()
  #closing = false

  constructor (options: SessionManagerOptions) {
    this.#o = options
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
    if (options.permission_mode === 'bypassPermissions' && !this.#o.allowBypassPermissions) throw new GatewayError('bypass_not_allowed')
    const refused = this.#admit(tenant)
    if (refused !== null) throw refused
    const id = randomUUID()
    sessionWorkspace(this.#o.workspaceRoot, tenant, id, options.cwd) // validates cwd before anything is stored
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
    await this.#o.store.putSession(record)
    const session = this.#instantiate(record)
    const failed = session.start()
    if (failed !== null) throw failed
    return session
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
    return this.#o.store.listSessions(tenant, { limit, cursor })
  }

  /**
   * Marks sessions left running by a previous gateway process as stopped.
   * Assumes one gateway per store (see docs/ARCHITECTURE.md, scale-out).
   */
  async recover (): Promise<number> {
    const live = await this.#o.store.listLive()
    for (const record of live) await this.get(record.id, record.tenant)
    return live.length
  }

  /** Stops every CLI and flushes every log (gateway shutdown). */
  async shutdown (graceMs: number): Promise<void> {
    this.#closing = true
    await Promise.all([...this.#sessions.values()].map((s) => s.close(graceMs)))
  }

  async #load (id: string): Promise<Session | null> {
    const record = await this.#o.store.getSession(id)
    if (record === null) return null
    const existing = this.#sessions.get(id)
    if (existing !== undefined) return existing
    // Events written after the record's last save are in the store: continue after them.
    let last = record.last_seq
    for (;;) {
      const page = await this.#o.store.read(id, last, 1000)
      if (page.length === 0) break
      last = (page[page.length - 1] as { seq: number }).seq
    }
    record.last_seq = last
    const lost = record.status !== 'stopped' && record.status !== 'exited'
    if (lost) {
      // Its CLI belonged to a gateway process that is gone.
      record.status = 'stopped'
      record.exit = { code: null, signal: null, stderr_tail: [], reason: 'lost', at: new Date().toISOString() }
      await this.#o.store.putSession(record)
    }
    return this.#instantiate(record)
  }

  #instantiate (record: SessionRecord): Session {
    const options = record.options as SessionOptions
    const session = new Session(record, {
      store: this.#o.store,
      launch: this.#o.launch,
      logger: this.#o.logger,
      limits: this.#o.limits,
      admit: () => this.#closing ? new GatewayError('shutting_down') : this.#admit(record.tenant),
      onStatus: (s) => { if (s.running) this.#running.add(s); else this.#running.delete(s) },
      spawnSpec: (resume) => this.#spawnSpec(record, options, resume)
    })
    this.#sessions.set(record.id, session)
    return session
  }

  #spawnSpec (record: SessionRecord, options: SessionOptions, resume: boolean): CliSpawnSpec {
    const cwd = sessionWorkspace(this.#o.workspaceRoot, record.tenant, record.id, options.cwd)
    const args = buildCliArgs({ sessionId: record.id, resume, options, extra: this.#o.claudeArgsExtra })
    const configDir = this.#o.configRoot === null ? null : join(this.#o.configRoot, record.tenant)
    if (configDir !== null) mkdirSync(configDir, { recursive: true, mode: 0o700 })
    const env = buildCliEnv(this.#o.env ?? process.env, configDir === null ? {} : { CLAUDE_CONFIG_DIR: configDir })
    const launcher = this.#o.launcher
    return launcher === undefined
      ? { command: this.#o.claudeBin, args, cwd, env, sessionId: record.id }
      : { command: launcher, args: [cwd, configDir ?? '', '--', this.#o.claudeBin, ...args], cwd, env, sessionId: record.id }
  }

  #admit (tenant: string): GatewayError | null {
    if (this.#running.size >= this.#o.maxSessions) {
      return new GatewayError('too_many_sessions', `The gateway runs MAX_SESSIONS (${this.#o.maxSessions}) sessions already`)
    }
    let mine = 0
    for (const s of this.#running) if (s.tenant === tenant) mine++
    return mine >= this.#o.maxSessionsPerTenant
      ? new GatewayError('tenant_session_limit', `This tenant runs MAX_SESSIONS_PER_TENANT (${this.#o.maxSessionsPerTenant}) sessions already`)
      : null
  }
}
