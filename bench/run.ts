/**
 * `npm run bench [-- --quick] [-- --soak 10m] [-- --only a,b] [-- --profile | --heap-profile] [-- --memory-store] [-- --faults]`
 *
 * Measures the gateway (bench/gateway-proc.mjs on the dist/ build, Redis store on, own process)
 * against baselines measured in the same run, each the strongest known for
 * its job: a batched relay (bench/relay.mjs: frames built once, one write per
 * client per chunk), the same relay storing each chunk in Redis before
 * sending it (pipelined XADDs or one script call, whichever measured faster),
 * a bare server for resume, history, idle sockets and CLI pipes
 * (bench/bare-server.mjs), Redis ceilings; the old naive pipe
 * (bench/raw-pipe.mjs) only as a labelled extra row. The live-path
 * scenarios are in bench/live.ts; the scaling curve (bench/scaling.ts) runs
 * 1–500 sessions; bench/cluster.ts runs three nodes on one Redis (cross-node
 * delivery against the same-node client, three nodes against one). Clients run in other processes
 * (bench/clients.mjs). Prints markdown tables and writes
 * bench/results/latest.md and latest.json (--soak: soak.md/.json;
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
  BENCH_DIR, ROOT, type Gateway, LIGHT_CLI, TOKEN, closeRedis, deleteKeys, helperPids, killChildren, livePrefixes, openFileLimit,
  buildGateway, procCpuMs, runClients, sleep, startBareServer, startGateway
} from './lib.js'
import { ioredisPipelineLoop, redisBenchmark, redisRoundTrip, storeAppendLoop } from './redis-baseline.js'
import { limitsUnavailable, measureSandbox, median } from './sandbox.js'
import { type RowInput, closeHelpers, fmt, initLive, scenarioFanout, scenarioLatency, scenarioPermission, scenarioSaturation, storeMode } from './live.js'
import { type Cell, added, renderScaling, runScaling, spread } from './scaling.js'
import { FULL_SIZES, QUICK_SIZES, renderFaults, runFaultSuite } from './faults.js'
import { CLUSTER_FULL, CLUSTER_QUICK, scenarioCluster } from './cluster.js'

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
      process.stdout.write('npm run bench -- [--quick] [--soak 10m] [--only redis,latency1,latency10,saturation,fanout,permission,replay,idle,sessions,scaling,cluster,sandbox] [--profile | --heap-profile | --survivor-profile] [--memory-store] [--faults]\n')
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
  /** Runs per side of each live-path figure (interleaved); every run counted. */
  reps: Q ? 1 : 3,
  latencyLines: Q ? 1000 : 5000,
  latencyRate: 1000,
  warmLines: Q ? 500 : 1000,
  saturationLines: Q ? 20_000 : 100_000,
  fanoutClients: 100,
  fanoutLines: Q ? 1000 : 5000,
  permissionCount: Q ? 200 : 3000,
  permissionWarm: Q ? 100 : 1000,
  permissionReps: Q ? 1 : 3,
  replayEvents: 10_000,
  resumeReps: Q ? 3 : 7,
  historyReps: Q ? 1 : 3,
  idleClients: Q ? 1000 : 10_000,
  sessions: Q ? 100 : 1000,
  sessionsReps: Q ? 1 : 3,
  redisN: Q ? 20_000 : 200_000,
  scaling: Q
    ? { sessions: [100], rates: [100], clients: [1], seconds: Number(process.env.BENCH_SCALING_SECONDS ?? 1), reps: Number(process.env.BENCH_SCALING_REPS ?? 1), bytes: 512 }
    : { sessions: [1, 10, 100, 500], rates: [20, 100], clients: [1, 3], seconds: 2.5, reps: 3, bytes: 512 },
  /** Three gateway nodes on one Redis (bench/cluster.ts). */
  cluster: Q ? CLUSTER_QUICK : CLUSTER_FULL
}
/** Pause before a memory reading, for sockets and children to settle (shorter in --quick, whose memory figures are rough anyway). */
const SETTLE_MS = Q ? 300 : 1000
const RESULTS = join(BENCH_DIR, 'results')
/** CPU profiles (--profile) go to the git-ignored .tmp/. */
const PROFILE_DIR = join(ROOT, '.tmp', 'bench-prof')

// ---------------------------------------------------------------- results

interface Row extends RowInput {
  /** gateway / baseline */
  ratio: number | null
  /** 1-minute load average when the scenario started. */
  load?: number
}

const rows: Row[] = []
const raw: Record<string, unknown> = {}
const notes: string[] = []

/** Load average (1 min) when the current scenario started. */
let scenarioLoad = 0

function row (r: Omit<Row, 'ratio'> & { ratio?: number | null }): void {
  const ratio = r.ratio !== undefined ? r.ratio : r.gateway !== null && r.baseline !== null && r.baseline !== 0 ? r.gateway / r.baseline : null
  rows.push({ load: scenarioLoad, ...r, ratio })
}

function want (name: string): boolean {
  const yes = opts.only === null || opts.only.has(name)
  if (yes) scenarioLoad = loadavg()[0] as number
  return yes
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
async function gateway (): Promise<Gateway> {
  sharedGateway ??= await startGateway({ profileDir: opts.profile !== null ? PROFILE_DIR : undefined, profileKind: opts.profile ?? undefined, env: storeEnv() })
  return sharedGateway
}

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
  const rtt = await redisRoundTrip(Q ? 500 : 5000, sizes.latencyRate, sizes.bytes)
  raw.redis = { redis_benchmark: rb, ioredis_loop: loops, store_append_loop: stores, round_trip: rtt }
  row({ scenario: 'Redis ceiling', metric: `redis-benchmark -P 16 XADD (${sizes.bytes} B values, 50 connections)`, unit: 'req/s', gateway: null, baseline: rb.requests_per_s, vs: 'redis-benchmark', target: 'reference', pass: null, note: rb.error ?? '1 run' })
  for (let i = 0; i < loops.length; i++) {
    const l = loops[i] as (typeof loops)[number]
    const st = stores[i] as (typeof stores)[number]
    row({ scenario: 'Redis ceiling', metric: `batches of ${l.batch}, 1 in flight: gateway RedisStore.append vs bare ioredis XADD pipeline`, unit: 'events/s', gateway: st.events_per_s, baseline: l.events_per_s, vs: 'ioredis pipeline', target: 'reference', pass: null, note: `1 run; ${fmt(st.batch_ms, 3)} vs ${fmt(l.batch_ms, 3)} ms per batch` })
  }
  row({ scenario: 'Redis ceiling', metric: `one XADD round trip at ${rtt.rate}/s, bare ioredis: p50`, unit: 'ms', gateway: null, baseline: rtt.p50_ms, vs: 'ioredis', target: 'reference', pass: null, note: `p99 ${fmt(rtt.p99_ms)} ms, p99.9 ${fmt(rtt.p999_ms)} ms, max ${fmt(rtt.max_ms)} ms (${rtt.n} samples): the floor of what storing before relaying adds` })
}

async function scenarioReplay (): Promise<void> {
  log(`resume + history: ${sizes.replayEvents} events, reconnect with ?after= and GET /events pages of 1000`)
  const gw = await gateway()
  const session = await gw.createSession()
  await gw.profile('replay')
  const res = await runClients({
    mode: 'replay', url: gw.ws, http: gw.http, token: TOKEN, session,
    lines: sizes.replayEvents, bytes: sizes.bytes, resume_reps: sizes.resumeReps, timeout_ms: 120_000
  }).result
  await gw.profile(null)
  // Baseline: the same events read from the same stream by bench/bare-server.mjs.
  const bareServer = await startBareServer()
  let bare: any
  let pages: any
  try {
    const key = `${gw.prefix}{${session}}:events`
    bare = await runClients({
      mode: 'replay', url: `${bareServer.ws}/replay`, http: bareServer.http,
      bare: { key, after: res.after, last: res.last_seq },
      resume_reps: sizes.resumeReps, timeout_ms: 120_000
    }).result
    // History pages alternate between the two servers page by page (same client, same moment).
    await gw.profile('history')
    pages = await runClients({
      mode: 'history', after: res.after, last: res.last_seq, history_reps: sizes.historyReps, timeout_ms: 120_000,
      targets: [{ name: 'gateway', http: gw.http, session, token: TOKEN }, { name: 'bare', http: bareServer.http, key }]
    }).result
    await gw.profile(null)
  } finally {
    await bareServer.close()
  }
  raw.replay = { gateway: res, bare, history: pages }
  const g = pages.gateway
  const b = pages.bare
  const bad = res.resume.some((x: any) => x.bad !== 0 || x.count < x.expected)
  const bareBad = bare.resume.some((x: any) => x.bad !== 0 || x.count < x.expected)
  const bareNote = bareBad ? '; BARE BASELINE ORDER/COUNT CHECK FAILED' : ''
  const first = `first (cold) run, not in the median: gateway ${fmt(res.first_resume?.ms)} ms, bare ${fmt(bare.first_resume?.ms)} ms`
  row({ scenario: `Resume: reconnect with ${res.events} missed events`, metric: 'time until all delivered (median)', unit: 'ms', gateway: res.resume_ms.p50, baseline: bare.resume_ms.p50, vs: 'bare server', target: '≤ 100 ms', pass: res.resume_ms.p50 <= 100 && !bad, note: `${res.resume_ms.n} runs, ${fmt(res.resume_ms.min)}–${fmt(res.resume_ms.max)} ms (bare ${fmt(bare.resume_ms.min)}–${fmt(bare.resume_ms.max)} ms); ${first}${bad ? '; ORDER/COUNT CHECK FAILED' : ''}; baseline: XRANGE pages, each written to a bare ws socket in one batch${bareNote}` })
  const pagesBad = g.history_checks.bad !== 0
  const barePagesNote = b.history_checks.bad !== 0 ? '; BARE BASELINE ORDER CHECK FAILED' : ''
  row({ scenario: 'History: GET /events, 1,000 events per page', metric: 'ms per page (median)', unit: 'ms', gateway: g.history_page_ms.p50, baseline: b.history_page_ms.p50, vs: 'bare server', target: '≤ 5 ms and ≤ 1.5 × bare', pass: g.history_page_ms.p50 <= 5 && g.history_page_ms.p50 <= 1.5 * b.history_page_ms.p50 && !pagesBad, note: `${g.history_pages} pages of ~${fmt(g.history_page_bytes.p50 / 1024, 0)} KiB over ${sizes.historyReps} pass(es), ${fmt(g.history_page_ms.min)}–${fmt(g.history_page_ms.max)} ms (bare ${fmt(b.history_page_ms.min)}–${fmt(b.history_page_ms.max)} ms), the two servers' pages alternated; first (warm-up) pass, not in the median: gateway ${fmt(g.first_history_page_ms?.p50)} ms, bare ${fmt(b.first_history_page_ms?.p50)} ms per page${pagesBad ? '; ORDER CHECK FAILED' : ''}; baseline: one XRANGE read as Buffers, answered in one write by a bare node:http server${barePagesNote}` })
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
    await sleep(SETTLE_MS / 2)
    const before = await gw.stats()
    const proc = runClients({ mode: 'idle', url: gw.ws, token: TOKEN, session, count, concurrency: 200 })
    const connected = await proc.nextEvent()
    await sleep(SETTLE_MS)
    const after = await gw.stats()
    proc.command('close')
    const res = await proc.result
    const n = connected.n as number
    const perConn = (after.proc_rss - before.proc_rss) / n
    const heapPer = (after.heap_used - before.heap_used) / n
    const bare = await bareIdle(count)
    raw.idle = { count, connected, before, after, result: res, per_connection_rss: perConn, per_connection_heap: heapPer, bare }
    row({
      scenario: `Idle WebSocket clients (${n})`, metric: 'RSS per connection', unit: 'KiB', gateway: perConn / KiB, baseline: bare.per_connection_rss / KiB, vs: 'bare ws server', target: '≤ 10 KiB', pass: perConn / KiB <= 10 && n === count,
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
    await sleep(SETTLE_MS / 2)
    const before = await bare.command('stats')
    const proc = runClients({ mode: 'idle', url: `${bare.ws}/idle`, count, concurrency: 200 })
    const connected = await proc.nextEvent()
    await sleep(SETTLE_MS)
    const after = await bare.command('stats')
    proc.command('close')
    await proc.result
    const n = connected.n as number
    return { n, per_connection_rss: (after.rss - before.rss) / n, per_connection_heap: (after.heap_used - before.heap_used) / n }
  } finally {
    await bare.close()
  }
}

/** The sum and count of the gateway's cgw_cli_spawn_seconds (the event loop's time inside spawn()). */
async function spawnSeconds (http: string): Promise<{ sum: number, count: number }> {
  const text = await (await fetch(`${http}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text()
  const lines = text.split('\n')
  const read = (name: string): number => Number(lines.find((l) => l.startsWith(`${name} `))?.slice(name.length + 1) ?? NaN)
  return { sum: read('cgw_cli_spawn_seconds_sum'), count: read('cgw_cli_spawn_seconds_count') }
}

/** One gateway run and one bare-parent run of the sessions scenario: RSS (and heap) growth per idle session from `warm` to `count`, and the event loop's time per CLI start. */
async function sessionsRun (count: number, warm: number): Promise<{ per: number, helperPer: number, heapPer: number, barePer: number, spawnMs: number, cpuMs: number, helperCpuMs: number, bareSpawnMs: number, created: number, running: number, before: any, after: any, result: any }> {
  const measured = count - warm
  const gw = await startGateway({ claudeBin: LIGHT_CLI, env: { MAX_SESSIONS: String(count + 20), MAX_SESSIONS_PER_TENANT: String(count + 20), ...storeEnv() } })
  try {
    const spec = { lines: 10, rate: 0, bytes: 200 }
    await runClients({ mode: 'sessions', http: gw.http, url: gw.ws, token: TOKEN, count: warm, concurrency: 8, per_second: Q ? 100 : 40, spec }).result
    await sleep(SETTLE_MS / 2)
    const before = await gw.stats()
    const spawns0 = await spawnSeconds(gw.http)
    const helpers = helperPids(gw.pid)
    const cpu = (): [number, number] => [procCpuMs(gw.pid), helpers.reduce((sum, p) => sum + procCpuMs(p), 0)]
    const cpu0 = cpu()
    const res = await runClients({ mode: 'sessions', http: gw.http, url: gw.ws, token: TOKEN, count: measured, concurrency: 8, per_second: Q ? 100 : 40, spec }).result
    const cpu1 = cpu()
    const spawns1 = await spawnSeconds(gw.http)
    await sleep(SETTLE_MS)
    const after = await gw.stats()
    // Baseline: a bare Node parent holding the same CLIs' pipes after one turn each, warmed up alike.
    const bare = await startBareServer()
    try {
      await bare.command(`spawn ${warm} ${LIGHT_CLI}`)
      await sleep(SETTLE_MS / 2)
      const b0 = await bare.command('stats')
      const spawned = await bare.command(`spawn ${measured} ${LIGHT_CLI}`)
      await sleep(SETTLE_MS)
      const b1 = await bare.command('stats')
      return {
        // The spawn helper holds a little per running CLI too: counted with the gateway.
        per: (after.proc_rss + after.helper_rss - before.proc_rss - before.helper_rss) / res.created,
        helperPer: (after.helper_rss - before.helper_rss) / res.created,
        heapPer: (after.heap_used - before.heap_used) / res.created,
        barePer: (b1.rss - b0.rss) / measured,
        spawnMs: ((spawns1.sum - spawns0.sum) * 1000) / (spawns1.count - spawns0.count),
        // Everything a session's start and its one turn cost the gateway (HTTP, store, WebSocket, the CLI's start).
        cpuMs: (cpu1[0] - cpu0[0]) / res.created,
        helperCpuMs: (cpu1[1] - cpu0[1]) / res.created,
        bareSpawnMs: spawned.spawn_ms / measured,
        created: res.created,
        running: after.running_sessions,
        before,
        after,
        result: res
      }
    } finally {
      await bare.close()
    }
  } finally {
    await gw.close()
  }
}

async function scenarioSessions (): Promise<void> {
  const count = sizes.sessions
  // Warm-up: a tenth of the sessions first, on both sides, so what a process
  // pays once whatever its load (lazily compiled code, the young generation
  // grown to its working size, pools) is not charged per session: the figure
  // is the cost of each further idle session on the way to `count`.
  const warm = Math.max(5, Math.round(count / 10))
  const runs: Array<Awaited<ReturnType<typeof sessionsRun>>> = []
  for (let r = 0; r < sizes.sessionsReps; r++) {
    log(`sessions: run ${r + 1}/${sizes.sessionsReps}: ${warm} then ${count} concurrent sessions with the light generator (fresh gateway, bench/light-cli.sh), then a bare parent alike`)
    runs.push(await sessionsRun(count, warm))
  }
  const range = (xs: number[]): string => `${fmt(median(xs), 1)} (${fmt(Math.min(...xs), 1)}–${fmt(Math.max(...xs), 1)})`
  const per = runs.map((x) => x.per / KiB)
  const bare = runs.map((x) => x.barePer / KiB)
  const heap = runs.map((x) => x.heapPer / KiB)
  const helper = runs.map((x) => x.helperPer / KiB)
  const last = runs[runs.length - 1] as (typeof runs)[number]
  raw.sessions = { count, warm, runs: runs.map(({ per, helperPer, heapPer, barePer, spawnMs, cpuMs, helperCpuMs, bareSpawnMs, created, running, before, after, result }) => ({ per_session_rss: per, per_session_helper_rss: helperPer, per_session_heap: heapPer, bare_per_child_rss: barePer, spawn_ms: spawnMs, cpu_ms_per_session: cpuMs, helper_cpu_ms_per_session: helperCpuMs, bare_spawn_ms: bareSpawnMs, created, running, before, after, result })) }
  row({
    scenario: `Concurrent sessions (${count} CLIs running)`, metric: 'gateway RSS growth per idle session', unit: 'KiB', gateway: median(per), baseline: median(bare), vs: 'bare parent', target: '≤ 20 KiB',
    pass: median(per) <= 20 && runs.every((x) => x.created === count - warm && x.running >= count),
    note: `median of ${runs.length} run(s): gateway ${range(per)} (its spawn helper's part ${range(helper)}), bare ${range(bare)} KiB; heap ${range(heap)} KiB/session; growth from ${warm} to ${count} sessions (last run: RSS ${fmt(last.before.proc_rss / 2 ** 20, 1)} → ${fmt(last.after.proc_rss / 2 ** 20, 1)} MiB after GC, spawn helper ${fmt(last.before.helper_rss / 2 ** 20, 1)} → ${fmt(last.after.helper_rss / 2 ** 20, 1)} MiB, ${count - warm} CLIs started in ${fmt(last.result.ms / 1000, 1)} s${last.result.failures ? `; ${last.result.failures} failed: ${last.result.failure_samples[0]}` : ''}); baseline: a bare Node parent holding such CLIs with piped stdio, one turn each, warmed up alike`
  })
  // What each CLI start costs every session: spawn() forks the process while its event loop waits (PERFORMANCE.md §22, §23).
  const spawnMs = runs.map((x) => x.spawnMs)
  const bareSpawnMs = runs.map((x) => x.bareSpawnMs)
  const ranged = (xs: number[]): string => `${fmt(median(xs), 3)} (${fmt(Math.min(...xs), 3)}–${fmt(Math.max(...xs), 3)})`
  row({
    scenario: `Concurrent sessions (${count} CLIs running)`, metric: 'event loop held per CLI start (mean)', unit: 'ms', gateway: median(spawnMs), baseline: median(bareSpawnMs), vs: 'bare parent', target: 'reference', pass: null,
    note: `median of ${runs.length} run(s): gateway ${ranged(spawnMs)} ms (cgw_cli_spawn_seconds over the ${count - warm} starts from ${warm} to ${count} sessions: with its spawn helper, the request sent to it), bare parent ${ranged(bareSpawnMs)} ms (its own spawn() calls timed alike: the fork copies its page tables, so it grows with its RSS); gateway CPU per session started and given its turn ${ranged(runs.map((x) => x.cpuMs))} ms, its spawn helper's ${ranged(runs.map((x) => x.helperCpuMs))} ms; last run: gateway ${fmt(last.after.proc_rss / 2 ** 20, 1)} MiB`
  })
}

let scalingCells: Cell[] | null = null

async function scenarioScaling (): Promise<void> {
  if (opts.memoryStore) { notes.push('The scaling curve does not run with --memory-store.'); return }
  const { mode: bestStore, measured } = storeMode()
  if (!measured) notes.push(`The scaling curve's relay + store used the ${bestStore} mode: the saturation test, which picks the faster mode, did not run.`)
  const cells = await runScaling(sizes.scaling, bestStore, opts.profile !== null ? { dir: PROFILE_DIR, kind: opts.profile } : null)
  scalingCells = cells
  raw.scaling = { sizes: sizes.scaling, store: bestStore, cells }
  const c = cells.find((x) => x.sessions === 100 && x.rate === 100 && x.clients === 1)
  if (c === undefined) return
  const g = c.sides.gateway
  const failed = [g, c.sides.relay, c.sides.store].some((x) => x.error !== undefined || x.runs.length === 0)
  const scenario = 'Scaling: 100 sessions × 100 lines/s, 1 client each'
  const p99 = added(c, (x) => x.p99)
  const cpuG = spread(g.runs, (x) => x.cpu_us_per_line)
  const cpuS = spread(c.sides.store.runs, (x) => x.cpu_us_per_line)
  const r = (x: { med: number, min: number, max: number }, d: number): string => `${fmt(x.med, d)} (${fmt(x.min, d)}–${fmt(x.max, d)})`
  const load = [...g.runs].map((x) => fmt(x.load1, 2)).join(', ')
  row({ scenario, metric: 'p99 latency (pass: added p99 = gateway − relay per turn pair)', unit: 'ms', gateway: spread(g.runs, (x) => x.p99).med, baseline: spread(c.sides.relay.runs, (x) => x.p99).med, vs: 'relay', target: 'added ≤ 3 ms', pass: !failed && p99.med <= 3, note: `added p99 ${r(p99, 2)} ms, p50 ${r(added(c, (x) => x.p50), 2)} ms over ${g.runs.length} turn pair(s); load ${load}${failed ? '; A SIDE FAILED (see the scaling table)' : ''}` })
  const p99S = spread(c.sides.store.runs, (x) => x.p99)
  row({ scenario, metric: 'p99 latency vs relay + store', unit: 'ms', gateway: spread(g.runs, (x) => x.p99).med, baseline: p99S.med, vs: `relay + store (${bestStore})`, target: 'reference', pass: null, note: `relay + store p99 ${r(p99S, 2)} ms, p50 ${r(spread(c.sides.store.runs, (x) => x.p50), 2)} ms: the relay paying the store hop before each send, as the gateway does` })
  row({ scenario, metric: 'CPU per line', unit: 'µs', gateway: cpuG.med, baseline: cpuS.med, vs: `relay + store (${bestStore})`, target: '≤ 1.5 × relay + store', pass: !failed && cpuG.med <= 1.5 * cpuS.med, note: `gateway ${r(cpuG, 1)}, relay + store ${r(cpuS, 1)}, relay ${r(spread(c.sides.relay.runs, (x) => x.cpu_us_per_line), 1)} µs; Redis per line: gateway ${r(spread(g.runs, (x) => x.redis_cpu_us_per_line), 1)}, relay + store ${r(spread(c.sides.store.runs, (x) => x.redis_cpu_us_per_line), 1)} µs` })
}

async function scenarioSandbox (): Promise<void> {
  const runs = Q ? 5 : 15
  const turns = Q ? 5 : 10
  const noLimits = limitsUnavailable()
  log(`sandbox: CLI start and per-turn latency, SANDBOX=none vs bwrap${noLimits === null ? ' vs bwrap with per-CLI cgroup limits' : ` (cgroup limits not measured: ${noLimits})`} (light CLI, ${runs} runs of ${turns} turns each)`)
  const [none, bwrap, limits] = await measureSandbox(runs, turns, storeEnv(), noLimits === null ? ['none', 'bwrap', 'limits'] : ['none', 'bwrap'])
  if (none === undefined || bwrap === undefined) return
  raw.sandbox = { none, bwrap, ...(limits === undefined ? {} : { limits }) }
  const spread = (xs: number[]): string => `${fmt(Math.min(...xs))}–${fmt(Math.max(...xs))}`
  const scenario = 'Sandbox cost (bwrap + egress proxy vs none)'
  row({ scenario, metric: 'CLI start: POST /v1/sessions → initialize answered (median)', unit: 'ms', gateway: median(bwrap.start_ms), baseline: median(none.start_ms), vs: 'SANDBOX=none', target: 'reference', pass: null, note: `${runs} runs; spread bwrap ${spread(bwrap.start_ms)} ms, none ${spread(none.start_ms)} ms; baseline: SANDBOX=none` })
  row({ scenario, metric: 'per-turn latency: user frame → result (median)', unit: 'ms', gateway: median(bwrap.turn_ms), baseline: median(none.turn_ms), vs: 'SANDBOX=none', target: 'reference', pass: null, note: `${bwrap.turn_ms.length} turns; spread bwrap ${spread(bwrap.turn_ms)} ms, none ${spread(none.turn_ms)} ms` })
  if (limits === undefined) return
  const cgroups = 'Per-CLI cgroup limits (bwrap + CLI_PIDS_MAX, CLI_MEMORY_MAX_MB, CLI_CPUS vs bwrap)'
  row({ scenario: cgroups, metric: 'CLI start: POST /v1/sessions → initialize answered (median)', unit: 'ms', gateway: median(limits.start_ms), baseline: median(bwrap.start_ms), vs: 'SANDBOX=bwrap', target: 'reference', pass: null, note: `${runs} runs; spread limits ${spread(limits.start_ms)} ms, bwrap ${spread(bwrap.start_ms)} ms; limits loose enough never to bind: the cgroup's own cost (made, joined by sh, removed)` })
  row({ scenario: cgroups, metric: 'per-turn latency: user frame → result (median)', unit: 'ms', gateway: median(limits.turn_ms), baseline: median(bwrap.turn_ms), vs: 'SANDBOX=bwrap', target: 'reference', pass: null, note: `${limits.turn_ms.length} turns; spread limits ${spread(limits.turn_ms)} ms, bwrap ${spread(bwrap.turn_ms)} ms` })
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
    os: execFileSync('uname', ['-sr'], { encoding: 'utf8' }).trim(),
    probe: cpuProbe()
  }
}

/**
 * A fixed piece of work timed on this machine (µs per `JSON.parse` of a
 * 600-character assistant line, best of 5 rounds): hosts of the same type
 * have differed 2–3× in it, which moves every absolute figure of a run while
 * ratios to baselines of the same run hold. Printed beside the load average.
 */
function cpuProbe (): string {
  const line = JSON.stringify({ type: 'assistant', message: { id: 'msg_probe', role: 'assistant', content: [{ type: 'text', text: 'x'.repeat(480) }] }, session_id: '00000000-0000-4000-8000-000000000000' })
  const n = 50_000
  let best = Infinity
  let sink = 0
  for (let round = 0; round < 5; round++) {
    const t0 = process.hrtime.bigint()
    for (let i = 0; i < n; i++) sink += (JSON.parse(line) as { type: string }).type.length
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / n / 1000)
  }
  // The parses' results are used, so none can be optimised away.
  if (sink !== 5 * n * 'assistant'.length) return 'not measured'
  return `${best.toFixed(2)} µs per JSON.parse of a ${line.length}-character line (best of 5 × ${n})`
}

function render (m: Record<string, string>, loadStart: number[], loadEnd: number[], title: string): string {
  const lines: string[] = []
  lines.push(`# ${title}`, '')
  lines.push(`- Machine: ${m.cpu}, ${m.cores} cores, ${m.ram} RAM, ${m.os}`)
  lines.push(opts.memoryStore
    ? `- Node ${m.node}; gateway with the **in-memory store** (--memory-store diagnostic run), LOG_LEVEL=warn, own process`
    : `- Node ${m.node}, Redis ${m.redis} (loopback), gateway with REDIS_URL set, LOG_LEVEL=warn, own process`)
  lines.push(`- Date: ${m.date}; mode: ${opts.soakMs !== null ? `soak ${opts.soakMs / 1000} s` : Q ? 'quick' : 'full'}`)
  lines.push(`- CPU probe: ${m.probe ?? 'not run'} — absolute figures (ms, lines/s) move with it between hosts; ratios to baselines of the same run much less`)
  lines.push(`- Load average (1/5/15 min) at start ${loadStart.map((x) => x.toFixed(2)).join(' / ')}, at end ${loadEnd.map((x) => x.toFixed(2)).join(' / ')}${Math.max(loadStart[0] ?? 0, loadEnd[0] ?? 0) > cpus().length * 0.5 ? ' — **the machine was busy with other work: timings are noisy**' : ''}`)
  lines.push(`- Lines are ${sizes.bytes} B assistant-shaped NDJSON; latency = client receive time − generator send time (CLOCK_MONOTONIC, same machine)`)
  lines.push('')
  lines.push('Each live-path figure is the median of the runs named in its notes (min–max there); sides ran interleaved; every run is counted. Baselines: **relay** = bench/relay.mjs (frames built once, one write per client per chunk); **relay + store** = the same, each chunk stored in Redis first in one round trip (the faster of one XADD pipeline or one script call, both shown under Saturation); **bare** = bench/bare-server.mjs; **naive pipe** (ws.send per line) only as an extra row.', '')
  lines.push('| scenario | metric | gateway | baseline | baseline is | gateway / baseline | target | result | load | notes |')
  lines.push('|---|---|---:|---:|---|---:|---|---|---:|---|')
  for (const r of rows) {
    const unit = r.unit === 'count' ? '' : ` ${r.unit}`
    const digits = r.unit === 'ms' ? 2 : r.unit === 'KiB' || r.unit === 'MiB' || r.unit === 'µs' ? 1 : 0
    const value = (v: number | null): string => v === null || !Number.isFinite(v) ? '—' : digits > 0 ? `${fmt(v, digits)}${unit}` : `${Math.round(v).toLocaleString('en-US')}${unit}`
    const verdict = r.pass === null ? '' : r.pass ? 'pass' : '**FAIL**'
    lines.push(`| ${r.scenario} | ${r.metric} | ${value(r.gateway)} | ${value(r.baseline)} | ${r.vs ?? ''} | ${r.ratio === null || !Number.isFinite(r.ratio) ? '—' : `${fmt(r.ratio, 2)}×`} | ${r.target} | ${verdict} | ${fmt(r.load, 2)} | ${(r.note ?? '').replace(/\|/g, '\\|')} |`)
  }
  const judged = rows.filter((r) => r.pass !== null)
  lines.push('')
  lines.push(`Targets met: ${judged.filter((r) => r.pass).length} of ${judged.length}.`)
  for (const n of notes) lines.push('', `Note: ${n}`)
  if (scalingCells !== null) lines.push('', renderScaling(scalingCells, sizes.scaling, storeMode().mode))
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
  log('building dist/ (the gateway under test is the production build)')
  buildGateway()
  initLive({ sizes, memoryStore: opts.memoryStore, gateway, row, raw, log })
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
      // Reference figures only: full runs and --only redis (it keeps --quick under a minute).
      if (want('redis') && (!Q || opts.only !== null)) await scenarioRedis()
      if (want('latency1')) await scenarioLatency(1)
      if (want('latency10')) await scenarioLatency(10)
      if (want('saturation')) await scenarioSaturation()
      if (want('fanout')) await scenarioFanout()
      if (want('permission')) await scenarioPermission()
      if (want('replay')) await scenarioReplay()
      if (sharedGateway !== null) { await sharedGateway.close(); sharedGateway = null }
      await closeHelpers()
      if (want('idle')) await scenarioIdle()
      if (want('sessions')) await scenarioSessions()
      if (want('scaling')) await scenarioScaling()
      if (want('cluster')) {
        if (opts.memoryStore) notes.push('The cluster scenario does not run with --memory-store (its nodes share a Redis).')
        else await scenarioCluster({ sizes: sizes.cluster, row, raw, log })
      }
      // The sandbox's cost is its own question (and slow): full runs and --only sandbox.
      if (want('sandbox') && (!Q || opts.only !== null)) await scenarioSandbox()
    }
  } finally {
    if (sharedGateway !== null) await sharedGateway.close().catch(() => {})
    await closeHelpers()
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
