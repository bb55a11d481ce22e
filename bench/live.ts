/**
 * The live-path scenarios of bench/run.ts (latency, saturation, fan-out,
 * permission round trip): the gateway against bench/relay.mjs, the same relay
 * storing each chunk first (both store modes; the faster is "relay + store"),
 * and the naive bench/raw-pipe.mjs as an extra row. Sides run interleaved
 * (bench/run.ts `reps` rounds of every side in turn); every run is counted.
 */
import { loadavg } from 'node:os'
import { type Gateway, type RelayStore, TOKEN, procCpuMs, procMinorFaults, redisClient, redisPid, runClients, startRawPipe, startRelay } from './lib.js'
import { med } from './scaling.js'

export interface RowInput {
  scenario: string
  metric: string
  unit: string
  gateway: number | null
  baseline: number | null
  /** Which baseline (relay, relay + store, bare server, …). */
  vs?: string
  target: string
  pass: boolean | null
  note?: string
  ratio?: number | null
}

export interface LiveContext {
  sizes: {
    bytes: number, reps: number, latencyLines: number, latencyRate: number, warmLines: number, saturationLines: number,
    fanoutClients: number, fanoutLines: number, permissionCount: number, permissionWarm: number, permissionReps: number
  }
  memoryStore: boolean
  gateway: () => Promise<Gateway>
  row: (r: RowInput) => void
  raw: Record<string, unknown>
  log: (text: string) => void
}

let ctx: LiveContext
export function initLive (c: LiveContext): void { ctx = c }

export const fmt = (v: number | null | undefined, digits = 2): string => v === null || v === undefined || !Number.isFinite(v) ? '—' : v.toFixed(digits)

/** The session the last gateway streamTurn used. */
let lastSession = ''
/** The relay's store-before-send mode that measured faster in this run's saturation test (script until then). */
let bestStore: Exclude<RelayStore, 'none'> = 'script'
let bestStoreMeasured = false
/** The faster store mode, and whether this run measured it. */
export function storeMode (): { mode: Exclude<RelayStore, 'none'>, measured: boolean } { return { mode: bestStore, measured: bestStoreMeasured } }

/**
 * The live-path sides: `relay` is bench/relay.mjs (frames built once, one
 * write per client per chunk), `pipeline`/`script` the same storing each
 * chunk in Redis first, `store` whichever of those two measured faster,
 * `naive` the old bench/raw-pipe.mjs (ws.send per line, kept as an extra row).
 */
type Side = 'naive' | 'relay' | 'pipeline' | 'script' | 'store' | 'gateway'
const SIDE_LABEL: Record<Side, string> = { naive: 'naive pipe', relay: 'relay', pipeline: 'relay + store (pipeline)', script: 'relay + store (script)', store: 'relay + store', gateway: 'gateway' }
const helpers = new Map<string, { pid: number, ws: string, close: () => Promise<void>, key?: (k: number) => string }>()

async function side (s: Exclude<Side, 'gateway'>): Promise<{ pid: number, ws: string, key?: (k: number) => string }> {
  const kind = s === 'store' ? bestStore : s
  let h = helpers.get(kind)
  if (h === undefined) {
    h = kind === 'naive' ? await startRawPipe() : await startRelay(kind === 'relay' ? 'none' : kind)
    helpers.set(kind, h)
  }
  return h
}

export async function closeHelpers (): Promise<void> {
  await Promise.all([...helpers.values()].map(async (h) => { await h.close().catch(() => {}) }))
  helpers.clear()
}

interface StreamRun { latency_ms: any, frames: number, frames_per_s: number, span_s: number, missing: number, disorder: number, seq_bad: number, closed: number[], lines_per_s_per_client: any, generator: any, cpu_ms?: number, cpu_us_per_line?: number, redis_cpu_us_per_line?: number | null, redis_faults_per_line?: number | null, load1?: number }

async function target (s: Side): Promise<{ url: string, pid: number, token?: string, session?: string }> {
  if (s !== 'gateway') {
    const h = await side(s)
    return { url: h.ws, pid: h.pid }
  }
  const gw = await ctx.gateway()
  lastSession = await gw.createSession()
  return { url: gw.ws, pid: gw.pid, token: TOKEN, session: lastSession }
}

/**
 * One warm-up turn then one measured turn, `clients` sockets in one clients
 * process. Also reads the CPU time the side's process (and redis-server)
 * used during the measured turn: a figure much less disturbed by other load
 * on the machine than wall-clock throughput.
 */
async function streamTurn (label: string, s: Side, clients: number, spec: Record<string, number>, warm: Record<string, number>): Promise<StreamRun> {
  const t = await target(s)
  const proc = runClients({ mode: 'stream', clients, turns: [{ spec: warm, measure: false }, { spec, measure: true }], timeout_ms: 300_000, wait_go: true, ...t })
  await proc.nextEvent()
  proc.command('go')
  await proc.nextEvent()
  const rpid = await redisPid()
  if (s === 'gateway') await (await ctx.gateway()).profile(`${label}-${clients}c-${spec.rate ?? 0}`)
  const load1 = loadavg()[0] as number
  const cpu0 = procCpuMs(t.pid)
  const rcpu0 = rpid === null ? 0 : procCpuMs(rpid)
  const rflt0 = rpid === null ? 0 : procMinorFaults(rpid)
  proc.command('go')
  const result = await proc.result
  const cpu = procCpuMs(t.pid) - cpu0
  const rcpu = rpid === null ? null : procCpuMs(rpid) - rcpu0
  const rflt = rpid === null ? null : procMinorFaults(rpid) - rflt0
  if (s === 'gateway') await (await ctx.gateway()).profile(null)
  const run = result.turns[0] as StreamRun
  const lines = spec.lines ?? 1
  return { ...run, cpu_ms: cpu, cpu_us_per_line: (cpu * 1000) / lines, redis_cpu_us_per_line: rcpu === null ? null : (rcpu * 1000) / lines, redis_faults_per_line: rflt === null ? null : rflt / lines, load1 }
}

/** The same, with the clients spread over `procs` processes (fan-out). */
async function streamTurnMulti (s: Side, clients: number, procs: number, spec: Record<string, number>, warm: Record<string, number>): Promise<StreamRun & { per_proc: StreamRun[] }> {
  const t = await target(s)
  const base: Record<string, unknown> = { mode: 'stream', turns: [{ spec: warm, measure: false }, { spec, measure: true }], timeout_ms: 300_000, wait_go: true, ...t }
  const per = Math.ceil(clients / procs)
  const runs = Array.from({ length: procs }, (_v, p) => runClients({ ...base, clients: Math.min(per, clients - p * per), controller: p === 0 }))
  const rpid = await redisPid()
  let cpu0 = 0
  let rcpu0 = 0
  let load1 = 0
  for (let turn = 0; turn < 2; turn++) {
    await Promise.all(runs.map((r) => r.nextEvent()))
    if (turn === 1) {
      if (s === 'gateway') await (await ctx.gateway()).profile(`fanout-${clients}c`)
      load1 = loadavg()[0] as number
      cpu0 = procCpuMs(t.pid)
      rcpu0 = rpid === null ? 0 : procCpuMs(rpid)
    }
    for (const r of runs) r.command('go')
  }
  const all = await Promise.all(runs.map((r) => r.result))
  const cpu = procCpuMs(t.pid) - cpu0
  const rcpu = rpid === null ? null : procCpuMs(rpid) - rcpu0
  if (s === 'gateway') await (await ctx.gateway()).profile(null)
  const results = all.map((r) => r.turns[0] as StreamRun & { first_send_ns: number, last_recv_ns: number })
  const first = Math.min(...results.map((r) => r.first_send_ns))
  const last = Math.max(...results.map((r) => r.last_recv_ns))
  const frames = results.reduce((sum, r) => sum + r.frames, 0)
  const span = (last - first) / 1e9
  const lines = spec.lines ?? 1
  return {
    latency_ms: { p50: Math.max(...results.map((r) => r.latency_ms.p50 as number)), p99: Math.max(...results.map((r) => r.latency_ms.p99 as number)), note: 'worst process' },
    frames,
    frames_per_s: frames / span,
    span_s: span,
    missing: results.reduce((sum, r) => sum + r.missing, 0),
    disorder: results.reduce((sum, r) => sum + r.disorder, 0),
    seq_bad: results.reduce((sum, r) => sum + r.seq_bad, 0),
    closed: results.flatMap((r) => r.closed),
    lines_per_s_per_client: null,
    generator: results[0]?.generator,
    per_proc: results,
    cpu_ms: cpu,
    cpu_us_per_line: (cpu * 1000) / lines,
    redis_cpu_us_per_line: rcpu === null ? null : (rcpu * 1000) / lines,
    load1
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

/** Median with min–max of one figure over runs. */
function stat (runs: any[], pick: (r: any) => number | null | undefined): { med: number, min: number, max: number, all: number[] } {
  const all = runs.map(pick).filter((x): x is number => typeof x === 'number' && Number.isFinite(x))
  return { med: med(all), min: all.length === 0 ? NaN : Math.min(...all), max: all.length === 0 ? NaN : Math.max(...all), all }
}

/** "median (min–max), n runs" for a note. */
function spreadNote (st: { med: number, min: number, max: number, all: number[] }, digits: number, unit = ''): string {
  return st.all.length > 1 ? `${fmt(st.med, digits)}${unit} (${fmt(st.min, digits)}–${fmt(st.max, digits)}, ${st.all.length} runs)` : `${fmt(st.med, digits)}${unit} (1 run)`
}

/** Load averages (1 min) at the start of each run, for the notes. */
function loads (runs: StreamRun[]): string {
  return `load ${runs.map((r) => fmt(r.load1, 2)).join(', ')}`
}

/** Runs `reps` rounds of every side in turn (interleaved, so a noisy minute hits all of them). */
async function rounds<T> (sides: Side[], reps: number, what: string, run: (s: Side) => Promise<T>): Promise<Record<Side, T[]>> {
  const out = Object.fromEntries(sides.map((s) => [s, [] as T[]])) as Record<Side, T[]>
  for (let rep = 0; rep < reps; rep++) {
    ctx.log(`${what}: ${sides.map((s) => SIDE_LABEL[s]).join(', ')} (run ${rep + 1} of ${reps})`)
    for (const s of sides) out[s].push(await run(s))
  }
  return out
}

export async function scenarioLatency (clients: number): Promise<void> {
  const name = clients === 1 ? 'latency1' : 'latency10'
  const spec = { lines: ctx.sizes.latencyLines, rate: ctx.sizes.latencyRate, bytes: ctx.sizes.bytes }
  const warm = { lines: ctx.sizes.warmLines, rate: 2000, bytes: ctx.sizes.bytes }
  const r = await rounds(['relay', 'gateway'], ctx.sizes.reps, `${name}: ${clients} client(s), ${spec.lines} lines at ${spec.rate}/s`, async (s) => await streamTurn(name, s, clients, spec, warm))
  const rl = r.relay as StreamRun[]
  const gl = r.gateway as StreamRun[]
  ctx.raw[name] = { relay: rl, gateway: gl }
  const scenario = `Latency, 1 session, ${clients} client${clients === 1 ? '' : 's'}, ${spec.rate} lines/s`
  const problems = [...gl.map((g) => integrity(g) && `gateway: ${integrity(g)}`), ...rl.map((x) => integrity(x) && `relay: ${integrity(x)}`)].filter(Boolean)
  const p = (runs: StreamRun[], k: string): { med: number, min: number, max: number, all: number[] } => stat(runs, (x) => x.latency_ms[k])
  const runs = `median of ${gl.length} run(s) of ${spec.lines} lines`
  const cpu = `CPU/line gateway ${spreadNote(stat(gl, (x) => x.cpu_us_per_line), 0, ' µs')} vs relay ${spreadNote(stat(rl, (x) => x.cpu_us_per_line), 0, ' µs')}`
  const limits: [number | null, number] = clients === 1 ? [0.5, 3] : [null, 5]
  for (const [k, add] of [['p50', limits[0]], ['p99', limits[1]]] as const) {
    const metric = k
    const g = p(gl, k)
    const b = p(rl, k)
    ctx.row({
      scenario, metric, unit: 'ms', gateway: g.med, baseline: b.med, vs: 'relay', target: add === null ? '—' : `relay + ${add} ms`,
      pass: add === null || add === undefined ? null : g.med <= b.med + add && problems.length === 0,
      note: [...(k === 'p50' ? problems : []), k === 'p50' ? `${runs}; ${cpu}; ${loads(gl)}` : `gateway ${spreadNote(g, 2)}, relay ${spreadNote(b, 2)}`].join('; ')
    })
  }
  ctx.row({ scenario, metric: 'p99.9', unit: 'ms', gateway: p(gl, 'p999').med, baseline: p(rl, 'p999').med, vs: 'relay', target: '—', pass: null, note: `max ${fmt(p(gl, 'max').med)} vs ${fmt(p(rl, 'max').med)} ms` })
}

export async function scenarioSaturation (): Promise<void> {
  const spec = { lines: ctx.sizes.saturationLines, rate: 0, bytes: ctx.sizes.bytes }
  const warm = { lines: Math.min(20_000, spec.lines / 4), rate: 0, bytes: ctx.sizes.bytes }
  const sides: Side[] = ctx.memoryStore ? ['relay', 'naive', 'gateway'] : ['relay', 'pipeline', 'script', 'naive', 'gateway']
  const xlens: Record<string, number[]> = {}
  const r = await rounds(sides, ctx.sizes.reps, `saturation: ${spec.lines} lines as fast as possible, 1 client`, async (s) => {
    // Redis hands the memory of a deleted stream back to the system only some seconds later. So a
    // side run right after another side's stream was deleted wrote into pages Redis still had,
    // and one run after a pause (the gateway, after the naive pipe) into new pages it had to fault
    // in: 0.1 faults a line, up to 2 µs more Redis CPU a line (docs/PERFORMANCE.md §26). Purged
    // first, every side writes its stream into new pages.
    if (!ctx.memoryStore) await redisClient().call('MEMORY', 'PURGE')
    const run = await streamTurn('saturation', s, 1, spec, warm)
    // Store-before-relay: every delivered line was in Redis before it was sent. Check the stream too.
    let key: string | null = null
    if (s === 'gateway' && !ctx.memoryStore) key = `${(await ctx.gateway()).prefix}{${lastSession}}:events`
    if (s === 'pipeline' || s === 'script') key = (await side(s)).key?.(0) ?? null
    if (key !== null) {
      const xlen = await redisClient().xlen(key)
      ;(xlens[s] ??= []).push(xlen)
      // Deleted once counted, the gateway's too (its session is done with), so Redis does not grow
      // by 66 MB a run. DEL, not UNLINK: freed before the reply, so the purge before the next side's
      // run finds it (an UNLINK frees it in the background, after the purge). The relay's next seq is
      // above every id it wrote, so a fresh stream takes it.
      await redisClient().del(key)
    }
    return run
  })
  const tput = (s: Side): { med: number, min: number, max: number, all: number[] } => stat(r[s] as StreamRun[], (x) => x.frames_per_s)
  const cpu = (s: Side): { med: number, min: number, max: number, all: number[] } => stat(r[s] as StreamRun[], (x) => x.cpu_us_per_line)
  const rcpu = (s: Side): { med: number, min: number, max: number, all: number[] } => stat(r[s] as StreamRun[], (x) => x.redis_cpu_us_per_line)
  const rflt = (s: Side): { med: number, min: number, max: number, all: number[] } => stat(r[s] as StreamRun[], (x) => x.redis_faults_per_line)
  if (!ctx.memoryStore) {
    bestStore = tput('pipeline').med >= tput('script').med ? 'pipeline' : 'script'
    bestStoreMeasured = true
  }
  ctx.raw.saturation = { runs: r, redis_xlen: xlens, best_store: bestStore }
  const g = r.gateway as StreamRun[]
  const scenario = `Saturation, 1 session, 1 client, ${ctx.sizes.bytes} B lines`
  const gBad = g.map(integrity).filter(Boolean)
  const expected = spec.lines + warm.lines
  const short = [...(xlens.gateway ?? []), ...(xlens[bestStore] ?? [])].filter((x) => x < expected)
  const note = (s: Side): string => `gateway ${spreadNote(tput('gateway'), 0)}; ${SIDE_LABEL[s]} ${spreadNote(tput(s), 0)}; ${loads(g)}`
  ctx.row({ scenario, metric: 'lines/s delivered', unit: 'lines/s', gateway: tput('gateway').med, baseline: tput('relay').med, vs: 'relay', target: '≥ 0.6 × relay', pass: tput('gateway').med >= 0.6 * tput('relay').med && gBad.length === 0, note: [...gBad.map((x) => `gateway: ${x}`), note('relay')].join('; ') })
  ctx.row({ scenario, metric: 'CPU per line (process CPU time)', unit: 'µs', gateway: cpu('gateway').med, baseline: cpu('relay').med, vs: 'relay', target: '≤ 2 × relay', pass: cpu('gateway').med <= 2 * cpu('relay').med, note: `gateway ${spreadNote(cpu('gateway'), 1)}, relay ${spreadNote(cpu('relay'), 1)}; redis-server ${spreadNote(rcpu('gateway'), 1, ' µs')} per line more for the gateway` })
  if (!ctx.memoryStore) {
    ctx.row({ scenario, metric: 'lines/s persisted and delivered', unit: 'lines/s', gateway: tput('gateway').med, baseline: tput(bestStore).med, vs: `relay + store (${bestStore})`, target: '≥ 1 × relay + store', pass: tput('gateway').med >= tput(bestStore).med && short.length === 0, note: `${note(bestStore)}; Redis streams hold ${(xlens.gateway ?? []).join(', ')} (gateway) and ${(xlens[bestStore] ?? []).join(', ')} (relay) events after the runs` })
    ctx.row({ scenario, metric: 'CPU per line vs relay + store', unit: 'µs', gateway: cpu('gateway').med, baseline: cpu(bestStore).med, vs: `relay + store (${bestStore})`, target: 'reference', pass: null, note: `redis-server per line: gateway ${spreadNote(rcpu('gateway'), 1, ' µs')}, relay + store ${spreadNote(rcpu(bestStore), 1, ' µs')}; its page faults per line: gateway ${spreadNote(rflt('gateway'), 3)}, relay + store ${spreadNote(rflt(bestStore), 3)}` })
    for (const s of ['pipeline', 'script'] as const) {
      ctx.row({ scenario, metric: `store mode: ${SIDE_LABEL[s]}`, unit: 'lines/s', gateway: null, baseline: tput(s).med, vs: SIDE_LABEL[s], target: 'reference', pass: null, note: `${spreadNote(tput(s), 0)}; CPU/line ${spreadNote(cpu(s), 1, ' µs')}, redis ${spreadNote(rcpu(s), 1, ' µs')}${s === bestStore ? '; the faster: used as relay + store in this run' : ''}` })
    }
  }
  ctx.row({ scenario, metric: 'extra: naive pipe (ws.send per line)', unit: 'lines/s', gateway: tput('gateway').med, baseline: tput('naive').med, vs: 'naive pipe', target: 'reference', pass: null, note: `${spreadNote(tput('naive'), 0)}; CPU/line ${spreadNote(cpu('naive'), 1, ' µs')}` })
}

export async function scenarioFanout (): Promise<void> {
  const n = ctx.sizes.fanoutClients
  const spec = { lines: ctx.sizes.fanoutLines, rate: 0, bytes: ctx.sizes.bytes }
  const warm = { lines: Math.max(200, spec.lines / 5), rate: 0, bytes: ctx.sizes.bytes }
  const sides: Side[] = ctx.memoryStore ? ['relay', 'naive', 'gateway'] : ['relay', 'store', 'naive', 'gateway']
  const r = await rounds(sides, ctx.sizes.reps, `fan-out: ${n} clients (2 processes), ${spec.lines} lines as fast as possible`, async (s) => await streamTurnMulti(s, n, 2, spec, warm))
  ctx.raw.fanout = { runs: r, store: bestStore }
  const tput = (s: Side): { med: number, min: number, max: number, all: number[] } => stat(r[s] as StreamRun[], (x) => x.frames_per_s)
  const g = r.gateway as StreamRun[]
  const scenario = `Fan-out, 1 session, ${n} clients`
  const bad = g.map(integrity).filter(Boolean).map((x) => `gateway: ${x}`)
  const common = `${spec.lines} lines × ${n} clients; gateway ${spreadNote(tput('gateway'), 0)}; CPU/frame gateway ${spreadNote(stat(g, (x) => (x.cpu_us_per_line ?? NaN) / n), 2, ' µs')}; ${loads(g)}`
  if (!ctx.memoryStore) {
    ctx.row({ scenario, metric: 'frames/s delivered (total)', unit: 'frames/s', gateway: tput('gateway').med, baseline: tput('store').med, vs: `relay + store (${bestStore})`, target: '≥ 0.8 × relay + store', pass: tput('gateway').med >= 0.8 * tput('store').med && bad.length === 0, note: [...bad, common, `relay + store ${spreadNote(tput('store'), 0)}`].join('; ') })
  }
  ctx.row({ scenario, metric: 'frames/s vs relay without store', unit: 'frames/s', gateway: tput('gateway').med, baseline: tput('relay').med, vs: 'relay', target: 'reference', pass: null, note: `relay ${spreadNote(tput('relay'), 0)}` })
  ctx.row({ scenario, metric: 'extra: naive pipe (ws.send per line per client)', unit: 'frames/s', gateway: tput('gateway').med, baseline: tput('naive').med, vs: 'naive pipe', target: 'reference', pass: null, note: `naive ${spreadNote(tput('naive'), 0)}` })
}

export async function scenarioPermission (): Promise<void> {
  const spec = { permission: true, count: ctx.sizes.permissionCount, gap_ms: 2 }
  const warm = { ...spec, count: ctx.sizes.permissionWarm }
  const gw = await ctx.gateway()
  const session = await gw.createSession()
  const sides: Side[] = ctx.memoryStore ? ['relay', 'gateway'] : ['relay', 'gateway', 'store']
  let gatewayRuns = 0
  // Every run is counted; each warms up (JIT) on its own socket first, then measures.
  const r = await rounds(sides, ctx.sizes.permissionReps, `permission: ${spec.count} can_use_tool round trips after ${warm.count} warm-up ones`, async (s) => {
    const load1 = loadavg()[0] as number
    // --profile: the gateway's last run (it is not the round's last side when the relay + store runs after it).
    const last = s === 'gateway' && ++gatewayRuns === ctx.sizes.permissionReps
    if (s === 'gateway' && last) await gw.profile('permission')
    const url = s === 'gateway' ? gw.ws : (await side(s as Exclude<Side, 'gateway'>)).ws
    const res = await runClients({ mode: 'permission', url, token: s === 'gateway' ? TOKEN : undefined, session: s === 'gateway' ? session : undefined, spec, warm, timeout_ms: 120_000 }).result
    if (s === 'gateway' && last) await gw.profile(null)
    return { ...res, load1 }
  })
  ctx.raw.permission = { runs: r, store: bestStore }
  const g = r.gateway as any[]
  const b = r.relay as any[]
  const p = (runs: any[], key: string): { med: number, min: number, max: number, all: number[] } => stat(runs, (x) => x.rtt_ms[key])
  const perRun = (runs: any[]): string => runs.map((x) => fmt(x.rtt_ms.p99)).join(', ')
  const everyRun = g.every((x, i) => x.rtt_ms.p99 <= (b[i]?.rtt_ms.p99 ?? -Infinity) + 1)
  const scenario = 'Permission round trip (generator-measured)'
  ctx.row({ scenario, metric: 'p50', unit: 'ms', gateway: p(g, 'p50').med, baseline: p(b, 'p50').med, vs: 'relay', target: '—', pass: null, note: `median of ${g.length} run(s) of ${spec.count} prompts, every run counted, each after ${warm.count} warm-up prompts; ${loads(g)}` })
  ctx.row({ scenario, metric: 'p99', unit: 'ms', gateway: p(g, 'p99').med, baseline: p(b, 'p99').med, vs: 'relay', target: 'relay + 1 ms in every run', pass: everyRun, note: `per run: gateway ${perRun(g)}; relay ${perRun(b)}` })
  ctx.row({ scenario, metric: 'p99.9', unit: 'ms', gateway: p(g, 'p999').med, baseline: p(b, 'p999').med, vs: 'relay', target: '—', pass: null })
  if (!ctx.memoryStore) {
    const x = r.store as any[]
    // The store hop alone against the same target: what a host's scheduling leaves for the gateway's own work.
    const storeWithin = x.filter((y, i) => y.rtt_ms.p99 <= (b[i]?.rtt_ms.p99 ?? -Infinity) + 1).length
    ctx.row({ scenario, metric: 'p99 vs relay + store', unit: 'ms', gateway: p(g, 'p99').med, baseline: p(x, 'p99').med, vs: `relay + store (${bestStore})`, target: 'reference', pass: null, note: `per run: relay + store ${perRun(x)}; p50 ${fmt(p(x, 'p50').med)} ms; relay + store within relay + 1 ms in ${storeWithin} of ${x.length} run(s)` })
  }
}

