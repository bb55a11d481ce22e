/**
 * End-to-end harness: a real gateway (test/support/gateway.ts) whose CLIs
 * are the REAL `claude` binary, talking to the local Messages API stand-in
 * (test/support/mock-anthropic.ts), fully offline.
 *
 *   const e = await startE2e()
 *   try {
 *     const s = await e.createSession()
 *     const c = await e.connect(s.id)          // controller, ?after=0
 *     c.sendUser('Say hello')
 *     await c.waitFor(isCli('result'), WAIT_MS)
 *   } finally {
 *     await e.close()                           // gateway, CLIs, stand-in, scratch; asserts no CLI survived
 *   }
 *
 * The CLI's environment is what the gateway would give it in production: an
 * allowlist (src/cli/cli-env.ts) of the environment handed to buildApp, which
 * here is `claudeEnv()` for a scratch HOME (short, so the CLI's socket path
 * under $XDG_RUNTIME_DIR fits in 107 bytes) pointed at the stand-in.
 */
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type TestClient, type TestGateway, eventually, gateway, processAlive } from './gateway.js'
import { type MockAnthropic, type RecordedRequest, claudeEnv, lastUserText, resolveClaudeBin, startMockAnthropic } from './mock-anthropic.js'

/** Deadline of one e2e test (each one starts one or two real CLIs). */
export const E2E_TEST_TIMEOUT_MS = 60_000
/** Longest wait for one event (the CLI answers initialize in 0.5–1.7 s, a turn in 0.2–1 s). */
export const WAIT_MS = 20_000

export const TENANT = 'tenant-a'

/** Scratch folders of one run: the CLI's HOME (and TMPDIR inside it) and the gateway's DATA_DIR. */
export interface Scratch {
  root: string
  home: string
  dataDir: string
  remove: () => void
}

export function makeScratch (): Scratch {
  // Short and real (no symlinked /tmp): the CLI's socket lives under <home>/tmp.
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'cgw-e2e-')))
  const home = join(root, 'h')
  const dataDir = join(root, 'd')
  mkdirSync(home, { recursive: true })
  mkdirSync(dataDir, { recursive: true })
  return { root, home, dataDir, remove: () => rmSync(root, { recursive: true, force: true }) }
}

export interface E2eOptions {
  /** Shared scratch (gateway restart tests); default: a fresh one, removed on close. */
  scratch?: Scratch
  /** Shared stand-in; default: a fresh one, closed on close. */
  mock?: MockAnthropic
  /** The built web console the gateway serves (default: dist/console). */
  consoleDir?: string
  /** Changes the environment the CLI's is taken from (credentials, API address); default: the offline stand-in's. */
  cliEnv?: (env: NodeJS.ProcessEnv) => NodeJS.ProcessEnv
  /** Gateway configuration overrides (environment-style), e.g. REDIS_URL / REDIS_PREFIX. */
  env?: Record<string, string>
}

export interface E2e {
  gw: TestGateway
  mock: MockAnthropic
  scratch: Scratch
  /** POST /v1/sessions (tenant-a); remembers the session and its CLI pid. */
  createSession: (body?: Record<string, unknown>) => Promise<any>
  /** WebSocket client; `after=0` by default so it sees the session's whole history. */
  connect: (sessionId: string, query?: string) => Promise<TestClient>
  /** Every event of a session via GET /v1/sessions/:id/events (null when the route is missing). */
  history: (sessionId: string) => Promise<any[] | null>
  /** The session's default working folder: <DATA_DIR>/workspaces/<tenant>/<id>. */
  workspace: (sessionId: string) => string
  /** Streaming POST /v1/messages requests seen so far (side requests excluded). */
  turns: () => RecordedRequest[]
  /** CLI pids seen so far (status frames, snapshots, history). */
  pids: () => number[]
  /** Closes the gateway (which stops every CLI), then checks no CLI or tool of its group survives. Idempotent. */
  close: () => Promise<void>
}

const liveRuns = new Set<E2e>()
const knownPids = new Set<number>()
process.once('exit', () => {
  // Last resort (a test that timed out and never reached its cleanup): no CLI outlives the run.
  for (const pid of knownPids) {
    try { process.kill(-pid, 'SIGKILL') } catch { /* gone */ }
  }
})

/** Closes every run still open (for an `after()` hook). */
export async function closeAll (): Promise<void> {
  for (const run of [...liveRuns]) await run.close().catch(() => {})
}

export async function startE2e (options: E2eOptions = {}): Promise<E2e> {
  const bin = resolveClaudeBin()
  const scratch = options.scratch ?? makeScratch()
  let mock = options.mock
  let gw: TestGateway | undefined
  // The gateway belongs to this run: closed by its close() (closeAll() for runs a test left open).
  const owned: Array<() => unknown> = []
  try {
    mock ??= await startMockAnthropic()
    gw = await gateway({ after: (fn) => { owned.push(fn) } }, {
      dataDir: scratch.dataDir,
      env: {
        CLAUDE_BIN: bin,
        CLAUDE_ARGS_EXTRA: '', // no fake-CLI flags
        SANDBOX: 'bwrap', // as in production: the real CLI reaches the stand-in only through the egress proxy
        ...options.env
      },
      parts: {
        env: (options.cliEnv ?? ((env) => env))(claudeEnv({ home: scratch.home, baseUrl: mock.url, sdk: false })),
        ...(options.consoleDir === undefined ? {} : { consoleDir: options.consoleDir })
      }
    })
  } catch (err) {
    if (options.mock === undefined) await mock?.close()
    if (options.scratch === undefined) scratch.remove()
    throw err
  }
  const g = gw
  const m = mock
  const sessionIds = new Set<string>()
  /** Sessions created through this gateway (each started a CLI). */
  const createdIds = new Set<string>()
  const clients: TestClient[] = []
  const pids = new Set<number>()
  const notePid = (pid: unknown): void => {
    if (typeof pid === 'number' && pid > 0) { pids.add(pid); knownPids.add(pid) }
  }
  const notePidsIn = (frames: any[]): void => {
    for (const f of frames) if (f?.type === 'gateway' && f.subtype === 'status') notePid(f.pid)
  }

  const history = async (sessionId: string): Promise<any[] | null> => {
    const events: any[] = []
    let after = 0
    for (;;) {
      const res = await g.request('GET', `/v1/sessions/${sessionId}/events?after=${after}&limit=1000`)
      if (res.status === 404 && res.body?.code === 'not_found') return null // route not there
      assert.equal(res.status, 200, `GET events: ${JSON.stringify(res.body)}`)
      events.push(...res.body.events)
      if (res.body.has_more !== true) break
      after = res.body.next_after
    }
    notePidsIn(events)
    return events
  }

  let closing: Promise<void> | null = null
  const run: E2e = {
    gw: g,
    mock: m,
    scratch,
    async createSession (body = {}) {
      const snapshot = await g.createSession(body)
      sessionIds.add(snapshot.id)
      createdIds.add(snapshot.id)
      notePid(snapshot.pid)
      return snapshot
    },
    async connect (sessionId, query = 'after=0') {
      sessionIds.add(sessionId)
      const client = await g.connect(sessionId, query)
      clients.push(client)
      return client
    },
    history,
    workspace: (sessionId) => join(scratch.dataDir, 'workspaces', TENANT, sessionId),
    turns: () => m.messageRequests().filter((r) => r.stream),
    pids: () => {
      for (const c of clients) notePidsIn(c.frames)
      return [...pids]
    },
    close () {
      closing ??= (async () => {
        liveRuns.delete(run)
        try {
          // Every CLI this gateway started is in its session's history: status frames carry the pid.
          const unseen: string[] = []
          for (const id of sessionIds) {
            const events = await history(id).catch(() => null)
            if (createdIds.has(id) && events !== null && !events.some(isGateway('status', { status: 'starting' }))) unseen.push(id)
          }
          for (const c of clients) notePidsIn(c.frames)
          for (const cleanup of owned) await cleanup()
          const survivors: number[] = []
          for (const pid of pids) {
            if (processAlive(pid)) survivors.push(pid)
            // Tools the CLI started share its process group; the gateway ends the group after the CLI.
            else await eventually(() => !groupAlive(pid), 5000, `process group ${pid} to end`).catch(() => survivors.push(-pid))
          }
          for (const pid of survivors) {
            try { process.kill(-Math.abs(pid), 'SIGKILL') } catch { /* gone meanwhile */ }
          }
          for (const pid of pids) if (!survivors.includes(pid) && !survivors.includes(-pid)) knownPids.delete(pid)
          assert.deepEqual(survivors, [], 'CLI pids (negative: process groups) that outlived the gateway\'s close')
          assert.deepEqual(unseen, [], 'sessions whose history shows no CLI start')
        } finally {
          if (options.mock === undefined) await m.close()
          if (options.scratch === undefined) scratch.remove()
        }
      })()
      return closing
    }
  }
  liveRuns.add(run)
  return run
}

/** True while any process of group `pgid` exists. */
export function groupAlive (pgid: number): boolean {
  try {
    process.kill(-pgid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

// ---- frame predicates ----

/** A relayed CLI message of that type (and subtype). */
export const isCli = (type: string, subtype?: string) => (f: any): boolean =>
  f?.type === type && (subtype === undefined || f.subtype === subtype)

/** A gateway frame of that subtype whose fields include `fields`. */
export const isGateway = (subtype: string, fields: Record<string, unknown> = {}) => (f: any): boolean =>
  f?.type === 'gateway' && f.subtype === subtype && Object.entries(fields).every(([k, v]) => f[k] === v)

export const isCanUseTool = (f: any): boolean => f?.type === 'control_request' && f.request?.subtype === 'can_use_tool'

/**
 * The streamed request of the turn prompted with `text`. Its last user message
 * may carry more before the prompt (after set_model, the CLI prepends a
 * transcript of the `/model` command to it).
 */
export const streamedPrompt = (text: string) => (r: RecordedRequest): boolean => r.stream && lastUserText(r.body).endsWith(text)

/** The CLI's control_response to a request a client (or the gateway) sent. */
export const isResponseTo = (requestId: string) => (f: any): boolean =>
  f?.type === 'control_response' && f.response?.request_id === requestId

/**
 * The first frame from index `from` matching `predicate`; fails at once,
 * with the CLI's exit report (stderr tail included), if the session's CLI
 * exits by itself first, instead of waiting out the timeout.
 */
export async function waitLive (client: TestClient, predicate: (f: any) => boolean, from = 0, timeoutMs = WAIT_MS): Promise<any> {
  const exited = isGateway('status', { status: 'exited' })
  const frame = await client.waitFor((f) => predicate(f) || exited(f), timeoutMs, from)
  if (!predicate(frame)) throw new Error(`the CLI exited while waiting for ${predicate.toString()}: ${JSON.stringify(frame.exit)}`)
  return frame
}

/** Seqs of the frames that carry one, asserting they ascend without gaps or duplicates. */
export function assertContiguous (frames: any[], from = 1): number[] {
  const seqs = frames.filter((f) => typeof f.seq === 'number').map((f) => f.seq as number)
  assert.deepEqual(seqs, Array.from({ length: seqs.length }, (_, i) => from + i), `seqs not contiguous from ${from}: ${seqs.join(',')}`)
  return seqs
}

export function allowAnswer (requestId: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { type: 'control_response', response: { subtype: 'success', request_id: requestId, response: { behavior: 'allow', ...extra } } }
}

export function denyAnswer (requestId: string, message: string): Record<string, unknown> {
  return { type: 'control_response', response: { subtype: 'success', request_id: requestId, response: { behavior: 'deny', message } } }
}

export function controlRequest (requestId: string, request: Record<string, unknown>): Record<string, unknown> {
  return { type: 'control_request', request_id: requestId, request }
}
