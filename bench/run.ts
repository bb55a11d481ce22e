/**
 * `npm run bench [-- --quick] [-- --soak 10m] [-- --only a,b] [-- --profile | --heap-profile] [-- --memory-store] [-- --faults]`
 *
 * Measures the gateway (bench/gateway-proc.ts, Redis store on, own process)
 * against baselines measured in the same run: a raw pipe (bench/raw-pipe.mjs:
 * the same generator, lines forwarded over a bare ws server) and Redis
 * ceilings (redis-benchmark and a bare ioredis pipelined XADD loop). Clients
 * run in other processes (bench/clients.mjs). Prints a markdown table and
 * writes bench/results/latest.md and latest.json (--soak: soak.md/.json;
 * --quick: quick.json; --only: partial.json). --profile (--heap-profile)
 * CPU-profiles (allocation-profiles) the gateway during each measured phase
 * into .tmp/bench-prof/; summarise with bench/profile-summary.mjs.
 * --faults runs only the fault suite (bench/faults.ts: faults.md and faults.json;
 * with --quick, smaller sizes and faults-quick.json only).
 * See docs/PERFORMANCE.md for how to read it.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { cpus, loadavg, totalmem } from 'node:os'
import { join } from 'node:path'
import {
  BENCH_DIR, ROOT, type Gateway, LIGHT_CLI, type RawPipe, TOKEN, closeRedis, deleteKeys, killChildren, livePrefixes, openFileLimit, procCpuMs,
  redisClient, redisPid, runClients, sleep, startBareServer, startGateway, startRawPipe
} from './lib.js'
import { ioredisPipelineLoop, redisBenchmark, redisRoundTrip, storeAppendLoop } from './redis-baseline.js'
import { measureSandbox, median } from './sandbox.js'
import { FULL_SIZES, QUICK_SIZES, renderFaults, runFaultSuite } from './faults.js'

// ---------------------------------------------------------------- options

interface Options { quick: boolean, soakMs: number | null, only: Set<string> | null, profile: 'cpu' | 'heap' | 'heap-survivors' | null, memoryStore: boolean, faults: boolean }

function parseDuration (text: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim())
  if (m === null) throw new Error(`bad duration: ${text} (use e.g. 30s, 10m)`)
  const unit = m[2] ?? 's'
  return Number(m[1]) * (unit === 'ms' ? 1 : unit === 's' ? 1000 : unit === 'm' ? 60_000 : 3_600_000)
}

function parseArgs (argv: string[]): Options {
  const o: Options = { quick: false, soakMs: null, only: null, profile: null, memoryStore: false, faults: false }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string
    const [flag, inline] = a.includes('=') ? [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)] : [a, undefined]
    const value = (): string => inline ?? argv[++i] ?? ''
    if (flag === '--quick') o.quick = true
    else if (flag === '--soak') o.soakMs = parseDuration(value())
    else if (flag === '--only') o.only = new Set(value().split(',').map((s) => s.trim()).filter(Boolean))
    else if (flag === '--profile') o.profile = 'cpu'
    else if (flag === '--heap-profile') o.profile = 'heap'
    else if (flag === '--survivor-profile') o.profile = 'heap-survivors'
    else if (flag === '--memory-store') o.memoryStore = true
    else if (flag === '--faults') o.faults = true
    else if (flag === '--help' || flag === '-h') {
      process.stdout.write('npm run bench -- [--quick] [--soak 10m] [--only redis,latency1,latency10,saturation,fanout,permission,replay,idle,sessions,sandbox] [--profile | --heap-profile | --survivor-profile] [--memory-store] [--faults]\n')
      process.exit(0)
    } else throw new Error(`unknown option ${a}`)
  }
  if (o.faults && (o.soakMs !== null || o.only !== null || o.profile !== null || o.memoryStore)) throw new Error('--faults runs the fault suite alone (with --quick at most)')
  return o
}

const opts = parseArgs(process.argv.slice(2))
const Q = opts.quick
const sizes = {
  bytes: 512,
  latencyLines: Q ? 2000 : 10_000,
  latencyRate: 1000,
  latencyReps: Q ? 1 : 3,
  warmLines: Q ? 1000 : 3000,
  saturationLines: Q ? 30_000 : 200_000,
  fanoutClients: 100,
  fanoutLines: Q ? 1000 : 5000,
  permissionCount: Q ? 200 : 3000,
  permissionWarm: Q ? 200 : 1000,
  permissionReps: Q ? 1 : 3,
  replayEvents: 10_000,
  resumeReps: Q ? 3 : 7,
  historyReps: Q ? 1 : 3,
  idleClients: Q ? 1000 : 10_000,
  sessions: Q ? 50 : 500,
  redisN: Q ? 50_000 : 200_000
}
const RESULTS = join(BENCH_DIR, 'results')
/** CPU profiles (--profile) go to the git-ignored .tmp/. */
const PROFILE_DIR = join(ROOT, '.tmp', 'bench-prof')

// ---------------------------------------------------------------- results

interface Row {
  scenario: string
  metric: string
  unit: string
  gateway: number | null
  baseline: number | null
  /** gateway / baseline */
  ratio: number | null
  target: string
  pass: boolean | null
  note?: string
}

const rows: Row[] = []
const raw: Record<string, unknown> = {}
const notes: string[] = []

function row (r: Omit<Row, 'ratio'> & { ratio?: number | null }): void {
  const ratio = r.ratio !== undefined ? r.ratio : r.gateway !== null && r.baseline !== null && r.baseline !== 0 ? r.gateway / r.baseline : null
  rows.push({ ...r, ratio })
}

function want (name: string): boolean {
  return opts.only === null || opts.only.has(name)
}

function log (text: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${text}\n`)
}

// ---------------------------------------------------------------- helpers

let sharedGateway: Gateway | null = null

/** --memory-store (diagnostic): run the gateway without Redis, to isolate the cost of the Redis hop. */
function storeEnv (): Record<string, string> {
  return opts.memoryStore ? { REDIS_URL: '' } : {}
}
let sharedRaw: RawPipe | null = null
/** The session the last gateway streamTurn used. */
let lastSession = ''

async function gateway (): Promise<Gateway> {
  sharedGateway ??= await startGateway({ profileDir: opts.profile !== null ? PROFILE_DIR : undefined, profileKind: opts.profile ?? undefined, env: storeEnv() })
  return sharedGateway
}

async function rawPipe (): Promise<RawPipe> {
  sharedRaw ??= await startRawPipe()
  return sharedRaw
}

interface StreamRun { latency_ms: any, frames: number, frames_per_s: number, span_s: number, missing: number, disorder: number, seq_bad: number, closed: number[], lines_per_s_per_client: any, generator: any, cpu_ms?: number, cpu_us_per_line?: number, redis_cpu_us_per_line?: number | null }

/**
 * One warm-up turn then one measured turn, `clients` sockets in one clients
 * process. Also reads the CPU time the gateway (or raw pipe) process used
 * during the measured turn: a figure much less disturbed by other load on
 * the machine than wall-clock throughput.
 */
async function streamTurn (label: string, target: 'raw' | 'gateway', clients: number, spec: Record<string, number>, warm: Record<string, number>): Promise<StreamRun> {
  const cfg: Record<string, unknown> = { mode: 'stream', clients, turns: [{ spec: warm, measure: false }, { spec, measure: true }], timeout_ms: 300_000, wait_go: true }
  let pid: number
  if (target === 'raw') {
    const rp = await rawPipe()
    cfg.url = rp.ws
    pid = rp.pid
  } else {
    const gw = await gateway()
    cfg.url = gw.ws
    cfg.token = TOKEN
    cfg.session = lastSession = await gw.createSession()
    pid = gw.pid
  }
  const proc = runClients(cfg)
  await proc.nextEvent()
  proc.command('go')
  await proc.nextEvent()
  const rpid = target === 'gateway' ? await redisPid() : null
  if (target === 'gateway') await (await gateway()).profile(`${label}-${clients}c-${spec.rate ?? 0}`)
  const cpu0 = procCpuMs(pid)
  const rcpu0 = rpid === null ? 0 : procCpuMs(rpid)
  proc.command('go')
  const result = await proc.result
  const cpu = procCpuMs(pid) - cpu0
  if (target === 'gateway') await (await gateway()).profile(null)
  const rcpu = rpid === null ? null : procCpuMs(rpid) - rcpu0
  const run = result.turns[0] as StreamRun
  const lines = spec.lines ?? 1
  return { ...run, cpu_ms: cpu, cpu_us_per_line: (cpu * 1000) / lines, redis_cpu_us_per_line: rcpu === null ? null : (rcpu * 1000) / lines }
}

/** The same, with the clients spread over `procs` processes (fan-out). */
async function streamTurnMulti (target: 'raw' | 'gateway', clients: number, procs: number, spec: Record<string, number>, warm: Record<string, number>): Promise<StreamRun & { per_proc: StreamRun[] }> {
  const base: Record<string, unknown> = { mode: 'stream', turns: [{ spec: warm, measure: false }, { spec, measure: true }], timeout_ms: 300_000, wait_go: true }
  if (target === 'raw') {
    base.url = (await rawPipe()).ws
  } else {
    const gw = await gateway()
    base.url = gw.ws
    base.token = TOKEN
    base.session = await gw.createSession()
  }
  const per = Math.ceil(clients / procs)
  const runs = Array.from({ length: procs }, (_v, p) => runClients({ ...base, clients: Math.min(per, clients - p * per), controller: p === 0 }))
  for (let turn = 0; turn < 2; turn++) {
    await Promise.all(runs.map((r) => r.nextEvent()))
    if (turn === 1 && target === 'gateway') await (await gateway()).profile(`fanout-${clients}c`)
    for (const r of runs) r.command('go')
  }
  const all = await Promise.all(runs.map((r) => r.result))
  if (target === 'gateway') await (await gateway()).profile(null)
  const results = all.map((r) => r.turns[0] as StreamRun & { first_send_ns: number, last_recv_ns: number })
  const first = Math.min(...results.map((r) => r.first_send_ns))
  const last = Math.max(...results.map((r) => r.last_recv_ns))
  const frames = results.reduce((s, r) => s + r.frames, 0)
  const span = (last - first) / 1e9
  const p99s = results.map((r) => r.latency_ms.p99 as number)
  return {
    latency_ms: { p50: Math.max(...results.map((r) => r.latency_ms.p50 as number)), p99: Math.max(...p99s), note: 'worst process' },
    frames,
    frames_per_s: frames / span,
    span_s: span,
    missing: results.reduce((s, r) => s + r.missing, 0),
    disorder: results.reduce((s, r) => s + r.disorder, 0),
    seq_bad: results.reduce((s, r) => s + r.seq_bad, 0),
    closed: results.flatMap((r) => r.closed),
    lines_per_s_per_client: null,
    generator: results[0]?.generator,
    per_proc: results
  }
}

function integrity (run: StreamRun): string {
  const bad: string[] = []
  if (run.missing !== 0) bad.push(`${run.missing} missing`)
  if (run.disorder !== 0) bad.push(`${run.disorder} out of order`)
  if (run.seq_bad !== 0) bad.push(`${run.seq_bad} seq breaks`)
  if (run.closed.length !== 0) bad.push(`closed ${run.closed.join(',')}`)
  return bad.length === 0 ? '' : bad.join('; ')
}

const fmt = (v: number | null | undefined, digits = 2): string => v === null || v === undefined || !Number.isFinite(v) ? '—' : v.toFixed(digits)
const KiB = 1024

// ---------------------------------------------------------------- scenarios

async function scenarioRedis (): Promise<void> {
  log('redis ceiling: redis-benchmark and ioredis pipeline loop')
  const rb = await redisBenchmark(sizes.redisN, sizes.bytes)
  const loops = []
  const stores = []
  const count = (batch: number): number => batch === 1 ? Math.min(20_000, sizes.redisN / 5) : sizes.redisN / 2
  for (const batch of [1, 16, 128]) {
    loops.push(await ioredisPipelineLoop(count(batch), batch, sizes.bytes))
    stores.push(await storeAppendLoop(count(batch), batch, sizes.bytes))
  }
  const rtt = await redisRoundTrip(Q ? 1000 : 5000, sizes.latencyRate, sizes.bytes)
  raw.redis = { redis_benchmark: rb, ioredis_loop: loops, store_append_loop: stores, round_trip: rtt }
  row({ scenario: 'Redis ceiling', metric: `redis-benchmark -P 16 XADD (${sizes.bytes} B values, 50 connections)`, unit: 'req/s', gateway: null, baseline: rb.requests_per_s, target: 'reference', pass: null, note: rb.error ?? '' })
  for (let i = 0; i < loops.length; i++) {
    const l = loops[i] as (typeof loops)[number]
    const st = stores[i] as (typeof stores)[number]
    row({ scenario: 'Redis ceiling', metric: `batches of ${l.batch}, 1 in flight: gateway RedisStore.append vs bare ioredis XADD pipeline`, unit: 'events/s', gateway: st.events_per_s, baseline: l.events_per_s, target: 'reference', pass: null, note: `${fmt(st.batch_ms, 3)} vs ${fmt(l.batch_ms, 3)} ms per batch` })
  }
  row({ scenario: 'Redis ceiling', metric: `one XADD round trip at ${rtt.rate}/s, bare ioredis: p50 / p99`, unit: 'ms', gateway: null, baseline: rtt.p50_ms, target: 'reference', pass: null, note: `p99 ${fmt(rtt.p99_ms)} ms, p99.9 ${fmt(rtt.p999_ms)} ms, max ${fmt(rtt.max_ms)} ms (${rtt.n} samples): the floor of what storing before relaying adds` })
}

/** Median of each latency percentile over runs (runs are interleaved raw/gateway pairs). */
function medianLatency (runs: StreamRun[]): Record<string, number> {
  const med = (xs: number[]): number => { const a = [...xs].sort((x, y) => x - y); return a[Math.floor((a.length - 1) / 2)] as number }
  const out: Record<string, number> = {}
  for (const k of ['p50', 'p90', 'p99', 'p999', 'max']) out[k] = med(runs.map((r) => r.latency_ms[k] as number))
  out.cpu_us_per_line = med(runs.map((r) => r.cpu_us_per_line ?? NaN))
  return out
}

async function scenarioLatency (clients: number): Promise<void> {
  const name = clients === 1 ? 'latency1' : 'latency10'
  const spec = { lines: sizes.latencyLines, rate: sizes.latencyRate, bytes: sizes.bytes }
  const warm = { lines: sizes.warmLines, rate: 2000, bytes: sizes.bytes }
  const rawRuns: StreamRun[] = []
  const gwRuns: StreamRun[] = []
  for (let rep = 0; rep < sizes.latencyReps; rep++) {
    log(`${name}: ${clients} client(s), ${spec.lines} lines at ${spec.rate}/s, raw then gateway (run ${rep + 1} of ${sizes.latencyReps})`)
    rawRuns.push(await streamTurn(name, 'raw', clients, spec, warm))
    gwRuns.push(await streamTurn(name, 'gateway', clients, spec, warm))
  }
  raw[name] = { raw: rawRuns, gateway: gwRuns }
  const scenario = `Latency, 1 session, ${clients} client${clients === 1 ? '' : 's'}, ${spec.rate} lines/s`
  const problems = [...gwRuns.map((g) => integrity(g) && `gateway: ${integrity(g)}`), ...rawRuns.map((r) => integrity(r) && `raw: ${integrity(r)}`)].filter(Boolean)
  const gl = medianLatency(gwRuns)
  const rl = medianLatency(rawRuns)
  const runs = sizes.latencyReps > 1 ? `median of ${sizes.latencyReps} runs of ${spec.lines} lines` : `${spec.lines} lines`
  const note = [...problems, runs, `CPU/line ${fmt(gl.cpu_us_per_line, 0)} µs vs raw ${fmt(rl.cpu_us_per_line, 0)} µs`].join('; ')
  if (clients === 1) {
    row({ scenario, metric: 'p50', unit: 'ms', gateway: gl.p50 as number, baseline: rl.p50 as number, target: 'raw + 0.5 ms', pass: (gl.p50 as number) <= (rl.p50 as number) + 0.5 && problems.length === 0, note })
    row({ scenario, metric: 'p99', unit: 'ms', gateway: gl.p99 as number, baseline: rl.p99 as number, target: 'raw + 3 ms', pass: (gl.p99 as number) <= (rl.p99 as number) + 3 })
  } else {
    row({ scenario, metric: 'p50', unit: 'ms', gateway: gl.p50 as number, baseline: rl.p50 as number, target: '—', pass: null, note })
    row({ scenario, metric: 'p99', unit: 'ms', gateway: gl.p99 as number, baseline: rl.p99 as number, target: 'raw + 5 ms', pass: (gl.p99 as number) <= (rl.p99 as number) + 5 && problems.length === 0 })
  }
  row({ scenario, metric: 'p99.9', unit: 'ms', gateway: gl.p999 as number, baseline: rl.p999 as number, target: '—', pass: null, note: `max ${fmt(gl.max)} vs ${fmt(rl.max)} ms` })
}

async function scenarioSaturation (): Promise<void> {
  const spec = { lines: sizes.saturationLines, rate: 0, bytes: sizes.bytes }
  const warm = { lines: Math.min(20_000, spec.lines / 4), rate: 0, bytes: sizes.bytes }
  log(`saturation: ${spec.lines} lines as fast as possible, 1 client, raw then gateway`)
  const r = await streamTurn('saturation', 'raw', 1, spec, warm)
  const g = await streamTurn('saturation', 'gateway', 1, spec, warm)
  // Store-before-relay: every delivered line was in Redis before it was sent. Check the stream too.
  const gw = await gateway()
  const xlen = opts.memoryStore ? Infinity : await redisClient().xlen(`${gw.prefix}{${lastSession}}:events`)
  raw.saturation = { raw: r, gateway: g, redis_xlen: xlen }
  const scenario = `Saturation, 1 session, 1 client, ${sizes.bytes} B lines`
  const note = [integrity(g) && `gateway: ${integrity(g)}`, `stream holds ${xlen} events (≥ ${spec.lines + warm.lines} lines expected)`].filter(Boolean).join(' ')
  row({ scenario, metric: 'lines/s persisted and delivered', unit: 'lines/s', gateway: g.frames_per_s, baseline: r.frames_per_s, target: '≥ 40,000 and ≥ 0.5 × raw', pass: g.frames_per_s >= 40_000 && g.frames_per_s >= 0.5 * r.frames_per_s && xlen >= spec.lines + warm.lines, note })
  row({ scenario, metric: 'CPU per line (process user+sys)', unit: 'µs', gateway: g.cpu_us_per_line ?? null, baseline: r.cpu_us_per_line ?? null, target: '—', pass: null, note: `gateway process vs raw-pipe process; redis-server ${g.redis_cpu_us_per_line == null ? 'n/a' : `${fmt(g.redis_cpu_us_per_line, 1)} µs`} more per line` })
}

async function scenarioFanout (): Promise<void> {
  const n = sizes.fanoutClients
  const spec = { lines: sizes.fanoutLines, rate: 0, bytes: sizes.bytes }
  const warm = { lines: Math.max(200, spec.lines / 5), rate: 0, bytes: sizes.bytes }
  log(`fan-out: ${n} clients (2 processes), ${spec.lines} lines as fast as possible, raw then gateway`)
  const r = await streamTurnMulti('raw', n, 2, spec, warm)
  const g = await streamTurnMulti('gateway', n, 2, spec, warm)
  raw.fanout = { raw: r, gateway: g }
  const scenario = `Fan-out, 1 session, ${n} clients`
  row({ scenario, metric: 'frames/s delivered (total)', unit: 'frames/s', gateway: g.frames_per_s, baseline: r.frames_per_s, target: '≥ 100,000', pass: g.frames_per_s >= 100_000, note: [integrity(g) && `gateway: ${integrity(g)}`, `${spec.lines} lines × ${n} clients`].filter(Boolean).join(' ') })
}

async function scenarioPermission (): Promise<void> {
  const spec = { permission: true, count: sizes.permissionCount, gap_ms: 2 }
  const warm = { ...spec, count: sizes.permissionWarm }
  const reps = sizes.permissionReps
  const gw = await gateway()
  const session = await gw.createSession()
  // A second baseline: the raw pipe, but each line XADDed to Redis and sent on
  // the acknowledgement. The gateway must store a prompt before any client
  // sees it (issue 3), so this is the least any conforming relay pays.
  const storedKey = `cgwbench:${process.pid}-stored-raw`
  const stored = opts.memoryStore ? null : await startRawPipe(storedKey)
  const rawRuns: any[] = []
  const gwRuns: any[] = []
  const storedRuns: any[] = []
  let firstRound: unknown = null
  try {
    // Interleaved like the latency runs, so a noisy minute hits every side;
    // each run warms up (JIT) on its own socket first, then measures.
    for (let rep = -1; rep < reps; rep++) {
      // Round -1 is not counted: see docs/PERFORMANCE.md ("Permission round trip").
      log(`permission: ${spec.count} can_use_tool round trips after ${warm.count} warm-up ones: raw, gateway${stored === null ? '' : ', raw + XADD'} (${rep < 0 ? 'uncounted first round' : `run ${rep + 1} of ${reps}`})`)
      const r = await runClients({ mode: 'permission', url: (await rawPipe()).ws, spec, warm, timeout_ms: 120_000 }).result
      if (rep === reps - 1) await gw.profile('permission')
      const g = await runClients({ mode: 'permission', url: gw.ws, token: TOKEN, session, spec, warm, timeout_ms: 120_000 }).result
      if (rep === reps - 1) await gw.profile(null)
      const x = stored === null ? null : await runClients({ mode: 'permission', url: stored.ws, spec, warm, timeout_ms: 120_000 }).result
      if (rep < 0) { firstRound = { raw: r, gateway: g, raw_xadd: x }; continue }
      rawRuns.push(r)
      gwRuns.push(g)
      if (x !== null) storedRuns.push(x)
    }
  } finally {
    await stored?.close()
  }
  raw.permission = { raw: rawRuns, gateway: gwRuns, raw_xadd: storedRuns, uncounted_first_round: firstRound }
  const pick = (runs: any[], k: string): number => { const a = runs.map((r) => r.rtt_ms[k] as number).sort((x, y) => x - y); return a[Math.floor((a.length - 1) / 2)] as number }
  const perRun = (runs: any[]): string => runs.map((x) => fmt(x.rtt_ms.p99)).join(', ')
  const runs = reps > 1 ? `median of ${reps} runs of ${spec.count} prompts` : `${spec.count} prompts`
  const scenario = 'Permission round trip (generator-measured)'
  row({ scenario, metric: 'p50', unit: 'ms', gateway: pick(gwRuns, 'p50'), baseline: pick(rawRuns, 'p50'), target: '—', pass: null, note: `${runs} after an uncounted first round; each run after ${warm.count} warm-up prompts` })
  row({ scenario, metric: 'p99', unit: 'ms', gateway: pick(gwRuns, 'p99'), baseline: pick(rawRuns, 'p99'), target: 'raw + 1 ms', pass: pick(gwRuns, 'p99') <= pick(rawRuns, 'p99') + 1, note: `per run: gateway ${perRun(gwRuns)}; raw ${perRun(rawRuns)}` })
  row({ scenario, metric: 'p99.9', unit: 'ms', gateway: pick(gwRuns, 'p999'), baseline: pick(rawRuns, 'p999'), target: '—', pass: null })
  if (storedRuns.length > 0) {
    const s2 = 'Permission round trip vs raw pipe + XADD before send'
    row({ scenario: s2, metric: 'p50', unit: 'ms', gateway: pick(gwRuns, 'p50'), baseline: pick(storedRuns, 'p50'), target: 'reference', pass: null, note: 'baseline: the raw pipe storing each line in Redis before sending it (the hop issue 3 requires)' })
    row({ scenario: s2, metric: 'p99', unit: 'ms', gateway: pick(gwRuns, 'p99'), baseline: pick(storedRuns, 'p99'), target: 'reference', pass: null, note: `per run: raw + XADD ${perRun(storedRuns)}` })
  }
}

async function scenarioReplay (): Promise<void> {
  log(`resume + history: ${sizes.replayEvents} events, reconnect with ?after= and GET /events pages of 1000`)
  const gw = await gateway()
  const session = await gw.createSession()
  await gw.profile('replay')
  const res = await runClients({
    mode: 'replay', url: gw.ws, http: gw.http, token: TOKEN, session,
    lines: sizes.replayEvents, bytes: sizes.bytes, resume_reps: sizes.resumeReps, history_reps: sizes.historyReps, timeout_ms: 120_000
  }).result
  await gw.profile(null)
  // Baseline: the same events read from the same stream by bench/bare-server.mjs.
  const bareServer = await startBareServer()
  let bare: any
  try {
    bare = await runClients({
      mode: 'replay', url: `${bareServer.ws}/replay`, http: bareServer.http,
      bare: { key: `${gw.prefix}{${session}}:events`, after: res.after, last: res.last_seq },
      resume_reps: sizes.resumeReps, history_reps: sizes.historyReps, timeout_ms: 120_000
    }).result
  } finally {
    await bareServer.close()
  }
  raw.replay = { gateway: res, bare }
  const bad = res.resume.some((x: any) => x.bad !== 0 || x.count < x.expected) || res.history_checks.bad !== 0
  const bareBad = bare.resume.some((x: any) => x.bad !== 0 || x.count < x.expected) || bare.history_checks.bad !== 0
  const bareNote = bareBad ? '; BARE BASELINE ORDER/COUNT CHECK FAILED' : ''
  row({ scenario: `Resume: reconnect with ${res.events} missed events`, metric: 'time until all delivered (median)', unit: 'ms', gateway: res.resume_ms.p50, baseline: bare.resume_ms.p50, target: '≤ 250 ms', pass: res.resume_ms.p50 <= 250 && !bad, note: `${res.resume_ms.n} runs, max ${fmt(res.resume_ms.max)} ms${bad ? '; ORDER/COUNT CHECK FAILED' : ''}; baseline: XRANGE pages sent over a bare ws server${bareNote}` })
  row({ scenario: 'History: GET /events, 1,000 events per page', metric: 'ms per page (median)', unit: 'ms', gateway: res.history_page_ms.p50, baseline: bare.history_page_ms.p50, target: '≤ 15 ms', pass: res.history_page_ms.p50 <= 15 && res.history_checks.bad === 0, note: `${res.history_pages} pages of ~${fmt(res.history_page_bytes.p50 / 1024, 0)} KiB, p90 ${fmt(res.history_page_ms.p90)} ms; baseline: XRANGE answered by a bare node:http server${bareNote}` })
}

async function scenarioIdle (): Promise<void> {
  let count = sizes.idleClients
  const limit = openFileLimit()
  if (count + 500 > limit) {
    const capped = Math.max(100, limit - 500)
    notes.push(`Idle clients capped at ${capped} (open-file hard limit ${limit}; each of the gateway and the client process needs one fd per socket). Raise it with \`ulimit -Hn\` as root to run ${count}.`)
    count = capped
  }
  log(`idle clients: ${count} WebSocket clients on one session (fresh gateway)`)
  const gw = await startGateway({ env: storeEnv() })
  try {
    const session = await gw.createSession()
    // Warm the route (first-use allocations are not per-connection cost).
    const warm = runClients({ mode: 'idle', url: gw.ws, token: TOKEN, session, count: 50, concurrency: 50 })
    await warm.nextEvent()
    warm.command('close')
    await warm.result
    await sleep(500)
    const before = await gw.stats()
    const proc = runClients({ mode: 'idle', url: gw.ws, token: TOKEN, session, count, concurrency: 200 })
    const connected = await proc.nextEvent()
    await sleep(1000)
    const after = await gw.stats()
    proc.command('close')
    const res = await proc.result
    const n = connected.n as number
    const perConn = (after.proc_rss - before.proc_rss) / n
    const heapPer = (after.heap_used - before.heap_used) / n
    const bare = await bareIdle(count)
    raw.idle = { count, connected, before, after, result: res, per_connection_rss: perConn, per_connection_heap: heapPer, bare }
    row({
      scenario: `Idle WebSocket clients (${n})`, metric: 'RSS per connection', unit: 'KiB', gateway: perConn / KiB, baseline: bare.per_connection_rss / KiB, target: '≤ 10 KiB', pass: perConn / KiB <= 10 && n === count,
      note: `RSS ${fmt(before.proc_rss / 2 ** 20, 1)} → ${fmt(after.proc_rss / 2 ** 20, 1)} MiB after GC; heap ${fmt(heapPer / KiB, 1)} KiB/conn; connect ${fmt(connected.ms / 1000, 1)} s${connected.failed ? `; ${connected.failed} failed` : ''}; baseline: a bare ws server holding ${bare.n} sockets`
    })
  } finally {
    await gw.close()
  }
}

/** The idle-clients baseline: RSS per socket held by bench/bare-server.mjs, measured the same way. */
async function bareIdle (count: number): Promise<{ n: number, per_connection_rss: number, per_connection_heap: number }> {
  const bare = await startBareServer()
  try {
    const warm = runClients({ mode: 'idle', url: `${bare.ws}/idle`, count: 50, concurrency: 50 })
    await warm.nextEvent()
    warm.command('close')
    await warm.result
    await sleep(500)
    const before = await bare.command('stats')
    const proc = runClients({ mode: 'idle', url: `${bare.ws}/idle`, count, concurrency: 200 })
    const connected = await proc.nextEvent()
    await sleep(1000)
    const after = await bare.command('stats')
    proc.command('close')
    await proc.result
    const n = connected.n as number
    return { n, per_connection_rss: (after.rss - before.rss) / n, per_connection_heap: (after.heap_used - before.heap_used) / n }
  } finally {
    await bare.close()
  }
}

async function scenarioSessions (): Promise<void> {
  const count = sizes.sessions
  log(`sessions: ${count} concurrent sessions with the light generator (fresh gateway, bench/light-cli.sh)`)
  const gw = await startGateway({ claudeBin: LIGHT_CLI, env: { MAX_SESSIONS: String(count + 20), MAX_SESSIONS_PER_TENANT: String(count + 20), ...storeEnv() } })
  try {
    const spec = { lines: 10, rate: 0, bytes: 200 }
    // Warm-up: a few sessions first, so lazily loaded code is not counted per session.
    await runClients({ mode: 'sessions', http: gw.http, url: gw.ws, token: TOKEN, count: 5, concurrency: 5, per_second: 50, spec }).result
    await sleep(500)
    const before = await gw.stats()
    const res = await runClients({ mode: 'sessions', http: gw.http, url: gw.ws, token: TOKEN, count, concurrency: 8, per_second: 40, spec }).result
    await sleep(1000)
    const after = await gw.stats()
    const per = (after.proc_rss - before.proc_rss) / res.created
    const heapPer = (after.heap_used - before.heap_used) / res.created
    // Baseline: a bare Node parent holding the same CLIs' pipes after one turn each.
    const bare = await startBareServer()
    let barePer: number
    try {
      await bare.command(`spawn 5 ${LIGHT_CLI}`)
      await sleep(500)
      const b0 = await bare.command('stats')
      await bare.command(`spawn ${count} ${LIGHT_CLI}`)
      await sleep(1000)
      const b1 = await bare.command('stats')
      barePer = (b1.rss - b0.rss) / count
    } finally {
      await bare.close()
    }
    raw.sessions = { count, result: res, before, after, per_session_rss: per, per_session_heap: heapPer, bare_per_child_rss: barePer }
    row({
      scenario: `Concurrent sessions (${res.created} CLIs running)`, metric: 'gateway RSS growth per session', unit: 'KiB', gateway: per / KiB, baseline: barePer / KiB, target: '≤ 100 KiB',
      pass: per / KiB <= 100 && res.created === count && after.running_sessions >= count,
      note: `RSS ${fmt(before.proc_rss / 2 ** 20, 1)} → ${fmt(after.proc_rss / 2 ** 20, 1)} MiB after GC; heap ${fmt(heapPer / KiB, 1)} KiB/session; ${after.running_sessions - before.running_sessions} CLIs started in ${fmt(res.ms / 1000, 1)} s${res.failures ? `; ${res.failures} failed: ${res.failure_samples[0]}` : ''}; baseline: a bare Node parent holding ${count} such CLIs with piped stdio, one turn each`
    })
  } finally {
    await gw.close()
  }
}

async function scenarioSandbox (): Promise<void> {
  const runs = Q ? 5 : 15
  const turns = Q ? 5 : 10
  log(`sandbox: CLI start and per-turn latency, SANDBOX=none vs bwrap (light CLI, ${runs} runs of ${turns} turns each)`)
  const [none, bwrap] = await measureSandbox(runs, turns, storeEnv())
  if (none === undefined || bwrap === undefined) return
  raw.sandbox = { none, bwrap }
  const spread = (xs: number[]): string => `${fmt(Math.min(...xs))}–${fmt(Math.max(...xs))}`
  const scenario = 'Sandbox cost (bwrap + egress proxy vs none)'
  row({ scenario, metric: 'CLI start: POST /v1/sessions → initialize answered (median)', unit: 'ms', gateway: median(bwrap.start_ms), baseline: median(none.start_ms), target: 'reference', pass: null, note: `${runs} runs; spread bwrap ${spread(bwrap.start_ms)} ms, none ${spread(none.start_ms)} ms; baseline: SANDBOX=none` })
  row({ scenario, metric: 'per-turn latency: user frame → result (median)', unit: 'ms', gateway: median(bwrap.turn_ms), baseline: median(none.turn_ms), target: 'reference', pass: null, note: `${bwrap.turn_ms.length} turns; spread bwrap ${spread(bwrap.turn_ms)} ms, none ${spread(none.turn_ms)} ms` })
}

// ---------------------------------------------------------------- soak

async function soak (durationMs: number): Promise<void> {
  const gw = await startGateway({ profileDir: opts.profile !== null ? PROFILE_DIR : undefined, profileKind: opts.profile ?? undefined, env: storeEnv() })
  sharedGateway = gw
  const session = await gw.createSession()
  const spec = { lines: 2000, rate: 200, bytes: sizes.bytes }
  log(`soak: ${Math.round(durationMs / 1000)} s, ${spec.rate} lines/s, 20 observers dropped and resumed ~2/s, visitors`)
  const samples: Array<{ t: number, rss: number, heap: number, handles: number, fds: number, clients: number }> = []
  await gw.profile('soak')
  const t0 = Date.now()
  let sampling = true
  const sampler = (async () => {
    while (sampling) {
      const s = await gw.stats()
      samples.push({ t: (Date.now() - t0) / 1000, rss: s.proc_rss, heap: s.heap_used, handles: s.handles, fds: s.fds, clients: s.ws_clients })
      await sleep(5000)
    }
  })()
  const res = await runClients({ mode: 'soak', url: gw.ws, http: gw.http, token: TOKEN, session, duration_ms: durationMs, observers: 20, churn_per_s: 2, spec }).result
  sampling = false
  await sampler
  await gw.profile(null)
  await sleep(1000)
  const end = await gw.stats()
  samples.push({ t: (Date.now() - t0) / 1000, rss: end.proc_rss, heap: end.heap_used, handles: end.handles, fds: end.fds, clients: end.ws_clients })
  const total = samples[samples.length - 1]?.t ?? 0
  const window = total >= 180 ? 60 : Math.max(5, total / 4)
  const first = samples.filter((s) => s.t <= window)
  const last = samples.filter((s) => s.t >= total - window)
  const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length)
  const rssFirst = mean(first.map((s) => s.rss))
  const rssLast = mean(last.map((s) => s.rss))
  const heapFirst = mean(first.map((s) => s.heap))
  const heapLast = mean(last.map((s) => s.heap))
  const hFirst = mean(first.map((s) => s.handles))
  const hLast = mean(last.map((s) => s.handles))
  const fdFirst = mean(first.map((s) => s.fds))
  const fdLast = mean(last.map((s) => s.fds))
  raw.soak = { result: res, samples, window_s: window }
  const w = window >= 60 ? 'first/last minute' : `first/last ${Math.round(window)} s`
  const rssFlat = rssLast <= rssFirst * 1.1 + 8 * 2 ** 20
  const heapFlat = heapLast <= heapFirst * 1.1 + 4 * 2 ** 20
  row({ scenario: `Soak ${fmt(durationMs / 60_000, 1)} min`, metric: `RSS, last vs first window (${w}, mean)`, unit: 'MiB', gateway: rssLast / 2 ** 20, baseline: rssFirst / 2 ** 20, target: 'flat (≤ +10% + 8 MiB)', pass: rssFlat, note: `heap ${fmt(heapFirst / 2 ** 20, 1)} → ${fmt(heapLast / 2 ** 20, 1)} MiB (${heapFlat ? 'flat' : 'GROWING'})` })
  row({ scenario: `Soak ${fmt(durationMs / 60_000, 1)} min`, metric: `active handles, last vs first window (${w}, mean)`, unit: 'count', gateway: hLast, baseline: hFirst, target: 'flat (≤ +10)', pass: hLast <= hFirst + 10, note: `fds ${fmt(fdFirst, 0)} → ${fmt(fdLast, 0)}` })
  const clean = res.gaps === 0 && res.dups === 0 && res.lost === 0 && res.mismatched_vs_history === 0 && res.history_bad === 0
  row({
    scenario: `Soak ${fmt(durationMs / 60_000, 1)} min`, metric: 'lost / duplicated / altered seqs vs history', unit: 'count', gateway: res.gaps + res.dups + res.lost + res.mismatched_vs_history, baseline: null, target: '0', pass: clean,
    note: `${res.clients} clients (${res.reconnects} resumes, ${res.visitors} visitors), ${res.frames} frames, ${res.turns} turns, history ${res.history_events} events; controller p99 ${fmt(res.controller_latency_ms.p99)} ms`
  })
}

// ---------------------------------------------------------------- report

function machine (): Record<string, string> {
  const cpu = cpus()
  let redisVersion = 'unknown'
  try {
    const info = execFileSync('redis-cli', ['-u', process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379', 'INFO', 'server'], { encoding: 'utf8' })
    redisVersion = /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown'
  } catch { /* no redis-cli */ }
  return {
    cpu: cpu[0]?.model ?? 'unknown',
    cores: String(cpu.length),
    ram: `${(totalmem() / 2 ** 30).toFixed(1)} GiB`,
    node: process.version,
    redis: redisVersion,
    date: new Date().toISOString(),
    os: execFileSync('uname', ['-sr'], { encoding: 'utf8' }).trim()
  }
}

function render (m: Record<string, string>, loadStart: number[], loadEnd: number[], title: string): string {
  const lines: string[] = []
  lines.push(`# ${title}`, '')
  lines.push(`- Machine: ${m.cpu}, ${m.cores} cores, ${m.ram} RAM, ${m.os}`)
  lines.push(opts.memoryStore
    ? `- Node ${m.node}; gateway with the **in-memory store** (--memory-store diagnostic run), LOG_LEVEL=warn, own process`
    : `- Node ${m.node}, Redis ${m.redis} (loopback), gateway with REDIS_URL set, LOG_LEVEL=warn, own process`)
  lines.push(`- Date: ${m.date}; mode: ${opts.soakMs !== null ? `soak ${opts.soakMs / 1000} s` : Q ? 'quick' : 'full'}`)
  lines.push(`- Load average (1/5/15 min) at start ${loadStart.map((x) => x.toFixed(2)).join(' / ')}, at end ${loadEnd.map((x) => x.toFixed(2)).join(' / ')}${Math.max(loadStart[0] ?? 0, loadEnd[0] ?? 0) > cpus().length * 0.5 ? ' — **the machine was busy with other work: timings are noisy**' : ''}`)
  lines.push(`- Lines are ${sizes.bytes} B assistant-shaped NDJSON; latency = client receive time − generator send time (CLOCK_MONOTONIC, same machine)`)
  lines.push('')
  lines.push('| scenario | metric | gateway | raw / baseline | ratio gw/raw | target | result | notes |')
  lines.push('|---|---|---:|---:|---:|---|---|---|')
  for (const r of rows) {
    const unit = r.unit === 'count' ? '' : ` ${r.unit}`
    const digits = r.unit === 'ms' ? 2 : r.unit === 'KiB' || r.unit === 'MiB' || r.unit === 'µs' ? 1 : 0
    const value = (v: number | null): string => v === null ? '—' : digits > 0 ? `${fmt(v, digits)}${unit}` : `${Math.round(v).toLocaleString('en-US')}${unit}`
    const verdict = r.pass === null ? '' : r.pass ? 'pass' : '**FAIL**'
    lines.push(`| ${r.scenario} | ${r.metric} | ${value(r.gateway)} | ${value(r.baseline)} | ${r.ratio === null ? '—' : `${fmt(r.ratio, 2)}×`} | ${r.target} | ${verdict} | ${(r.note ?? '').replace(/\|/g, '\\|')} |`)
  }
  const judged = rows.filter((r) => r.pass !== null)
  lines.push('')
  lines.push(`Targets met: ${judged.filter((r) => r.pass).length} of ${judged.length}.`)
  for (const n of notes) lines.push('', `Note: ${n}`)
  lines.push('', 'Generated by `npm run bench' + (opts.soakMs !== null ? ` -- --soak ${opts.soakMs / 1000}s` : Q ? ' -- --quick' : '') + '`; raw figures in the matching .json file. How to read it: docs/PERFORMANCE.md.', '')
  return lines.join('\n')
}

// ---------------------------------------------------------------- main

/** --faults: the fault suite alone; its own table (faults.md) and JSON. */
async function faults (): Promise<void> {
  const m = machine()
  const loadStart = loadavg()
  const started = Date.now()
  const sizes = Q ? QUICK_SIZES : FULL_SIZES
  const rows = await runFaultSuite(sizes)
  const loadEnd = loadavg()
  const md = renderFaults(rows, [
    `Machine: ${m.cpu}, ${m.cores} cores, ${m.ram} RAM, ${m.os}; Node ${m.node}, Redis ${m.redis}`,
    `Date: ${m.date}; mode: ${Q ? 'quick' : 'full'}; took ${((Date.now() - started) / 1000).toFixed(0)} s`,
    `Load average (1/5/15 min) at start ${loadStart.map((x) => x.toFixed(2)).join(' / ')}, at end ${loadEnd.map((x) => x.toFixed(2)).join(' / ')}`
  ])
  const base = Q ? 'faults-quick' : 'faults'
  if (!Q) writeFileSync(join(RESULTS, 'faults.md'), md)
  writeFileSync(join(RESULTS, `${base}.json`), JSON.stringify({ machine: m, sizes, load: { start: loadStart, end: loadEnd }, duration_s: (Date.now() - started) / 1000, rows }, null, 2))
  process.stdout.write('\n' + md)
  log(`faults done in ${((Date.now() - started) / 1000).toFixed(1)} s; wrote bench/results/${Q ? '' : 'faults.md and '}${base}.json`)
}

async function main (): Promise<void> {
  mkdirSync(RESULTS, { recursive: true })
  if (opts.faults) return await faults()
  if (opts.profile !== null) {
    mkdirSync(PROFILE_DIR, { recursive: true })
    log(`${opts.profile === 'cpu' ? 'CPU' : opts.profile === 'heap' ? 'heap allocation' : 'GC survivor'} profiles of the gateway go to ${PROFILE_DIR}`)
  }
  const m = machine()
  const loadStart = loadavg()
  const started = Date.now()
  try {
    if (opts.soakMs !== null) {
      await soak(opts.soakMs)
    } else {
      if (want('redis')) await scenarioRedis()
      if (want('latency1')) await scenarioLatency(1)
      if (want('latency10')) await scenarioLatency(10)
      if (want('saturation')) await scenarioSaturation()
      if (want('fanout')) await scenarioFanout()
      if (want('permission')) await scenarioPermission()
      if (want('replay')) await scenarioReplay()
      if (sharedGateway !== null) { await sharedGateway.close(); sharedGateway = null }
      if (sharedRaw !== null) { await sharedRaw.close(); sharedRaw = null }
      if (want('idle')) await scenarioIdle()
      if (want('sessions')) await scenarioSessions()
      if (want('sandbox')) await scenarioSandbox()
    }
  } finally {
    if (sharedGateway !== null) await sharedGateway.close().catch(() => {})
    if (sharedRaw !== null) await sharedRaw.close().catch(() => {})
  }
  const loadEnd = loadavg()
  const title = opts.soakMs !== null ? 'claude-gateway soak results' : 'claude-gateway benchmark results'
  const md = render(m, loadStart, loadEnd, title)
  // Full run: latest.md + latest.json; --soak: soak.md + soak.json; --quick
  // and --only: quick.json / partial.json only (the table is printed).
  const base = opts.soakMs !== null ? 'soak' : opts.only !== null ? 'partial' : Q ? 'quick' : 'latest'
  const writeMd = base === 'latest' || base === 'soak'
  if (writeMd) writeFileSync(join(RESULTS, `${base}.md`), md)
  writeFileSync(join(RESULTS, `${base}.json`), JSON.stringify({ machine: m, options: { ...opts, only: opts.only === null ? null : [...opts.only] }, sizes, load: { start: loadStart, end: loadEnd }, duration_s: (Date.now() - started) / 1000, rows, notes, raw }, null, 2))
  process.stdout.write('\n' + md)
  log(`done in ${((Date.now() - started) / 1000).toFixed(1)} s; wrote bench/results/${writeMd ? `${base}.md and ` : ''}${base}.json`)
}

process.on('SIGINT', () => {
  killChildren()
  // Redis keys of gateways that were still running (each child is gone now).
  void Promise.all([...livePrefixes].map((p) => deleteKeys(p).catch(() => 0)))
    .finally(() => process.exit(130))
})
main().then(async () => {
  await closeRedis()
  process.exit(0)
}, async (err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`)
  killChildren()
  await closeRedis()
  process.exit(1)
})
