/**
 * Test harness: a real gateway (real HTTP, real WebSockets, real child
 * processes) on a free loopback port, with the fake CLI as CLAUDE_BIN by
 * default, and WebSocket clients that collect frames and wait for them.
 *
 * `gateway(t)` is the one way to get one: it is closed when its owner ends,
 * a test (`t.after`) or a suite (`suiteScope()`); `close()` closes it earlier
 * (a restart within a test) and is idempotent with that.
 */
import { mkdtempSync, readFileSync, existsSync, readdirSync, statSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after } from 'node:test'
import { fileURLToPath } from 'node:url'
import type { FastifyInstance } from 'fastify'
import pino from 'pino'
import WebSocket from 'ws'
import { type AppParts, buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { Waiters } from './waiters.js'

import { eventually } from './waiters.js'

export { eventually }

export const FAKE_CLI = fileURLToPath(new URL('../fixtures/fake-claude.mjs', import.meta.url))
export const TOKEN_A = 'token-tenant-a-0123456789'
export const TOKEN_B = 'token-tenant-b-0123456789'

export interface TestGateway {
  app: FastifyInstance
  url: string
  wsUrl: string
  dataDir: string
  /** Where the fake CLI writes `<session>.stdin.ndjson` and argv dumps. */
  fakeLogDir: string
  request: (method: string, path: string, body?: unknown, token?: string) => Promise<{ status: number, body: any }>
  createSession: (body?: Record<string, unknown>, token?: string) => Promise<any>
  connect: (sessionId: string, query?: string, token?: string) => Promise<TestClient>
  /** Bytes the fake CLI of a session received on stdin, parsed per line. */
  stdinLines: (sessionId: string) => any[]
  /** Raw bytes the fake CLI of a session received on stdin ('' when none yet). */
  stdinText: (sessionId: string) => string
  /** The fake CLI's argv dumps for a session (one per spawn), oldest first. */
  argvDumps: (sessionId: string) => ArgvDump[]
  /** Terminates its clients, closes the app and removes its data dir (unless given); later calls wait for the first. */
  close: () => Promise<void>
}

/** What the fake CLI writes to `<session>.<pid>.argv.json` at start. */
export interface ArgvDump {
  argv: string[]
  cwd: string
  pid: number
  env: Record<string, string>
}

export interface GatewayOptions {
  /** Extra fake-CLI arguments appended after `--fake-log-dir <dir>`, e.g. `['--fake-mode', 'hang']`. */
  cliArgs?: string[]
  /** Environment-style overrides, e.g. `{ PERMISSION_TIMEOUT_MS: '200' }`. */
  env?: Record<string, string>
  parts?: AppParts
  /** Keep the data dir (for restart tests that reuse it). */
  dataDir?: string
}

/** What a gateway belongs to: a test's context `t`, a `suiteScope()`, or any owner that runs cleanups when it ends. */
export interface Scope {
  after (fn: () => unknown): void
}

/** A gateway for one test or suite, closed when `scope` ends. */
export async function gateway (scope: Scope, options: GatewayOptions = {}): Promise<TestGateway> {
  const gw = await startGateway(options)
  scope.after(() => gw.close())
  return gw
}

/**
 * A scope for gateways shared by the tests of a `describe` (started in its
 * `before` or its tests): call it in the describe's body; what is registered
 * on it runs in an `after` hook of the suite, newest first, so a gateway is
 * closed before what it was started on goes. (A suite's context has no
 * `after` in Node 20.)
 */
export function suiteScope (): Scope {
  const cleanups: Array<() => unknown> = []
  after(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
  })
  return { after: (fn) => { cleanups.push(fn) } }
}

async function startGateway (options: GatewayOptions): Promise<TestGateway> {
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'cgw-test-'))
  const fakeLogDir = join(dataDir, 'fake-log')
  const config = loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'silent',
    DATA_DIR: dataDir,
    CLAUDE_BIN: FAKE_CLI,
    CLAUDE_ARGS_EXTRA: ['--fake-log-dir', fakeLogDir, ...(options.cliArgs ?? [])].join(' '),
    GATEWAY_TOKENS: `${TOKEN_A}=tenant-a,${TOKEN_B}=tenant-b`,
    CLI_STOP_TIMEOUT_MS: '1000',
    // Tests make many deliberate 401s from 127.0.0.1; security-limits tests the bound itself.
    AUTH_FAILURES_PER_MINUTE: '100000',
    SHUTDOWN_GRACE_MS: '2000',
    // Most tests read the fake CLI's --fake-log-dir (under DATA_DIR) and its /proc entries:
    // unsandboxed by default (allowed although two tenants); sandbox tests set SANDBOX=bwrap.
    SANDBOX: 'none',
    ALLOW_UNSANDBOXED: 'true',
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    ...options.env
  })
  const app = await buildApp(config, { logger: pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }), ...options.parts })
  try {
    await app.listen({ port: 0, host: '127.0.0.1' })
  } catch (err) {
    // A gateway that failed to boot may hold a store connection or timers: without this its file hangs.
    await app.close().catch(() => {})
    throw err
  }
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('no address')
  const url = `http://127.0.0.1:${address.port}`
  const wsUrl = `ws://127.0.0.1:${address.port}`
  const clients: TestClient[] = []

  const request = async (method: string, path: string, body?: unknown, token = TOKEN_A): Promise<{ status: number, body: any }> => {
    const res = await fetch(url + path, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body)
    })
    const text = await res.text()
    return { status: res.status, body: text === '' ? null : JSON.parse(text) }
  }

  let closing: Promise<void> | null = null
  return {
    app,
    url,
    wsUrl,
    dataDir,
    fakeLogDir,
    request,
    async createSession (body = {}, token = TOKEN_A) {
      const res = await request('POST', '/v1/sessions', body, token)
      if (res.status !== 201) throw new Error(`create failed: ${res.status} ${JSON.stringify(res.body)}`)
      return res.body
    },
    async connect (sessionId, query = '', token = TOKEN_A) {
      const client = await TestClient.open(`${wsUrl}/v1/sessions/${sessionId}/ws${query === '' ? '' : `?${query}`}`, { authorization: `Bearer ${token}` })
      clients.push(client)
      return client
    },
    stdinText (sessionId) {
      const file = join(fakeLogDir, `${sessionId}.stdin.ndjson`)
      return existsSync(file) ? readFileSync(file, 'utf8') : ''
    },
    argvDumps (sessionId) {
      if (!existsSync(fakeLogDir)) return []
      const prefix = `${sessionId}.`
      return readdirSync(fakeLogDir)
        .filter((f) => f.startsWith(prefix) && f.endsWith('.argv.json'))
        .map((f) => ({ file: join(fakeLogDir, f), mtime: statSync(join(fakeLogDir, f)).mtimeMs }))
        .sort((a, b) => a.mtime - b.mtime)
        .map(({ file }) => JSON.parse(readFileSync(file, 'utf8')) as ArgvDump)
    },
    stdinLines (sessionId) {
      const file = join(fakeLogDir, `${sessionId}.stdin.ndjson`)
      if (!existsSync(file)) return []
      return readFileSync(file, 'utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l))
    },
    close () {
      closing ??= (async () => {
        for (const c of clients) c.terminate()
        await app.close()
        if (options.dataDir === undefined) await rm(dataDir, { recursive: true, force: true })
      })()
      return closing
    }
  }
}

/** A real `ws` client that records every frame and lets tests wait for one. */
export class TestClient {
  readonly ws: WebSocket
  readonly frames: any[] = []
  /** Every frame's text exactly as received, parallel to `frames`. */
  readonly raw: string[] = []
  closeCode: number | null = null
  /** The close frame's reason text, once closed. */
  closeReason: string | null = null
  readonly #waiters = new Waiters()

  private constructor (ws: WebSocket) {
    this.ws = ws
    ws.on('message', (data) => {
      const text = data.toString()
      this.raw.push(text)
      this.frames.push(JSON.parse(text))
      this.#waiters.wake()
    })
    ws.on('close', (code, reason) => {
      this.closeCode = code
      this.closeReason = reason.toString('utf8')
      this.#waiters.wake()
    })
  }

  static open (address: string, headers: Record<string, string>, protocols?: string[]): Promise<TestClient> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(address, protocols, { headers })
      const client = new TestClient(ws)
      ws.once('open', () => resolve(client))
      ws.once('unexpected-response', (_req, res) => reject(Object.assign(new Error(`upgrade refused: ${res.statusCode}`), { statusCode: res.statusCode })))
      ws.once('error', reject)
    })
  }

  /** Frames other than keep_alive. */
  get events (): any[] {
    return this.frames.filter((f) => f.type !== 'keep_alive')
  }

  /** Frames with a seq, in arrival order. */
  get seqFrames (): any[] {
    return this.frames.filter((f) => typeof f.seq === 'number')
  }

  send (frame: unknown): void {
    this.ws.send(typeof frame === 'string' ? frame : JSON.stringify(frame))
  }

  sendUser (text: string, extra: Record<string, unknown> = {}): void {
    this.send({ type: 'user', message: { role: 'user', content: text }, ...extra })
  }

  /** Resolves with the first frame (from index `from`) matching `predicate`. */
  waitFor (predicate: (frame: any) => boolean, timeoutMs = 10_000, from = 0): Promise<any> {
    return this.until(() => this.frames.slice(from).find(predicate), timeoutMs, `frame matching ${predicate.toString()}`)
  }

  /** Resolves once `check` returns something other than undefined/false. */
  until<T> (check: () => T | undefined | false, timeoutMs = 10_000, what = 'condition'): Promise<T> {
    return this.#waiters.until(check, timeoutMs, what, () => `${this.frames.length} frames: ${this.frames.map(kind).join(' ')}; last frames: ${JSON.stringify(this.frames.slice(-5)).slice(0, 2000)}`)
  }

  waitClose (timeoutMs = 10_000): Promise<number> {
    return this.until(() => this.closeCode ?? undefined, timeoutMs, 'close')
  }

  terminate (): void {
    this.ws.terminate()
  }
}

/**
 * A process's argv from /proc. A process inside execve has an empty cmdline for a moment
 * (the new image is in place before its arguments are), and spawn returns during that
 * window, so an empty one is read again.
 */
export async function commandLine (pid: number): Promise<string[]> {
  const text = await eventually(() => readFileSync(`/proc/${pid}/cmdline`, 'utf8') || false, 5000, `the command line of ${pid}`)
  return text.split('\0').filter((a) => a !== '')
}

/**
 * Pids of live (non-zombie) fake CLI processes this test process started, from /proc: its
 * children, or its children's (the gateway's spawn helper, CLI_SPAWN=helper, starts them).
 */
export async function fakeCliPids (): Promise<number[]> {
  const parents = new Map<number, number>()
  const live = new Set<number>()
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      parents.set(Number(entry), Number(fields[1]))
      if (fields[0] !== 'Z') live.add(Number(entry))
    } catch {
      // the process ended while we looked
    }
  }
  const ours = (pid: number): boolean => parents.get(pid) === process.pid || parents.get(parents.get(pid) ?? 0) === process.pid
  const pids: number[] = []
  for (const pid of live) {
    try {
      if (ours(pid) && (await commandLine(pid)).some((arg) => arg.includes(FAKE_CLI))) pids.push(pid)
    } catch {
      // the process ended while we looked
    }
  }
  return pids.sort((a, b) => a - b)
}

/** The parent pid of a process, from /proc (the spawn helper's, for a CLI it started). */
export function parentOf (pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
}

/** True when a process with that pid exists (and is not a zombie). */
export function processAlive (pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z'
  } catch {
    return false
  }
}

/** A frame's type/subtype (and seq), for timeout messages: the whole sequence fits in one line. */
function kind (frame: any): string {
  const name = frame?.subtype === undefined ? String(frame?.type) : `${String(frame.type)}/${String(frame.subtype)}`
  return typeof frame?.seq === 'number' ? `${name}#${frame.seq}` : name
}
