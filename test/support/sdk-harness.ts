/**
 * Conformance harness: the real `@anthropic-ai/claude-agent-sdk` driving
 * either the real CLI spawned directly (`pathToClaudeCodeExecutable` = the
 * pinned binary) or `claude-remote` → gateway (Redis store, real CLI,
 * sandboxed as by default) → the same Messages API stand-in. One world per
 * test file: one stand-in, one scratch, one gateway started on first use.
 *
 *   const w = new SdkWorld()
 *   const run = await w.start('direct', { canUseTool })
 *   run.send('Say hello')
 *   await run.waitFor(isResult)
 *   await run.finish()                      // ends the input, waits for query() to end
 *   normaliseMessages(run.messages, w.paths(run))
 */
import { existsSync, mkdirSync, readFileSync, readdirSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { randomUUID } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { type CanUseTool, type Options, type Query, type SDKMessage, type SDKUserMessage, query } from '@anthropic-ai/claude-agent-sdk'
import { type E2e, type Scratch, TENANT, WAIT_MS, makeScratch, startE2e } from './e2e.js'
import { TOKEN_A } from './gateway.js'
import { type MockAnthropic, claudeEnv, resolveClaudeBin, startMockAnthropic } from './mock-anthropic.js'
import { REDIS_URL } from './redis-server.js'
import { Waiters } from './waiters.js'

export type Mode = 'direct' | 'remote'

const REPO_ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)))

/** The `claude-remote` entry of package.json `bin`, or why it can't run yet. */
export function remoteBin (): { bin: string } | { missing: string } {
  const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { bin?: string | Record<string, string> }
  const entry = typeof pkg.bin === 'object' ? pkg.bin['claude-remote'] : undefined
  if (entry === undefined) return { missing: 'claude-remote is not there yet: no "claude-remote" in package.json bin (issue 12, helper "remote")' }
  const bin = resolve(REPO_ROOT, entry)
  if (!existsSync(bin)) return { missing: `package.json bin claude-remote → ${entry} does not exist (not built?)` }
  if (!existsSync(join(REPO_ROOT, 'src', 'remote'))) return { missing: 'src/remote/ is not there yet' }
  return { bin }
}

/** The `todo` reason for a remote case, or undefined when it runs for real. */
export function remoteTodo (known?: string): string | undefined {
  const r = remoteBin()
  if ('missing' in r) return r.missing
  return known
}

/** A prompt stream for query(): send() user messages, end() closes the CLI's stdin. */
export class PromptQueue implements AsyncIterable<SDKUserMessage> {
  readonly #items: SDKUserMessage[] = []
  #ended = false
  #wake: (() => void) | undefined

  send (text: string): void {
    this.#items.push({ type: 'user', message: { role: 'user', content: text }, parent_tool_use_id: null })
    this.#wake?.()
  }

  end (): void {
    this.#ended = true
    this.#wake?.()
  }

  async * [Symbol.asyncIterator] (): AsyncIterator<SDKUserMessage> {
    for (;;) {
      const next = this.#items.shift()
      if (next !== undefined) { yield next; continue }
      if (this.#ended) return
      await new Promise<void>((resolve) => { this.#wake = resolve })
      this.#wake = undefined
    }
  }
}

/**
 * Allows every tool as asked. Passing a canUseTool makes the SDK start the CLI
 * with `--permission-prompt-tool stdio`, as the gateway always does.
 */
export const allowAll: CanUseTool = async (_name, input) => ({ behavior: 'allow', updatedInput: input })

export const isResult = (m: SDKMessage): boolean => m.type === 'result'
export const isInit = (m: SDKMessage): boolean => m.type === 'system' && m.subtype === 'init'

/** One query(): its messages as they come, and a way to wait for one. */
export class SdkRun {
  readonly messages: SDKMessage[] = []
  readonly input = new PromptQueue()
  readonly q: Query
  readonly mode: Mode
  /** The local folder the SDK was given as cwd (direct: where the CLI works). */
  readonly cwd: string
  readonly stderr: string[] = []
  error: unknown
  readonly #waiters = new Waiters()
  #ended = false
  readonly #done: Promise<void>

  constructor (mode: Mode, cwd: string, options: Options) {
    this.mode = mode
    this.cwd = cwd
    const q = query({ prompt: this.input, options: { ...options, stderr: (d) => { this.stderr.push(d) } } })
    this.q = q
    this.#done = (async () => {
      try {
        for await (const m of q) { this.messages.push(m); this.#waiters.wake() }
      } catch (err) {
        this.error = err
      } finally {
        this.#ended = true
        this.#waiters.wake()
      }
    })()
  }

  send (text: string): void { this.input.send(text) }

  /** The first message from index `from` matching `pred`; fails at once if query() ended first. */
  async waitFor (pred: (m: SDKMessage) => boolean, from = 0, timeoutMs = WAIT_MS): Promise<SDKMessage> {
    const found = await this.#waiters.until(
      () => this.messages.slice(from).find(pred) ?? (this.#ended ? null : undefined),
      timeoutMs, `an SDK message matching ${pred.toString()}`, () => this.describe())
    if (found === null) throw new Error(`query() ended before a message matching ${pred.toString()}; ${this.describe()}`)
    return found
  }

  /** The n-th result (1-based), for multi-turn runs. */
  async result (n = 1): Promise<SDKMessage & { type: 'result' }> {
    await this.#waiters.until(() => this.messages.filter(isResult).length >= n || (this.#ended ? true : undefined),
      WAIT_MS, `result #${n}`, () => this.describe())
    const r = this.messages.filter(isResult)[n - 1]
    if (r === undefined) throw new Error(`query() ended after ${this.messages.filter(isResult).length} results; ${this.describe()}`)
    return r as SDKMessage & { type: 'result' }
  }

  /**
   * Ends the input (the CLI's stdin) and waits for query() to finish. An
   * error query() threw stays in `error` (the SDK throws after a CLI that
   * exits 1, e.g. when its last result was an error): pass `ok` to fail on it.
   */
  async finish (opts: { ok?: boolean } = {}, timeoutMs = WAIT_MS): Promise<SDKMessage[]> {
    this.input.end()
    await this.#waiters.until(() => this.#ended || undefined, timeoutMs, 'query() to end', () => this.describe())
    await this.#done
    if (opts.ok === true && this.error !== undefined) throw new Error(`query() failed: ${String(this.error)}; ${this.describe()}`)
    return this.messages
  }

  /** Stops the run whatever its state (cleanup). */
  async abort (): Promise<void> {
    this.input.end()
    if (!this.#ended) this.q.close()
    await this.#done.catch(() => {})
  }

  get sessionId (): string | undefined {
    const init = this.messages.find(isInit) as { session_id?: string } | undefined
    return init?.session_id
  }

  /** The CLI's own working folder, as its system/init says. */
  get cliCwd (): string | undefined {
    return (this.messages.find(isInit) as { cwd?: string } | undefined)?.cwd
  }

  describe (): string {
    const seq = this.messages.map((m) => 'subtype' in m && typeof m.subtype === 'string' ? `${m.type}/${m.subtype}` : m.type).join(' ')
    const err = this.error === undefined ? '' : ` error: ${String(this.error)};`
    return `${this.mode} messages: [${seq}];${err} stderr tail: ${this.stderr.join('').slice(-1500)}`
  }
}

export class SdkWorld {
  readonly scratch: Scratch = makeScratch()
  #mock: MockAnthropic | undefined
  #e2e: Promise<E2e> | undefined
  readonly #runs: SdkRun[] = []

  async mock (): Promise<MockAnthropic> {
    this.#mock ??= await startMockAnthropic()
    return this.#mock
  }

  /** The gateway (real CLI, sandboxed, Redis store), started on first use. */
  gateway (): Promise<E2e> {
    this.#e2e ??= (async () => startE2e({
      scratch: this.scratch,
      mock: await this.mock(),
      env: { REDIS_URL, REDIS_PREFIX: `cgw-sdk-${randomUUID()}:` }
    }))()
    return this.#e2e
  }

  /** A fresh local folder for one run (direct: the CLI's cwd). */
  folder (name: string): string {
    const dir = join(this.scratch.root, 'w', `${name}-${randomUUID().slice(0, 8)}`)
    mkdirSync(dir, { recursive: true })
    return dir
  }

  async options (mode: Mode, extra: Options = {}): Promise<{ cwd: string, options: Options }> {
    const mock = await this.mock()
    const cwd = this.folder(mode)
    if (mode === 'direct') {
      const env = claudeEnv({ home: join(this.scratch.root, 'dh'), baseUrl: mock.url }) as Record<string, string>
      return { cwd, options: { pathToClaudeCodeExecutable: resolveClaudeBin(), cwd, env, ...extra } }
    }
    const found = remoteBin()
    if ('missing' in found) throw new Error(found.missing)
    const e = await this.gateway()
    // A TypeScript entry runs under tsx, resolved from this repository (the SDK spawns in `cwd`).
    const ts = found.bin.endsWith('.ts')
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '',
      HOME: join(this.scratch.root, 'rh'),
      CLAUDE_REMOTE_URL: e.gw.url,
      CLAUDE_REMOTE_TOKEN: TOKEN_A
    }
    mkdirSync(env.HOME as string, { recursive: true })
    return {
      cwd,
      options: {
        pathToClaudeCodeExecutable: found.bin,
        executable: 'node',
        executableArgs: ts ? ['--import', import.meta.resolve('tsx')] : [],
        cwd,
        env,
        ...extra
      }
    }
  }

  async start (mode: Mode, extra: Options = {}): Promise<SdkRun> {
    const { cwd, options } = await this.options(mode, extra)
    const run = new SdkRun(mode, cwd, options)
    this.#runs.push(run)
    return run
  }

  /** Where a file the CLI's tools made in this run lives on this machine. */
  async fileInRun (run: SdkRun, name: string): Promise<string | undefined> {
    const candidates: string[] = []
    if (run.cliCwd !== undefined) candidates.push(join(run.cliCwd, name))
    if (run.mode === 'direct') candidates.push(join(run.cwd, name))
    else {
      const e = await this.gateway()
      if (run.sessionId !== undefined) candidates.push(join(e.workspace(run.sessionId), name))
      const root = join(this.scratch.dataDir, 'workspaces', TENANT)
      if (existsSync(root)) for (const id of readdirSync(root)) candidates.push(join(root, id, name))
    }
    return candidates.find((c) => existsSync(c))
  }

  /** Folders whose text is replaced by placeholders before comparing runs. */
  paths (run: SdkRun): Record<string, string> {
    const out: Record<string, string> = { [this.scratch.root]: '<scratch>' }
    if (run.cliCwd !== undefined) out[run.cliCwd] = '<cwd>'
    out[run.cwd] = '<cwd>'
    return out
  }

  async close (): Promise<void> {
    for (const r of this.#runs) await r.abort()
    const e = await this.#e2e?.catch(() => undefined)
    try {
      await e?.close()
    } finally {
      await this.#mock?.close()
      this.scratch.remove()
    }
  }
}
