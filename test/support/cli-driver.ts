// Drives the real `claude` CLI over its stream-json stdin/stdout protocol:
// spawn it (own process group), write NDJSON lines, wait for stdout messages
// matching a predicate with a deadline, close stdin, collect the exit — and
// keep a timed log in the reference transcript format ({"t_ms","dir","raw"}).
//
//   const cli = spawnClaude({ cwd, env: claudeEnv({ home, baseUrl: mock.url }), sessionId })
//   try {
//     await cli.initialize()
//     cli.sendUser('Say hello')
//     const result = await cli.waitFor(isResult)
//   } finally {
//     await cli.close()        // closes stdin, waits for exit, kills the group if it hangs
//   }
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import { onTestExit } from './exit-hooks.js'
import { resolveClaudeBin } from './mock-anthropic.js'

// ---------------------------------------------------------------- types

export type LogDir = 'stdin' | 'stdout' | 'stderr' | 'stdin-eof' | 'exit' | 'driver'

/** One line of a `<name>.session.jsonl` transcript. */
export interface SessionEntry {
  t_ms: number
  dir: LogDir
  raw: string
}

/** A parsed stdout/stdin message. Fields beyond type/subtype are left loose on purpose. */
export interface CliMessage {
  type?: string
  subtype?: string
  [key: string]: unknown
}

export interface CanUseToolRequest extends CliMessage {
  type: 'control_request'
  request_id: string
  request: {
    subtype: 'can_use_tool'
    tool_name: string
    input: Record<string, unknown>
    tool_use_id?: string
    [key: string]: unknown
  }
}

export interface StdoutLine {
  index: number
  t_ms: number
  raw: string
  /** undefined if the line was not JSON. */
  msg: CliMessage | undefined
}

export interface ExitInfo {
  code: number | null
  signal: NodeJS.Signals | null
}

export interface SpawnClaudeOptions {
  cwd: string
  env: NodeJS.ProcessEnv
  /** Default: resolveClaudeBin(). */
  bin?: string
  /** --session-id <uuid> */
  sessionId?: string
  /** --resume <uuid> (takes precedence over sessionId) */
  resume?: string
  /** --include-partial-messages */
  includePartialMessages?: boolean
  /** Appended after the standard arguments. */
  extraArgs?: string[]
  /** Replace the standard arguments entirely. */
  args?: string[]
  /** Hard deadline for the whole process: the group gets SIGKILL after this. Default 120 s. */
  deadlineMs?: number
}

export interface WaitOptions {
  /** Default 30 s. */
  timeoutMs?: number
  /** First stdout line index to look at (see mark()). Default 0. */
  from?: number
  /** Shown in the timeout error. */
  what?: string
}

// ---------------------------------------------------------------- message builders

export const STANDARD_ARGS = ['--output-format', 'stream-json', '--verbose', '--input-format', 'stream-json', '--permission-prompt-tool', 'stdio'] as const

export function claudeArgs(opts: Pick<SpawnClaudeOptions, 'sessionId' | 'resume' | 'includePartialMessages' | 'extraArgs'> = {}): string[] {
  const args: string[] = [...STANDARD_ARGS]
  if (opts.resume) args.push('--resume', opts.resume)
  else if (opts.sessionId) args.push('--session-id', opts.sessionId)
  if (opts.includePartialMessages) args.push('--include-partial-messages')
  args.push(...(opts.extraArgs ?? []))
  return args
}

export function userMessage(text: string): CliMessage {
  return { type: 'user', session_id: '', message: { role: 'user', content: [{ type: 'text', text }] }, parent_tool_use_id: null }
}

export function controlRequest(requestId: string, subtype: string, fields: Record<string, unknown> = {}): CliMessage {
  return { request_id: requestId, type: 'control_request', request: { subtype, ...fields } }
}

export function initializeRequest(requestId: string): CliMessage {
  return controlRequest(requestId, 'initialize', { systemPrompt: [''] })
}

/** Allow answer as the TS SDK sends it: updatedInput (default: the request's input) and toolUseID. */
export function allowResponse(req: CanUseToolRequest, updatedInput?: Record<string, unknown>): CliMessage {
  const response: Record<string, unknown> = { behavior: 'allow', updatedInput: updatedInput ?? req.request.input }
  if (req.request.tool_use_id) response.toolUseID = req.request.tool_use_id
  return { type: 'control_response', response: { subtype: 'success', request_id: req.request_id, response } }
}

export function denyResponse(req: CanUseToolRequest, message: string, opts: { interrupt?: boolean } = {}): CliMessage {
  const response: Record<string, unknown> = { behavior: 'deny', message }
  if (opts.interrupt) response.interrupt = true
  if (req.request.tool_use_id) response.toolUseID = req.request.tool_use_id
  return { type: 'control_response', response: { subtype: 'success', request_id: req.request_id, response } }
}

// ---------------------------------------------------------------- predicates

function field(obj: unknown, key: string): unknown {
  return obj !== null && typeof obj === 'object' ? (obj as Record<string, unknown>)[key] : undefined
}

export const isResult = (m: CliMessage): boolean => m.type === 'result'
export const isInit = (m: CliMessage): boolean => m.type === 'system' && m.subtype === 'init'
export const isCanUseTool = (m: CliMessage): m is CanUseToolRequest => m.type === 'control_request' && field(m.request, 'subtype') === 'can_use_tool'
export const isControlResponseFor =
  (requestId: string) =>
  (m: CliMessage): boolean =>
    m.type === 'control_response' && field(m.response, 'request_id') === requestId
export const isSessionState =
  (state: string) =>
  (m: CliMessage): boolean =>
    m.type === 'system' && m.subtype === 'session_state_changed' && m.state === state

// ---------------------------------------------------------------- the process

const live = new Set<CliProcess>()
let exitHookInstalled = false

function installExitHook(): void {
  if (exitHookInstalled) return
  exitHookInstalled = true
  onTestExit(() => {
    for (const p of live) p.killGroup('SIGKILL')
  })
}

export class CliProcess {
  readonly child: ChildProcessWithoutNullStreams
  readonly pid: number
  readonly args: string[]
  readonly bin: string
  /** Everything, timed, in arrival order. */
  readonly log: SessionEntry[] = []
  /** Complete stdout lines (split on \n only). */
  readonly lines: StdoutLine[] = []
  /** Resolves when the process has exited and its stdout/stderr are drained. */
  readonly exited: Promise<ExitInfo>
  exitInfo: ExitInfo | undefined

  private readonly t0 = performance.now()
  private readonly stdoutChunks: Buffer[] = []
  private readonly stdinChunks: Buffer[] = []
  private readonly stderrChunks: Buffer[] = []
  private partial: Buffer = Buffer.alloc(0)
  private stdinClosed = false
  private waiters = new Set<{ check: () => boolean; fail: (err: Error) => void }>()
  private deadline: NodeJS.Timeout | undefined
  private requestCounter = 0

  constructor(opts: SpawnClaudeOptions) {
    this.bin = opts.bin ?? resolveClaudeBin()
    this.args = opts.args ?? claudeArgs(opts)
    this.child = spawn(this.bin, this.args, {
      cwd: opts.cwd,
      env: opts.env,
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true // own process group: kill(-pid) reaches the tools it runs too
    })
    if (this.child.pid === undefined) throw new Error(`failed to spawn ${this.bin}`)
    this.pid = this.child.pid
    live.add(this)
    installExitHook()
    this.child.stdin.on('error', (err) => this.note(`stdin error: ${err.message}`))
    this.child.stdout.on('data', (c: Buffer) => this.onStdout(c))
    this.child.stderr.on('data', (c: Buffer) => {
      this.stderrChunks.push(c)
      this.push('stderr', c.toString('utf8'))
    })
    this.exited = new Promise<ExitInfo>((resolve) => {
      let done = false
      const finish = (code: number | null, signal: NodeJS.Signals | null): void => {
        if (done) return
        done = true
        if (this.partial.length > 0) this.onLine(this.partial)
        this.partial = Buffer.alloc(0)
        this.exitInfo = { code, signal }
        this.push('exit', JSON.stringify({ code, signal }))
        live.delete(this)
        if (this.deadline) clearTimeout(this.deadline)
        this.checkWaiters()
        resolve(this.exitInfo)
      }
      this.child.on('close', (code, signal) => finish(code, signal))
      this.child.on('exit', (code, signal) => {
        // A grandchild may hold stdout open after the CLI died: do not wait for ever.
        setTimeout(() => finish(code, signal), 3000).unref()
      })
      this.child.on('error', (err) => {
        this.note(`spawn error: ${err.message}`)
        finish(null, null)
      })
    })
    const deadlineMs = opts.deadlineMs ?? 120_000
    this.deadline = setTimeout(() => {
      this.note(`deadline of ${deadlineMs} ms reached: SIGKILL to the process group`)
      this.killGroup('SIGKILL')
    }, deadlineMs)
    this.deadline.unref()
  }

  /** ms since spawn */
  now(): number {
    return Math.round(performance.now() - this.t0)
  }

  private push(dir: LogDir, raw: string): void {
    this.log.push({ t_ms: this.now(), dir, raw })
  }

  /** Add a `driver` note to the log. */
  note(text: string): void {
    this.push('driver', text)
  }

  private onStdout(chunk: Buffer): void {
    this.stdoutChunks.push(chunk)
    let buf = this.partial.length > 0 ? Buffer.concat([this.partial, chunk]) : chunk
    let nl: number
    while ((nl = buf.indexOf(0x0a)) !== -1) {
      this.onLine(buf.subarray(0, nl))
      buf = buf.subarray(nl + 1)
    }
    this.partial = Buffer.from(buf)
    this.checkWaiters()
  }

  private onLine(bytes: Buffer): void {
    const raw = bytes.toString('utf8')
    const t = this.now()
    this.log.push({ t_ms: t, dir: 'stdout', raw })
    let msg: CliMessage | undefined
    try {
      const parsed: unknown = JSON.parse(raw)
      if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) msg = parsed as CliMessage
    } catch {
      msg = undefined
    }
    this.lines.push({ index: this.lines.length, t_ms: t, raw, msg })
  }

  /** Parsed stdout messages so far. */
  messages(): CliMessage[] {
    return this.lines.flatMap((l) => (l.msg ? [l.msg] : []))
  }

  /** Current stdout line count: pass as `from` to wait only for later lines. */
  mark(): number {
    return this.lines.length
  }

  stdoutBytes(): Buffer {
    return Buffer.concat(this.stdoutChunks)
  }

  stdinBytes(): Buffer {
    return Buffer.concat(this.stdinChunks)
  }

  stderrText(): string {
    return Buffer.concat(this.stderrChunks).toString('utf8')
  }

  get running(): boolean {
    return this.exitInfo === undefined
  }

  /** Write exactly these bytes to stdin (for malformed-input experiments). */
  writeRaw(data: string): void {
    if (this.stdinClosed) throw new Error('stdin already closed')
    const buf = Buffer.from(data, 'utf8')
    this.stdinChunks.push(buf)
    for (const line of data.split('\n')) if (line !== '') this.push('stdin', line)
    this.child.stdin.write(buf)
  }

  /** Serialise and write one NDJSON line. */
  send(msg: CliMessage): void {
    this.writeRaw(`${JSON.stringify(msg)}\n`)
  }

  sendUser(text: string): void {
    this.send(userMessage(text))
  }

  /** A fresh request id in the reference transcripts' style: req_<n>_drv. */
  nextRequestId(): string {
    return `req_${++this.requestCounter}_drv`
  }

  /** Send a control_request and wait for its control_response (returned whole). */
  async request(subtype: string, fields: Record<string, unknown> = {}, opts: WaitOptions = {}): Promise<CliMessage> {
    const id = this.nextRequestId()
    const from = this.mark()
    this.send(controlRequest(id, subtype, fields))
    return this.waitFor(isControlResponseFor(id), { what: `control_response to ${subtype} (${id})`, from, ...opts })
  }

  /** initialize handshake; resolves with the control_response. */
  initialize(opts: WaitOptions = {}): Promise<CliMessage> {
    return this.request('initialize', { systemPrompt: [''] }, { timeoutMs: 30_000, ...opts })
  }

  closeStdin(): void {
    if (this.stdinClosed) return
    this.stdinClosed = true
    this.push('stdin-eof', '')
    this.child.stdin.end()
  }

  /** Resolve with the first stdout message (at index >= from) matching pred. Rejects on timeout or exit. */
  waitFor<T extends CliMessage = CliMessage>(pred: ((m: CliMessage) => m is T) | ((m: CliMessage) => boolean), opts: WaitOptions = {}): Promise<T> {
    return this.waitForLine((l) => l.msg !== undefined && pred(l.msg), opts).then((l) => l.msg as T)
  }

  /** Like waitFor, on raw lines (non-JSON lines included). */
  waitForLine(pred: (l: StdoutLine) => boolean, opts: WaitOptions = {}): Promise<StdoutLine> {
    const timeoutMs = opts.timeoutMs ?? 30_000
    let cursor = opts.from ?? 0
    return new Promise<StdoutLine>((resolve, reject) => {
      const waiter = {
        check: (): boolean => {
          for (; cursor < this.lines.length; cursor++) {
            const line = this.lines[cursor]
            if (line && pred(line)) {
              cleanup()
              resolve(line)
              return true
            }
          }
          if (this.exitInfo) {
            cleanup()
            reject(this.failure(`exited before ${opts.what ?? 'the awaited message'} arrived`))
            return true
          }
          return false
        },
        fail: (err: Error): void => {
          cleanup()
          reject(err)
        }
      }
      const timer = setTimeout(() => waiter.fail(this.failure(`timed out after ${timeoutMs} ms waiting for ${opts.what ?? 'a matching message'}`)), timeoutMs)
      const cleanup = (): void => {
        clearTimeout(timer)
        this.waiters.delete(waiter)
      }
      this.waiters.add(waiter)
      waiter.check()
    })
  }

  private checkWaiters(): void {
    for (const w of [...this.waiters]) w.check()
  }

  private failure(what: string): Error {
    const seq = formatSequence(sequenceTokens(this.log))
    const stderr = this.stderrText().slice(-2000)
    const exit = this.exitInfo ? ` exit=${JSON.stringify(this.exitInfo)}` : ''
    return new Error(`claude CLI (pid ${this.pid}) ${what}.${exit}\nsequence: ${seq}\nstderr tail: ${stderr || '(empty)'}`)
  }

  /** Wait for the exit; on timeout the group gets SIGKILL and the promise still resolves. */
  async waitForExit(timeoutMs = 15_000): Promise<ExitInfo> {
    if (this.exitInfo) return this.exitInfo
    let timer: NodeJS.Timeout | undefined
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutMs)
    })
    const r = await Promise.race([this.exited, timedOut])
    clearTimeout(timer)
    if (r !== 'timeout') return r
    this.note(`no exit within ${timeoutMs} ms: SIGKILL to the process group`)
    this.killGroup('SIGKILL')
    return this.exited
  }

  /** Signal the whole process group (the CLI and anything it started). */
  killGroup(signal: NodeJS.Signals = 'SIGTERM'): void {
    if (this.exitInfo && signal !== 'SIGKILL') return
    try {
      process.kill(-this.pid, signal)
    } catch {
      try {
        this.child.kill(signal)
      } catch {
        // already gone
      }
    }
  }

  /** Send a signal to the CLI process itself (logged as a driver note). */
  signal(signal: NodeJS.Signals): void {
    this.note(`sending ${signal}`)
    this.child.kill(signal)
  }

  /** Close stdin, wait for the exit (graceMs), SIGKILL the group if needed. Always safe to call. */
  async close(graceMs = 15_000): Promise<ExitInfo> {
    this.closeStdin()
    const info = await this.waitForExit(graceMs)
    // Tools started by the CLI may linger in its group.
    try {
      process.kill(-this.pid, 'SIGKILL')
    } catch {
      // group already empty
    }
    return info
  }
}

export function spawnClaude(opts: SpawnClaudeOptions): CliProcess {
  return new CliProcess(opts)
}

// ---------------------------------------------------------------- sequence notation (INDEX.md)

function tokenFor(dir: 'stdin' | 'stdout', raw: string): string {
  const arrow = dir === 'stdin' ? '>' : '<'
  let msg: CliMessage
  try {
    const parsed: unknown = JSON.parse(raw)
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return `${arrow}NONJSON`
    msg = parsed as CliMessage
  } catch {
    return `${arrow}NONJSON`
  }
  const type = typeof msg.type === 'string' ? msg.type : '?'
  let sub: unknown
  if (type === 'control_request') sub = field(msg.request, 'subtype')
  else if (type === 'control_response') sub = field(msg.response, 'subtype')
  else sub = msg.subtype
  let token = `${arrow}${type}`
  if (typeof sub === 'string') token += `/${sub}`
  if (type === 'system' && sub === 'session_state_changed' && typeof msg.state === 'string') token += `:${msg.state}`
  return token
}

/**
 * Message tokens of a transcript: `>type/subtype` host→CLI, `<type/subtype` CLI→host,
 * `>EOF` for stdin closing; stderr, exit and driver notes are left out.
 */
export function sequenceTokens(entries: SessionEntry[], only?: 'stdin' | 'stdout'): string[] {
  const out: string[] = []
  for (const e of entries) {
    if (e.dir === 'stdin-eof') {
      if (only !== 'stdout') out.push('>EOF')
      continue
    }
    if (e.dir !== 'stdin' && e.dir !== 'stdout') continue
    if (only && e.dir !== only) continue
    if (e.raw.trim() === '' && e.dir === 'stdout') continue
    out.push(tokenFor(e.dir, e.raw))
  }
  return out
}

/** Join tokens, folding consecutive repeats into `×N`. */
export function formatSequence(tokens: string[]): string {
  const out: string[] = []
  let i = 0
  while (i < tokens.length) {
    let j = i + 1
    while (j < tokens.length && tokens[j] === tokens[i]) j++
    out.push(j - i > 1 ? `${tokens[i]}×${j - i}` : String(tokens[i]))
    i = j
  }
  return out.join(' ')
}

/** Read a `<name>.session.jsonl` transcript. */
export function readSessionLog(file: string): SessionEntry[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as SessionEntry)
}

/** Exit code recorded in a transcript (undefined if none). */
export function exitCodeOf(entries: SessionEntry[]): number | null | undefined {
  const e = entries.find((x) => x.dir === 'exit')
  if (!e) return undefined
  return (JSON.parse(e.raw) as ExitInfo).code
}
