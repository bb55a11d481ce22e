/**
 * Process plumbing for bench/run.ts: the gateway under test (bench/gateway-proc.mjs on dist/),
 * the baselines (bench/relay.mjs, the naive bench/raw-pipe.mjs, bench/bare-server.mjs),
 * the many-session generator (bench/multi-gen.mjs) and client processes
 * (bench/clients.mjs), each a child process; Redis key clean-up; /proc reads.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { chmodSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { Redis } from 'ioredis'

export const BENCH_DIR = fileURLToPath(new URL('.', import.meta.url))
export const ROOT = join(BENCH_DIR, '..')
export const LOAD_CLI = join(BENCH_DIR, 'load-cli.mjs')
export const LIGHT_CLI = join(BENCH_DIR, 'light-cli.sh')
export const TOKEN = 'bench-token-0123456789abcdef'
export const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379'

/**
 * The V8 flags `npm start` runs the gateway with (package.json's start
 * script; the Dockerfile's CMD carries the same, test/unit/node-flags.test.ts
 * checks it): the gateway and every baseline run with them, so the bench
 * measures the runtime that is deployed and the sides differ only in code.
 */
export const NODE_FLAGS: string[] = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } })
  .scripts.start.split(/\s+/).filter((a) => a.startsWith('--'))

const children = new Set<ChildProcess>()
/** Redis key prefixes of gateways not closed yet (cleaned up on interrupt). */
export const livePrefixes = new Set<string>()

/** Ends every child this process started (by pid) — used on errors and at exit. */
export function killChildren (): void {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) {
      try { child.kill('SIGKILL') } catch { /* gone */ }
    }
  }
}

export function sleep (ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/** VmRSS of a process in bytes, from /proc/<pid>/status. */
export function procRss (pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const m = /VmRSS:\s+(\d+) kB/.exec(status)
  return m === null ? 0 : Number(m[1]) * 1024
}

/**
 * CPU time a process has used, in ms: the sum of its threads' time on a CPU
 * from /proc/<pid>/task/<tid>/schedstat (ns resolution: a short turn of a
 * few dozen lines is far below /proc/<pid>/stat's 10 ms ticks), or
 * user + system from /proc/<pid>/stat where schedstat is missing. Node's
 * threads live as long as the process, so no thread's time drops out of the
 * sum between two readings.
 */
export function procCpuMs (pid: number): number {
  try {
    let ns = 0
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try { ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]) } catch { /* thread gone */ }
    }
    if (ns > 0) return ns / 1e6
  } catch { /* no schedstat */ }
  const fields = statFields(pid)
  // utime and stime are fields 14 and 15 of the whole line (11 and 12 after the command).
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS
}

/** Minor page faults of the process so far (/proc/<pid>/stat field 10): memory it touched for the first time. */
export function procMinorFaults (pid: number): number {
  return Number(statFields(pid)[7])
}

/** /proc/<pid>/stat's fields after the command (field 3 on), which is cut off first: it may hold spaces and parentheses. */
function statFields (pid: number): string[] {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')
}

const CLOCK_TICKS = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100
  } catch {
    return 100
  }
})()

/** Open file descriptors of a process. */
export function procFds (pid: number): number {
  try {
    return readdirSync(`/proc/${pid}/fd`).length
  } catch {
    return 0
  }
}

/** Pids of a gateway's spawn helper (CLI_SPAWN=helper): its children running spawn-helper.js. */
export function helperPids (gatewayPid: number): number[] {
  const pids: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) !== gatewayPid) continue
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes('spawn-helper')) pids.push(Number(entry))
    } catch { /* gone meanwhile */ }
  }
  return pids
}

/**
 * Has the spawn helper `pid` run a full GC (bench/helper-gc.mjs) and waits
 * until it says so, for at most 5 s. A helper not yet able to be asked (still
 * loading) is left alone: its RSS is then read with its garbage.
 */
async function helperGc (pid: number, dir: string): Promise<void> {
  const file = join(dir, String(pid))
  const count = (): number => { try { return Number(readFileSync(file, 'utf8')) } catch { return -1 } }
  const before = count()
  // No file yet: the helper is still loading, and SIGUSR2 would end it.
  if (before < 0) return
  try { process.kill(pid, 'SIGUSR2') } catch { return }
  const deadline = Date.now() + 5000
  while (count() <= before && Date.now() < deadline) await sleep(5)
}

/** The hard limit on open files for this process (children inherit it; Node raises the soft limit to it). */
export function openFileLimit (): number {
  const limits = readFileSync('/proc/self/limits', 'utf8')
  const m = /Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)/.exec(limits)
  if (m === null) return 1024
  return m[2] === 'unlimited' ? 1_000_000 : Number(m[2])
}

export interface GatewayStats {
  rss: number
  heap_used: number
  external: number
  array_buffers: number
  handles: number
  handle_types: Record<string, number>
  ws_clients: number
  running_sessions: number
  /** VmRSS read from /proc right after the in-process GC. */
  proc_rss: number
  /** VmRSS of its spawn helper (0 with CLI_SPAWN=direct): part of what the gateway costs. */
  helper_rss: number
  fds: number
}

export interface Gateway {
  pid: number
  port: number
  http: string
  ws: string
  prefix: string
  dataDir: string
  stats: () => Promise<GatewayStats>
  /** Starts (label) or ends (null) a profiling window; a no-op unless started with profileDir. */
  profile: (label: string | null) => Promise<void>
  /** Writes a heap snapshot into profileDir (diagnostics); its path, or null without profileDir. */
  snapshot: (label: string) => Promise<string | null>
  createSession: () => Promise<string>
  close: () => Promise<void>
}

export interface GatewayOptions {
  env?: Record<string, string>
  claudeBin?: string
  /** Directory for a CPU profile of the gateway process (start-up excluded). */
  profileDir?: string | undefined
  /** `cpu` (default), `heap` (sampled allocations) or `heap-survivors` (only those that outlived a scavenge). */
  profileKind?: 'cpu' | 'heap' | 'heap-survivors' | undefined
}

/**
 * Builds dist/ when it is older than the sources (as `npm start` does:
 * scripts/build-if-stale.mjs), the code the bench measures. Skipped with
 * BENCH_GATEWAY_PROC, whose tree is built by whoever points there.
 */
export function buildGateway (): void {
  if (process.env.BENCH_GATEWAY_PROC !== undefined) return
  execFileSync(process.execPath, [join(ROOT, 'scripts', 'build-if-stale.mjs')], { cwd: ROOT, stdio: 'inherit' })
}

/** Starts bench/gateway-proc.mjs (the build in dist/) with Redis on, LOG_LEVEL=warn and the bench's limits. */
export async function startGateway (options: GatewayOptions = {}): Promise<Gateway> {
  const prefix = `cgwbench:${process.pid}-${randomBytes(4).toString('hex')}:`
  livePrefixes.add(prefix)
  const dataDir = mkdtempSync(join(tmpdir(), 'cgw-bench-'))
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    DATA_DIR: dataDir,
    CLAUDE_BIN: options.claudeBin ?? LOAD_CLI,
    GATEWAY_TOKENS: `${TOKEN}=bench`,
    REDIS_URL,
    REDIS_PREFIX: prefix,
    IDLE_TIMEOUT_MS: '0',
    MAX_SESSIONS: '1000',
    MAX_SESSIONS_PER_TENANT: '1000',
    MAX_CLIENTS_PER_SESSION: '20000',
    RATE_LIMIT_PER_MINUTE: '10000000',
    // 10,000 idle clients and 1,500 scaling clients connect from one address within seconds.
    WS_UPGRADES_PER_MINUTE: '10000000',
    WS_UPGRADES_PER_MINUTE_PER_ADDRESS: '10000000',
    MAX_CONNECTIONS: '1000000',
    MAX_CONNECTIONS_PER_TENANT: '1000000',
    WS_MAX_FRAMES_PER_SEC: '100000',
    EVENTS_MAX_PER_SESSION: '5000000',
    TENANT_CONFIG_DIRS: 'false',
    // The relay scenarios measure the gateway against raw pipes: no sandbox (`--only sandbox` measures its cost).
    SANDBOX: 'none',
    CLI_STOP_TIMEOUT_MS: '1000',
    SHUTDOWN_GRACE_MS: '5000',
    ...(process.env.BENCH_STALL_DUMP !== undefined ? { BENCH_STALL_DUMP: process.env.BENCH_STALL_DUMP } : {}),
    // CLI_SPAWN=direct: A/B of the spawn helper (PERFORMANCE.md §23).
    ...(process.env.CLI_SPAWN !== undefined ? { CLI_SPAWN: process.env.CLI_SPAWN } : {}),
    ...options.env
  }
  if (options.profileDir !== undefined) {
    env.BENCH_PROFILE_DIR = options.profileDir
    if (options.profileKind !== undefined) env.BENCH_PROFILE_KIND = options.profileKind
  }
  // BENCH_GATEWAY_PROC: another (built) tree's gateway-proc.mjs (A/B comparisons of src changes).
  const entry = process.env.BENCH_GATEWAY_PROC ?? join(BENCH_DIR, 'gateway-proc.mjs')
  // BENCH_GATEWAY_NODE_ARGS: extra node flags for the gateway (diagnostics, e.g. --trace-gc).
  const extra = (process.env.BENCH_GATEWAY_NODE_ARGS ?? '').split(/\s+/).filter((a) => a !== '')
  // Its spawn helper gets the preload too (a loader flag), and collects its garbage when told (helper-gc.mjs).
  env.BENCH_HELPER_GC_DIR = dataDir
  const args = ['--expose-gc', '--import', pathToFileURL(join(BENCH_DIR, 'helper-gc.mjs')).href, ...NODE_FLAGS, ...extra, entry]
  const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  children.add(child)
  let nextId = 1
  const waiting = new Map<number, (stats: any) => void>()
  const ready = new Promise<{ port: number }>((resolve, reject) => {
    child.on('message', (message: any) => {
      if (message.ready === true) resolve({ port: message.port })
      else if (message.id !== undefined) {
        waiting.get(message.id)?.(message.stats)
        waiting.delete(message.id)
      }
    })
    child.once('exit', (code) => reject(new Error(`gateway exited with ${code} before it was ready`)))
  })
  const { port } = await Promise.race([ready, sleep(30_000).then(() => { throw new Error('gateway did not start in 30 s') })])
  const pid = child.pid as number
  const http = `http://127.0.0.1:${port}`
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null) resolve()
    else child.once('exit', () => resolve())
  })
  return {
    pid,
    port,
    http,
    ws: `ws://127.0.0.1:${port}`,
    prefix,
    dataDir,
    async stats () {
      const id = nextId++
      const got = new Promise<any>((resolve) => waiting.set(id, resolve))
      child.send({ cmd: 'stats', id })
      const stats = await got
      const helpers = helperPids(pid)
      await Promise.all(helpers.map(async (p) => { await helperGc(p, dataDir) }))
      return { ...stats, proc_rss: procRss(pid), helper_rss: helpers.reduce((sum, p) => sum + procRss(p), 0), fds: procFds(pid) }
    },
    async profile (label) {
      if (options.profileDir === undefined) return
      const id = nextId++
      const done = new Promise<any>((resolve) => waiting.set(id, resolve))
      child.send(label === null ? { cmd: 'unprofile', id } : { cmd: 'profile', id, label })
      await done
    },
    async snapshot (label) {
      if (options.profileDir === undefined) return null
      const id = nextId++
      const done = new Promise<any>((resolve) => waiting.set(id, resolve))
      child.send({ cmd: 'snapshot', id, label })
      return ((await done) as { file: string }).file
    },
    async createSession () {
      const res = await fetch(`${http}/v1/sessions`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: '{}' })
      const body = await res.json() as any
      if (res.status !== 201) throw new Error(`create session: ${res.status} ${JSON.stringify(body)}`)
      return body.id as string
    },
    async close () {
      if (child.exitCode === null && child.signalCode === null) {
        child.send({ cmd: 'close' })
        await Promise.race([exited, sleep(20_000)])
        if (child.exitCode === null && child.signalCode === null) {
          child.kill('SIGKILL')
          await exited
        }
      }
      children.delete(child)
      await deleteKeys(prefix)
      livePrefixes.delete(prefix)
      rmSync(dataDir, { recursive: true, force: true })
    }
  }
}

/**
 * A helper server process of the bench: it prints {"port":n,...} as its first
 * stdout line once listening, and then one JSON line per stdin command.
 */
interface HelperProc {
  pid: number
  port: number
  /** Writes one stdin command; resolves with the next stdout line, parsed. */
  command: (line: string) => Promise<any>
  /** SIGTERM, then SIGKILL after 5 s. */
  close: () => Promise<void>
}

async function startHelper (name: string, args: string[]): Promise<HelperProc> {
  const child = spawn(process.execPath, [...NODE_FLAGS, ...args], { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] })
  children.add(child)
  const lines: Array<(line: string) => void> = []
  createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => lines.shift()?.(line))
  const first = await new Promise<string>((resolve, reject) => {
    lines.push(resolve)
    child.once('exit', (code) => reject(new Error(`${name} exited with ${code}`)))
  })
  const { port } = JSON.parse(first) as { port: number }
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  return {
    pid: child.pid as number,
    port,
    async command (line) {
      const answer = new Promise<string>((resolve) => lines.push(resolve))
      child.stdin?.write(line + '\n')
      return JSON.parse(await answer)
    },
    async close () {
      if (child.exitCode === null) {
        child.kill('SIGTERM')
        await Promise.race([exited, sleep(5000)])
        if (child.exitCode === null) child.kill('SIGKILL')
      }
      children.delete(child)
    }
  }
}

export interface RawPipe {
  pid: number
  ws: string
  close: () => Promise<void>
}

/**
 * Starts bench/raw-pipe.mjs (generator → bare ws server); with `storeKey`,
 * each line is XADDed to that Redis stream and sent once acknowledged.
 */
export async function startRawPipe (storeKey?: string): Promise<RawPipe> {
  const args = [join(BENCH_DIR, 'raw-pipe.mjs'), ...(storeKey === undefined ? [] : ['--store', REDIS_URL, storeKey])]
  const helper = await startHelper('raw pipe', args)
  return { pid: helper.pid, ws: `ws://127.0.0.1:${helper.port}`, close: helper.close }
}

/** The relay baseline's Redis mode: none, or store-before-send as one pipeline / one script call per chunk. */
export type RelayStore = 'none' | 'pipeline' | 'script'

export interface Relay {
  pid: number
  ws: string
  store: RelayStore
  /** The Redis stream of session k (store modes). */
  key: (k: number) => string
  /** RSS and heap after a full GC. */
  stats: () => Promise<{ rss: number, heap_used: number }>
  close: () => Promise<void>
}

/**
 * Starts bench/relay.mjs: the batched relay (frames built once, one write per
 * client per chunk), optionally storing each chunk in Redis before sending it,
 * with `sessions` CLIs (`cli`, default bench/load-cli.mjs).
 */
export async function startRelay (store: RelayStore, options: { sessions?: number, cli?: string } = {}): Promise<Relay> {
  const prefix = `cgwbench:${process.pid}-${randomBytes(4).toString('hex')}:`
  const args = ['--expose-gc', join(BENCH_DIR, 'relay.mjs'), '--sessions', String(options.sessions ?? 1), '--prefix', prefix]
  if (options.cli !== undefined) args.push('--cli', options.cli)
  if (store !== 'none') args.push('--store', store, '--redis', REDIS_URL)
  livePrefixes.add(prefix)
  const helper = await startHelper(`relay (${store})`, args)
  return {
    pid: helper.pid,
    ws: `ws://127.0.0.1:${helper.port}`,
    store,
    key: (k) => `${prefix}{s${k}}:events`,
    stats: async () => await helper.command('stats'),
    async close () {
      await helper.close()
      await deleteKeys(prefix)
      livePrefixes.delete(prefix)
    }
  }
}

export interface MultiGen {
  pid: number
  /** A CLAUDE_BIN for the gateway and --cli for the relay: one socat per session, connected to this generator. */
  cli: string
  close: () => Promise<void>
}

/** Starts bench/multi-gen.mjs on a socket in a fresh temporary folder, with a socat CLI script beside it. */
export async function startMultiGen (): Promise<MultiGen> {
  const dir = mkdtempSync(join(tmpdir(), 'cgw-bench-gen-'))
  const socket = join(dir, 'gen.sock')
  const cli = join(dir, 'cli.sh')
  // The gateway passes the CLI a filtered environment, so the socket path is written into the script.
  writeFileSync(cli, `#!/bin/sh\nexec socat - UNIX-CONNECT:${socket}\n`)
  chmodSync(cli, 0o755)
  const helper = await startHelper('multi-gen', [join(BENCH_DIR, 'multi-gen.mjs'), socket])
  return {
    pid: helper.pid,
    cli,
    async close () {
      await helper.close()
      rmSync(dir, { recursive: true, force: true })
    }
  }
}

export interface BareServer {
  pid: number
  /** `ws://127.0.0.1:<port>` (paths /replay and /idle). */
  ws: string
  /** `http://127.0.0.1:<port>` (path /events). */
  http: string
  /** Sends one stdin command; resolves with its JSON answer. */
  command: (line: string) => Promise<any>
  close: () => Promise<void>
}

/** Starts bench/bare-server.mjs (the baselines for resume, history, idle clients, sessions). */
export async function startBareServer (): Promise<BareServer> {
  const helper = await startHelper('bare server', ['--expose-gc', join(BENCH_DIR, 'bare-server.mjs'), '--redis', REDIS_URL])
  return { pid: helper.pid, ws: `ws://127.0.0.1:${helper.port}`, http: `http://127.0.0.1:${helper.port}`, command: helper.command, close: helper.close }
}

export interface ClientsProc {
  /** Resolves with the next {"event":...} line. */
  nextEvent: () => Promise<any>
  command: (line: string) => void
  /** Resolves with the final {"result":...}; rejects on {"error":...}. */
  result: Promise<any>
}

/** Runs bench/clients.mjs with `cfg` (see its modes). */
export function runClients (cfg: Record<string, unknown>): ClientsProc {
  const child = spawn(process.execPath, [join(BENCH_DIR, 'clients.mjs')], {
    cwd: ROOT,
    env: { ...process.env, BENCH_CFG: JSON.stringify(cfg) },
    stdio: ['pipe', 'pipe', 'inherit']
  })
  children.add(child)
  const events: any[] = []
  const eventWaiters: Array<(e: any) => void> = []
  let settle: { resolve: (v: any) => void, reject: (e: Error) => void } | null = null
  const result = new Promise<any>((resolve, reject) => { settle = { resolve, reject } })
  let final: any = null
  createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
    let msg: any
    try { msg = JSON.parse(line) } catch { process.stderr.write(`clients: ${line}\n`); return }
    if (msg.event !== undefined) {
      const w = eventWaiters.shift()
      if (w !== undefined) w(msg)
      else events.push(msg)
    } else {
      final = msg
    }
  })
  child.once('exit', (code) => {
    children.delete(child)
    if (final?.result !== undefined) settle?.resolve(final.result)
    else settle?.reject(new Error(`clients (${String(cfg.mode)}) failed (exit ${code}): ${final?.error ?? 'no result'}`))
  })
  return {
    nextEvent: () => {
      const e = events.shift()
      return e !== undefined ? Promise.resolve(e) : new Promise((resolve) => eventWaiters.push(resolve))
    },
    command: (line) => { child.stdin?.write(line + '\n') },
    result
  }
}

/** The redis-server pid when it runs on this machine (for its CPU time), else null. */
export async function redisPid (): Promise<number | null> {
  try {
    const info = await redisClient().info('server')
    const pid = Number(/process_id:(\d+)/.exec(info)?.[1])
    if (!Number.isInteger(pid) || !readFileSync(`/proc/${pid}/comm`, 'utf8').startsWith('redis')) return null
    return pid
  } catch {
    return null
  }
}

let redis: Redis | null = null
export function redisClient (): Redis {
  redis ??= new Redis(REDIS_URL, { enableAutoPipelining: true, maxRetriesPerRequest: 1, lazyConnect: false })
  return redis
}

export async function closeRedis (): Promise<void> {
  if (redis !== null) { await redis.quit().catch(() => {}); redis = null }
}

/** Deletes every key under `prefix` (SCAN + UNLINK). */
export async function deleteKeys (prefix: string): Promise<number> {
  const r = redisClient()
  let cursor = '0'
  let deleted = 0
  do {
    const [next, keys] = await r.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
    cursor = next
    if (keys.length > 0) deleted += await r.unlink(...keys)
  } while (cursor !== '0')
  return deleted
}
