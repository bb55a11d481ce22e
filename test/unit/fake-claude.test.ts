// Unit tests for the fake Claude CLI (test/fixtures/fake-claude.mjs): it is spawned directly,
// the way the gateway spawns CLAUDE_BIN, and its stdout is checked against the recorded
// transcripts of the real CLI 2.1.332. Synchronisation is by waiting for actual lines.
import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { label } from '../support/frames.js'
import { referenceDir, referenceMissing } from '../support/reference.js'

const FAKE = fileURLToPath(new URL('../fixtures/fake-claude.mjs', import.meta.url))
// Recorded stdout of the real CLI 2.1.332: the reference set (see test/support/reference.ts), then the repo's own recordings.
const REF_DIRS = [
  referenceDir('claude-code-2.1.332'),
  fileURLToPath(new URL('../fixtures/recorded/claude-code-2.1.332', import.meta.url))
]
const BASE_ARGS = ['--output-format', 'stream-json', '--verbose', '--input-format', 'stream-json', '--permission-prompt-tool', 'stdio']

type Msg = Record<string, unknown>
type Exit = { code: number | null; signal: NodeJS.Signals | null }

function dig(value: unknown, ...keys: Array<string | number>): unknown {
  let cur = value
  for (const key of keys) {
    if (cur === null || typeof cur !== 'object') return undefined
    cur = (cur as Record<string | number, unknown>)[key]
  }
  return cur
}

/**
 * The fake's labels must be `expected` and, where a recording of the real CLI's `name` scenario is at
 * hand, that recording's: compared in a subtest that, without one, is skipped saying what is missing.
 */
async function assertTranscript(t: TestContext, actual: string[], name: string, expected: string[], normalise = (labels: string[]) => labels): Promise<void> {
  assert.deepEqual(normalise(actual), normalise(expected))
  const files = REF_DIRS.map((dir) => path.join(dir, `${name}.stdout.ndjson`))
  const file = files.find((f) => fs.existsSync(f))
  await t.test(`same order as the real CLI's ${name}.stdout.ndjson`, { skip: file === undefined && referenceMissing(files[0] as string) }, () => {
    const recorded = fs.readFileSync(file as string, 'utf8').split('\n').filter((l) => l.trim() !== '').map((l) => label(JSON.parse(l) as Msg))
    assert.deepEqual(normalise(actual), normalise(recorded))
  })
}

/** Runs of the same label collapsed to one (the number of text deltas is not meaningful). */
const collapse = (labels: string[]): string[] => labels.filter((l, i) => l !== labels[i - 1])

const INIT_RESP = 'control_response/success'
const RUNNING = 'system/session_state_changed:running'
const IDLE = 'system/session_state_changed:idle'
const ASKING = 'system/session_state_changed:requires_action'
const CAN_USE = 'control_request/can_use_tool'

class Fake {
  readonly child: ChildProcessWithoutNullStreams
  readonly sessionId: string
  readonly raw: string[] = []
  readonly msgs: Msg[] = []
  stderr = ''
  closed = false
  exit: Exit | null = null
  private pending: Buffer[] = []
  private readonly waiters = new Set<() => boolean>()
  private readonly exitPromise: Promise<Exit>

  constructor(args: string[] = [], opts: { cwd?: string; env?: NodeJS.ProcessEnv; sessionId?: string; base?: string[] } = {}) {
    this.sessionId = opts.sessionId ?? randomUUID()
    const argv = [...(opts.base ?? BASE_ARGS), '--session-id', this.sessionId, ...args]
    this.child = spawn(FAKE, argv, { cwd: opts.cwd ?? os.tmpdir(), env: opts.env ?? process.env })
    this.child.stdout.on('data', (chunk: Buffer) => this.onStdout(chunk))
    this.child.stderr.setEncoding('utf8')
    this.child.stderr.on('data', (s: string) => {
      this.stderr += s
      this.notify()
    })
    this.child.stdin.on('error', () => {}) // EPIPE after the fake exits is expected in some tests
    this.exitPromise = new Promise((resolve) => {
      this.child.on('close', (code, signal) => {
        this.exit = { code, signal }
        this.closed = true
        this.notify()
        resolve(this.exit)
      })
    })
  }

  private onStdout(chunk: Buffer): void {
    let start = 0
    let nl: number
    while ((nl = chunk.indexOf(0x0a, start)) !== -1) {
      this.pending.push(chunk.subarray(start, nl))
      const text = Buffer.concat(this.pending).toString('utf8')
      this.pending = []
      start = nl + 1
      this.raw.push(text)
      try {
        const v: unknown = JSON.parse(text)
        if (v !== null && typeof v === 'object' && !Array.isArray(v)) this.msgs.push(v as Msg)
      } catch {
        // non-JSON lines (garbage scenario) are kept in `raw` only
      }
    }
    if (start < chunk.length) this.pending.push(chunk.subarray(start))
    this.notify()
  }

  private notify(): void {
    for (const w of [...this.waiters]) w()
  }

  /** Resolve when check() returns a value; reject on deadline, or if the process closes first. */
  waitUntil<T>(check: () => T | undefined, what: string, timeoutMs = 15_000): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const attempt = (): boolean => {
        const v = check()
        if (v !== undefined) {
          cleanup()
          resolve(v)
          return true
        }
        if (this.closed) {
          cleanup()
          reject(new Error(`fake exited (${JSON.stringify(this.exit)}) before ${what}\n${this.describe()}`))
          return true
        }
        return false
      }
      const timer = setTimeout(() => {
        cleanup()
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}\n${this.describe()}`))
      }, timeoutMs)
      const cleanup = (): void => {
        clearTimeout(timer)
        this.waiters.delete(attempt)
      }
      if (!attempt()) this.waiters.add(attempt)
    })
  }

  /** Wait for the first message at or after index `from` matching pred. */
  async waitFor(pred: (m: Msg) => boolean, what: string, from = 0, timeoutMs?: number): Promise<{ msg: Msg; index: number }> {
    return this.waitUntil(() => {
      for (let i = from; i < this.msgs.length; i++) {
        const m = this.msgs[i]
        if (m && pred(m)) return { msg: m, index: i }
      }
      return undefined
    }, what, timeoutMs)
  }

  waitStderr(re: RegExp): Promise<RegExpMatchArray> {
    return this.waitUntil(() => this.stderr.match(re) ?? undefined, `stderr ${re}`)
  }

  async waitExit(timeoutMs = 15_000): Promise<Exit> {
    await this.waitUntil(() => (this.closed ? true : undefined), 'exit', timeoutMs).catch((err: unknown) => {
      if (!this.closed) throw err
    })
    return this.exitPromise
  }

  send(obj: unknown): void {
    this.child.stdin.write(JSON.stringify(obj) + '\n')
  }

  sendRaw(text: string): void {
    this.child.stdin.write(text)
  }

  user(text: string, extra: Msg = {}): void {
    this.send({ type: 'user', session_id: '', message: { role: 'user', content: [{ type: 'text', text }] }, parent_tool_use_id: null, ...extra })
  }

  async initialize(): Promise<Msg> {
    const requestId = `req_init_${randomUUID()}`
    this.send({ type: 'control_request', request_id: requestId, request: { subtype: 'initialize', systemPrompt: [''] } })
    return (await this.waitFor((m) => m.type === 'control_response' && dig(m, 'response', 'request_id') === requestId, 'initialize response')).msg
  }

  labels(): string[] {
    return this.msgs.map(label)
  }

  endStdin(): void {
    this.child.stdin.end()
  }

  kill(): void {
    if (!this.closed && this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL')
  }

  private describe(): string {
    return `stdout tail:\n${this.raw.slice(-8).map((l) => '  ' + l.slice(0, 300)).join('\n')}\nstderr:\n${this.stderr.slice(-1000)}`
  }
}

function start(t: TestContext, args: string[] = [], opts: ConstructorParameters<typeof Fake>[1] = {}): Fake {
  const f = new Fake(args, opts)
  t.after(() => f.kill())
  return f
}

function tmpDir(t: TestContext): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fake-claude-test-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

const isType = (type: string, subtype?: string) => (m: Msg) => m.type === type && (subtype === undefined || m.subtype === subtype)
const isState = (state: string) => (m: Msg) => m.subtype === 'session_state_changed' && m.state === state
const isCanUse = (m: Msg) => m.type === 'control_request' && dig(m, 'request', 'subtype') === 'can_use_tool'

async function allowAnswer(f: Fake, req: Msg, updatedInput?: unknown): Promise<void> {
  f.send({
    type: 'control_response',
    response: {
      subtype: 'success',
      request_id: req.request_id,
      response: { behavior: 'allow', updatedInput: updatedInput ?? dig(req, 'request', 'input'), toolUseID: dig(req, 'request', 'tool_use_id') }
    }
  })
}

function denyAnswer(f: Fake, req: Msg, message: string, interrupt = false): void {
  f.send({
    type: 'control_response',
    response: { subtype: 'success', request_id: req.request_id, response: { behavior: 'deny', message, ...(interrupt ? { interrupt } : {}), toolUseID: dig(req, 'request', 'tool_use_id') } }
  })
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

test('answers initialize with a small payload carrying a commands array', async (t) => {
  const f = start(t)
  const resp = await f.initialize()
  assert.equal(dig(resp, 'response', 'subtype'), 'success')
  assert.ok(Array.isArray(dig(resp, 'response', 'response', 'commands')))
  assert.ok(Array.isArray(dig(resp, 'response', 'response', 'models')))
  assert.equal(f.msgs.length, 1, 'nothing but the control response before the first user line')
})

test('text turn: message sequence matches the real CLI transcript, stdin EOF exits 0', async (t) => {
  const f = start(t, ['--model', 'claude-test-model'])
  await f.initialize()
  f.user('Say hello')
  await f.waitFor(isState('idle'), 'idle')
  f.endStdin()
  assert.deepEqual(await f.waitExit(), { code: 0, signal: null })
  // Compared in full, session_state_changed included.
  await assertTranscript(t, f.labels(), 'text', [INIT_RESP, RUNNING, 'system/init', 'assistant', 'result/success', IDLE])
  for (const m of f.msgs.slice(1)) assert.equal(m.session_id, f.sessionId, `session_id on ${label(m)}`)
  const init = f.msgs.find(isType('system', 'init'))
  assert.equal(init?.model, 'claude-test-model')
  assert.equal(init?.cwd, os.tmpdir())
  const assistant = f.msgs.find(isType('assistant'))
  assert.equal(dig(assistant, 'message', 'content', 0, 'text'), 'Echo: Say hello')
  const result = f.msgs.find(isType('result'))
  assert.equal(result?.is_error, false)
  assert.equal(result?.result, 'Echo: Say hello')
  assert.equal(typeof result?.uuid, 'string')
})

test('ask → allow: can_use_tool shape, file created, allow transcript order', async (t) => {
  const cwd = tmpDir(t)
  const f = start(t, [], { cwd })
  await f.initialize()
  f.user('ask')
  const { msg: req } = await f.waitFor(isCanUse, 'can_use_tool')
  assert.match(String(req.request_id), UUID_RE)
  const request = req.request as Msg
  assert.equal(request.tool_name, 'Bash')
  assert.equal(request.display_name, 'Bash')
  assert.equal(dig(request, 'input', 'command'), 'touch fake-created.txt')
  assert.ok(Array.isArray(request.permission_suggestions) && request.permission_suggestions.length > 0)
  const toolUse = f.msgs.find((m) => dig(m, 'message', 'content', 0, 'type') === 'tool_use')
  assert.equal(dig(toolUse, 'message', 'content', 0, 'id'), request.tool_use_id)
  const assistants = f.msgs.filter(isType('assistant'))
  assert.equal(dig(assistants[0], 'message', 'id'), dig(assistants[1], 'message', 'id'), 'text and tool_use share message.id')
  assert.equal(fs.existsSync(path.join(cwd, 'fake-created.txt')), false)

  await allowAnswer(f, req)
  await f.waitFor(isState('idle'), 'idle')
  assert.ok(fs.existsSync(path.join(cwd, 'fake-created.txt')), 'touch ran in the cwd')
  const toolResult = f.msgs.find((m) => dig(m, 'message', 'content', 0, 'type') === 'tool_result')
  assert.equal(dig(toolResult, 'message', 'content', 0, 'content'), 'ok')
  assert.equal(dig(toolResult, 'message', 'content', 0, 'is_error'), false)
  assert.equal(f.msgs.find(isType('result'))?.subtype, 'success')
  f.endStdin()
  assert.equal((await f.waitExit()).code, 0)
  await assertTranscript(t, f.labels(), 'allow', [INIT_RESP, RUNNING, 'system/init', 'assistant', 'assistant', ASKING, CAN_USE, RUNNING, 'user', 'assistant', 'result/success', IDLE])
})

test('ask → allow uses updatedInput; allow without updatedInput is a deny', async (t) => {
  const cwd = tmpDir(t)
  const f = start(t, [], { cwd })
  f.user('ask Bash touch original.txt')
  const { msg: req1 } = await f.waitFor(isCanUse, 'first can_use_tool')
  await allowAnswer(f, req1, { command: 'touch rewritten.txt', description: 'rewritten by host' })
  const { index } = await f.waitFor(isType('result'), 'first result')
  assert.ok(fs.existsSync(path.join(cwd, 'rewritten.txt')))
  assert.equal(fs.existsSync(path.join(cwd, 'original.txt')), false)

  f.user('ask Bash touch never.txt')
  const { msg: req2 } = await f.waitFor(isCanUse, 'second can_use_tool', index + 1)
  f.send({ type: 'control_response', response: { subtype: 'success', request_id: req2.request_id, response: { behavior: 'allow' } } })
  await f.waitFor(isType('result'), 'second result', index + 1)
  const denied = f.msgs.slice(index + 1).find((m) => dig(m, 'message', 'content', 0, 'type') === 'tool_result')
  assert.equal(dig(denied, 'message', 'content', 0, 'is_error'), true)
  assert.equal(dig(denied, 'message', 'content', 0, 'content'), 'updatedInput required')
  assert.equal(fs.existsSync(path.join(cwd, 'never.txt')), false)
})

test('ask → deny: tool_result carries the message, deny transcript order', async (t) => {
  const cwd = tmpDir(t)
  const f = start(t, [], { cwd })
  await f.initialize()
  f.user('ask')
  const { msg: req } = await f.waitFor(isCanUse, 'can_use_tool')
  denyAnswer(f, req, 'User denied this in the browser')
  await f.waitFor(isState('idle'), 'idle')
  const toolResult = f.msgs.find((m) => dig(m, 'message', 'content', 0, 'type') === 'tool_result')
  assert.equal(dig(toolResult, 'message', 'content', 0, 'is_error'), true)
  assert.equal(dig(toolResult, 'message', 'content', 0, 'content'), 'User denied this in the browser')
  assert.equal(fs.existsSync(path.join(cwd, 'fake-created.txt')), false)
  f.endStdin()
  assert.equal((await f.waitExit()).code, 0)
  await assertTranscript(t, f.labels(), 'deny', [INIT_RESP, RUNNING, 'system/init', 'assistant', 'assistant', ASKING, CAN_USE, RUNNING, 'user', 'assistant', 'result/success', IDLE])
})

test('deny with interrupt: ends the turn with error_during_execution (deny_interrupt order), exit 1', async (t) => {
  const f = start(t)
  await f.initialize()
  f.user('ask')
  const { msg: req } = await f.waitFor(isCanUse, 'can_use_tool')
  denyAnswer(f, req, 'Stop everything', true)
  await f.waitFor(isState('idle'), 'idle')
  f.endStdin()
  assert.equal((await f.waitExit()).code, 1, 'last result was an error')
  await assertTranscript(t, f.labels(), 'deny_interrupt', [INIT_RESP, RUNNING, 'system/init', 'assistant', 'assistant', ASKING, CAN_USE, RUNNING, 'user', 'user', 'result/error_during_execution', IDLE])
  assert.equal(f.msgs.find(isType('result'))?.is_error, true)
})

test('error answer to a permission prompt becomes a deny', async (t) => {
  const f = start(t)
  f.user('ask')
  const { msg: req } = await f.waitFor(isCanUse, 'can_use_tool')
  f.send({ type: 'control_response', response: { subtype: 'error', request_id: req.request_id, error: 'host blew up' } })
  await f.waitFor(isType('result'), 'result')
  const toolResult = f.msgs.find((m) => dig(m, 'message', 'content', 0, 'type') === 'tool_result')
  assert.match(String(dig(toolResult, 'message', 'content', 0, 'content')), /^Tool permission request failed: .*host blew up/)
})

test('answers are matched by request_id, or by toolUseID when the request_id is unknown', async (t) => {
  const f = start(t)
  f.user('ask')
  const { msg: req } = await f.waitFor(isCanUse, 'can_use_tool')
  // Unknown request_id, no toolUseID: ignored.
  f.send({ type: 'control_response', response: { subtype: 'success', request_id: 'no-such-request', response: { behavior: 'deny', message: 'ignored' } } })
  // Unknown request_id with the right toolUseID: accepted.
  f.send({ type: 'control_response', response: { subtype: 'success', request_id: 'stale-id', response: { behavior: 'deny', message: 'matched by toolUseID', toolUseID: dig(req, 'request', 'tool_use_id') } } })
  await f.waitFor(isType('result'), 'result')
  const toolResult = f.msgs.find((m) => dig(m, 'message', 'content', 0, 'type') === 'tool_result')
  assert.equal(dig(toolResult, 'message', 'content', 0, 'content'), 'matched by toolUseID')
})

test('interrupt during a pending prompt: control_cancel_request, then success, then error_during_execution', async (t) => {
  const f = start(t)
  await f.initialize()
  f.user('ask')
  const { msg: req } = await f.waitFor(isCanUse, 'can_use_tool')
  f.send({ type: 'control_request', request_id: 'req_interrupt', request: { subtype: 'interrupt' } })
  await f.waitFor(isState('idle'), 'idle')
  const cancelAt = f.msgs.findIndex(isType('control_cancel_request'))
  const responseAt = f.msgs.findIndex((m) => dig(m, 'response', 'request_id') === 'req_interrupt')
  const resultAt = f.msgs.findIndex(isType('result'))
  assert.ok(cancelAt >= 0 && cancelAt < responseAt && responseAt < resultAt, `order cancel(${cancelAt}) < response(${responseAt}) < result(${resultAt})`)
  assert.equal(f.msgs[cancelAt]?.request_id, req.request_id)
  assert.equal(dig(f.msgs[responseAt], 'response', 'subtype'), 'success')
  assert.equal(f.msgs[resultAt]?.subtype, 'error_during_execution')
  assert.equal(f.msgs[resultAt]?.is_error, true)
  // A late answer for the cancelled prompt is ignored: nothing more is printed.
  await allowAnswer(f, req)
  f.endStdin()
  assert.equal((await f.waitExit()).code, 1)
  await assertTranscript(t, f.labels(), 'interrupt_pending_permission', [
    INIT_RESP, RUNNING, 'system/init', 'assistant', 'assistant', ASKING, CAN_USE,
    'control_cancel_request', 'control_response/success', RUNNING, 'user', 'user', 'result/error_during_execution', IDLE
  ])
})

test('interrupt while idle just succeeds; slow turn is interruptible', async (t) => {
  const f = start(t)
  f.send({ type: 'control_request', request_id: 'i1', request: { subtype: 'interrupt' } })
  await f.waitFor((m) => dig(m, 'response', 'request_id') === 'i1', 'idle interrupt response')
  assert.equal(f.msgs.length, 1)
  f.user('slow 50 200')
  await f.waitFor(isType('assistant'), 'first slow line')
  f.send({ type: 'control_request', request_id: 'i2', request: { subtype: 'interrupt' } })
  const { msg: result } = await f.waitFor(isType('result'), 'result')
  assert.equal(result.subtype, 'error_during_execution')
  assert.ok(f.msgs.filter(isType('assistant')).length < 50)
  await f.waitFor(isState('idle'), 'idle')
})

test('invalid JSON on stdin exits 1 with a stderr message', async (t) => {
  const f = start(t)
  await f.initialize()
  f.sendRaw('this is not json\n')
  const exit = await f.waitExit()
  assert.equal(exit.code, 1)
  assert.match(f.stderr, /Error parsing streaming input line/)
})

test('blank lines (also \\r\\n), keep_alive and unknown types are ignored', async (t) => {
  const f = start(t)
  f.sendRaw('\n\r\n')
  f.send({ type: 'keep_alive' })
  f.send({ type: 'totally_unknown', x: 1 })
  f.user('hello')
  await f.waitFor(isState('idle'), 'idle')
  f.endStdin()
  assert.equal((await f.waitExit()).code, 0)
  assert.deepEqual(f.labels(), [RUNNING, 'system/init', 'assistant', 'result/success', IDLE])
})

test('SIGTERM exits 143 and prints nothing more', async (t) => {
  const f = start(t)
  await f.initialize()
  f.user('slow 5 1000')
  await f.waitFor(isType('system', 'init'), 'system/init')
  const before = f.raw.length
  f.child.kill('SIGTERM')
  assert.deepEqual(await f.waitExit(), { code: 143, signal: null })
  assert.equal(f.raw.length, before)
})

test('--fake-mode ignore-sigterm survives SIGTERM until SIGKILL', async (t) => {
  const f = start(t, ['--fake-mode', 'ignore-sigterm'])
  await f.initialize()
  f.child.kill('SIGTERM')
  await f.waitStderr(/ignoring SIGTERM/)
  await f.initialize() // still answering
  f.child.kill('SIGKILL')
  assert.deepEqual(await f.waitExit(), { code: null, signal: 'SIGKILL' })
})

test('SIGINT mid-turn ends the turn with error_during_execution then exits 0 (sigint_midturn order)', async (t) => {
  const f = start(t)
  await f.initialize()
  f.user('slow 5 1000')
  await f.waitFor(isType('assistant'), 'first slow line', 0, 20_000)
  f.child.kill('SIGINT')
  assert.deepEqual(await f.waitExit(), { code: 0, signal: null })
  await assertTranscript(t, f.labels(), 'sigint_midturn', [INIT_RESP, RUNNING, 'system/init', 'assistant', 'user', 'result/error_during_execution'])
})

test('stdin EOF mid-turn: the turn finishes, then exit 0 (stdin_close_midturn)', async (t) => {
  const f = start(t)
  await f.initialize()
  f.user('slow 3 50')
  await f.waitFor(isType('system', 'init'), 'system/init')
  f.endStdin()
  assert.deepEqual(await f.waitExit(), { code: 0, signal: null })
  assert.equal(f.msgs.filter(isType('assistant')).length, 3)
  assert.deepEqual(f.labels().slice(-2), ['result/success', IDLE])
})

test('stdin EOF while a prompt is pending: denied as "stream closed", turn finishes, exit 0', async (t) => {
  const cwd = tmpDir(t)
  const f = start(t, [], { cwd })
  await f.initialize()
  f.user('ask')
  await f.waitFor(isCanUse, 'can_use_tool')
  f.endStdin()
  assert.deepEqual(await f.waitExit(), { code: 0, signal: null })
  const toolResult = f.msgs.find((m) => dig(m, 'message', 'content', 0, 'type') === 'tool_result')
  assert.match(String(dig(toolResult, 'message', 'content', 0, 'content')), /stream closed/)
  assert.equal(fs.existsSync(path.join(cwd, 'fake-created.txt')), false)
  await assertTranscript(t, f.labels(), 'stdin_close_pending_permission', [
    INIT_RESP, RUNNING, 'system/init', 'assistant', 'assistant', ASKING, CAN_USE, RUNNING, 'user', 'assistant', 'result/success', IDLE
  ])
})

test('burst 1000 delivers 1000 ordered assistant lines', async (t) => {
  const f = start(t)
  f.user('burst 1000 200')
  await f.waitFor(isType('result'), 'result')
  const texts = f.msgs.filter(isType('assistant')).map((m) => String(dig(m, 'message', 'content', 0, 'text')))
  assert.equal(texts.length, 1000)
  texts.forEach((text, i) => assert.ok(text.startsWith(`#${i} `), `line ${i} is ${text.slice(0, 12)}`))
  assert.ok(texts.every((text) => Buffer.byteLength(text) === 200))
})

test('huge 5 MiB line arrives intact in one line', async (t) => {
  const f = start(t)
  const size = 5 * 1024 * 1024 + 17
  f.user(`huge ${size}`)
  const { msg } = await f.waitFor(isType('assistant'), 'huge assistant line')
  const text = String(dig(msg, 'message', 'content', 0, 'text'))
  assert.equal(text.length, size)
  assert.ok(text.startsWith('abcdefghijklmnopqrstuvwxyz0123456789abc'))
  await f.waitFor(isType('result'), 'result')
})

test('garbage lines, partial-line writes and U+2028 escaping', async (t) => {
  const f = start(t)
  f.user('garbage')
  await f.waitFor(isType('result'), 'garbage result')
  assert.ok(f.raw.includes('this is not json {'))
  assert.ok(f.raw.includes('[1,2,3]'))
  f.user('partial-line')
  const { index } = await f.waitFor((m) => m.type === 'result' && m.result !== 'after garbage', 'partial-line result')
  assert.equal(dig(f.msgs[index - 1], 'message', 'content', 0, 'text'), 'partial line: héllo ✓ 日本')
  f.user('u2028')
  const { msg } = await f.waitFor((m) => m.type === 'assistant' && String(dig(m, 'message', 'content', 0, 'text')).startsWith('line-sep'), 'u2028 line')
  assert.equal(dig(msg, 'message', 'content', 0, 'text'), 'line-sep:\u2028 para-sep:\u2029 end')
  const raw = f.raw.find((l) => l.includes('line-sep'))
  assert.ok(raw !== undefined && raw.includes('\\u2028') && !raw.includes('\u2028') && !raw.includes('\u2029'))
})

test('queued user lines run as later turns (queued_mid order)', async (t) => {
  const f = start(t)
  await f.initialize()
  const first = '11111111-1111-4111-8111-111111111111'
  const second = '22222222-2222-4222-8222-222222222222'
  f.user('slow 1 1500', { uuid: first })
  await f.waitFor(isType('system', 'init'), 'first system/init')
  f.user('Say hello', { uuid: second })
  await f.waitFor(isState('idle'), 'idle')
  f.endStdin()
  assert.equal((await f.waitExit()).code, 0)
  const results = f.msgs.filter(isType('result'))
  assert.equal(results.length, 2)
  assert.equal(results[1]?.result, 'Echo: Say hello')
  await assertTranscript(t, f.labels(), 'queued_mid', [
    INIT_RESP, RUNNING, 'command_lifecycle', 'command_lifecycle', 'system/init', 'command_lifecycle', 'assistant', 'result/success',
    'command_lifecycle', 'command_lifecycle', 'system/init', 'assistant', 'result/success', 'command_lifecycle', IDLE
  ])
})

test('control requests: set_model, set_permission_mode, set_max_thinking_tokens, unknown subtype', async (t) => {
  const f = start(t)
  const ask = async (id: string, request: Msg): Promise<Msg> => {
    f.send({ type: 'control_request', request_id: id, request })
    return (await f.waitFor((m) => m.type === 'control_response' && dig(m, 'response', 'request_id') === id, id)).msg
  }
  assert.equal(dig(await ask('m', { subtype: 'set_model', model: 'claude-opus-4-1-20250805' }), 'response', 'subtype'), 'success')
  assert.equal(dig(await ask('p', { subtype: 'set_permission_mode', mode: 'acceptEdits' }), 'response', 'subtype'), 'success')
  assert.equal(dig(await ask('p2', { subtype: 'set_permission_mode', mode: 'not-a-mode' }), 'response', 'subtype'), 'error')
  assert.equal(dig(await ask('th', { subtype: 'set_max_thinking_tokens', max_thinking_tokens: 1000 }), 'response', 'subtype'), 'success')
  const bogus = await ask('b', { subtype: 'bogus_subtype' })
  assert.equal(dig(bogus, 'response', 'subtype'), 'error')
  assert.equal(dig(bogus, 'response', 'error'), 'Unknown request subtype: bogus_subtype')
  f.user('hello')
  const { msg: init } = await f.waitFor(isType('system', 'init'), 'system/init')
  assert.equal(init.model, 'claude-opus-4-1-20250805')
  assert.equal(init.permissionMode, 'acceptEdits')
  const { msg: assistant } = await f.waitFor(isType('assistant'), 'assistant')
  assert.equal(dig(assistant, 'message', 'model'), 'claude-opus-4-1-20250805')
})

test('ask2 asks two tools one after the other (two_tools order)', async (t) => {
  const cwd = tmpDir(t)
  const f = start(t, [], { cwd })
  await f.initialize()
  f.user('ask2')
  const { msg: req1, index } = await f.waitFor(isCanUse, 'first can_use_tool')
  await f.waitFor(isType('assistant'), 'second tool_use line', index + 1)
  await allowAnswer(f, req1)
  const { msg: req2 } = await f.waitFor(isCanUse, 'second can_use_tool', index + 1)
  assert.notEqual(req2.request_id, req1.request_id)
  denyAnswer(f, req2, 'not this one')
  await f.waitFor(isState('idle'), 'idle')
  f.endStdin()
  assert.equal((await f.waitExit()).code, 0)
  assert.ok(fs.existsSync(path.join(cwd, 'fake-one.txt')))
  assert.equal(fs.existsSync(path.join(cwd, 'fake-two.txt')), false)
  await assertTranscript(t, f.labels(), 'two_tools', [
    INIT_RESP, RUNNING, 'system/init', 'assistant', 'assistant', ASKING, CAN_USE, 'assistant', RUNNING, 'user',
    ASKING, CAN_USE, RUNNING, 'user', 'assistant', 'result/success', IDLE
  ])
})

test('hook waits for the hook_callback answer before continuing', async (t) => {
  const f = start(t)
  f.send({ type: 'control_request', request_id: 'init', request: { subtype: 'initialize', hooks: { UserPromptSubmit: [{ hookCallbackIds: ['hook_7'] }] } } })
  f.user('hook')
  const { msg: req } = await f.waitFor((m) => m.type === 'control_request' && dig(m, 'request', 'subtype') === 'hook_callback', 'hook_callback')
  assert.equal(dig(req, 'request', 'callback_id'), 'hook_7')
  assert.equal(f.msgs.some(isType('system', 'init')), false, 'turn waits for the hook')
  f.send({ type: 'control_response', response: { subtype: 'success', request_id: req.request_id, response: { continue: true } } })
  const { msg: result } = await f.waitFor(isType('result'), 'result')
  assert.equal(result.result, 'Hook answered: {"continue":true}')
})

test('--include-partial-messages emits stream_event frames around each assistant line (partial order)', async (t) => {
  const f = start(t, ['--include-partial-messages'])
  await f.initialize()
  f.user('hello')
  await f.waitFor(isState('idle'), 'idle')
  f.endStdin()
  assert.equal((await f.waitExit()).code, 0)
  await assertTranscript(t, f.labels(), 'partial', [
    INIT_RESP, RUNNING, 'system/init', 'system/status', 'stream_event', 'assistant', 'stream_event', 'result/success', IDLE
  ], collapse)
  const events = f.msgs.filter(isType('stream_event')).map((m) => String(dig(m, 'event', 'type')))
  assert.deepEqual(events, ['message_start', 'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop'])
  const deltas = f.msgs.filter((m) => dig(m, 'event', 'type') === 'content_block_delta').map((m) => String(dig(m, 'event', 'delta', 'text')))
  assert.equal(deltas.join(''), 'Echo: hello')
  for (const m of f.msgs.filter(isType('stream_event'))) {
    assert.equal(m.session_id, f.sessionId)
    assert.equal(m.parent_tool_use_id, null)
    assert.equal(typeof m.uuid, 'string')
  }
})

test('--fake-log-dir records argv/env and the raw stdin bytes; grandchild and env scenarios', async (t) => {
  const dir = tmpDir(t)
  const f = start(t, ['--fake-log-dir', dir], { env: { ...process.env, FAKE_TEST_VAR: 'xyz' } })
  const sent = '{"type":"keep_alive"}\n\r\n{"type":"user","message":{"role":"user","content":"env"}}\n'
  f.sendRaw(sent)
  const { msg } = await f.waitFor(isType('assistant'), 'env line')
  const env = JSON.parse(String(dig(msg, 'message', 'content', 0, 'text'))) as Record<string, string>
  assert.equal(env.FAKE_TEST_VAR, 'xyz')
  assert.equal(fs.readFileSync(path.join(dir, `${f.sessionId}.stdin.ndjson`), 'utf8'), sent)
  const argvLog = JSON.parse(fs.readFileSync(path.join(dir, `${f.sessionId}.${f.child.pid}.argv.json`), 'utf8')) as Msg
  assert.ok(Array.isArray(argvLog.argv) && argvLog.argv.includes('--verbose'))
  assert.equal(dig(argvLog, 'env', 'FAKE_TEST_VAR'), 'xyz')
  assert.equal(argvLog.pid, f.child.pid)

  f.user('grandchild')
  const [, pidText] = await f.waitStderr(/grandchild-pid (\d+)/)
  const pid = Number(pidText)
  t.after(() => {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      // already gone
    }
  })
  assert.doesNotThrow(() => process.kill(pid, 0), 'grandchild is alive')
  await f.waitUntil(() => (fs.existsSync(path.join(dir, `${f.sessionId}.grandchild.pid`)) ? true : undefined), 'grandchild pid file')
  assert.equal(fs.readFileSync(path.join(dir, `${f.sessionId}.grandchild.pid`), 'utf8'), String(pid))
})

test('startup failures: missing --verbose, missing stream-json input, crash-at-start; crash and exit N', async (t) => {
  const noVerbose = start(t, [], { base: ['--output-format', 'stream-json', '--input-format', 'stream-json'] })
  assert.equal((await noVerbose.waitExit()).code, 1)
  assert.match(noVerbose.stderr, /requires --verbose/)
  const noInput = start(t, [], { base: ['--output-format', 'stream-json', '--verbose'] })
  assert.equal((await noInput.waitExit()).code, 1)
  assert.notEqual(noInput.stderr, '')
  const crashAtStart = start(t, ['--fake-mode', 'crash-at-start'])
  assert.equal((await crashAtStart.waitExit()).code, 1)
  assert.notEqual(crashAtStart.stderr, '')

  const crash = start(t)
  crash.user('crash')
  assert.equal((await crash.waitExit()).code, 3)
  assert.equal(crash.msgs.some(isType('result')), false)
  assert.notEqual(crash.stderr, '')

  const exit = start(t)
  exit.user('exit 7')
  assert.equal((await exit.waitExit()).code, 7)
  assert.deepEqual(exit.labels().slice(-2), ['result/success', IDLE])
})
