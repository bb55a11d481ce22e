/**
 * The scaling curve of issue 14: how the gateway's added latency and cost per
 * line grow with the number of sessions, against the batched relay
 * (bench/relay.mjs) serving the same sessions at the same load in the same
 * run. One generator process (bench/multi-gen.mjs) speaks for every session
 * through one socat CLI per session, for the gateway and for both relays
 * alike, so the generator side is the same for all three. For each session
 * count one gateway and two relay processes (no store; store-before-send) are
 * started with that many sessions; each cell (lines/s × clients per session)
 * connects one clients process per side, warms each up with a short turn, then
 * runs the measured turns interleaved (relay, relay + store, gateway, then
 * again), reading each side's and Redis's CPU time around its turn.
 */
import { loadavg } from 'node:os'
import {
  type Gateway, type RelayStore, TOKEN, procCpuMs, redisPid, runClients, startGateway, startMultiGen, startRelay
} from './lib.js'

export interface ScalingSizes {
  sessions: number[]
  rates: number[]
  clients: number[]
  /** Length of one measured turn (lines per session = rate × seconds). */
  seconds: number
  reps: number
  bytes: number
}

export type SideName = 'relay' | 'store' | 'gateway'
export const SIDES: SideName[] = ['relay', 'store', 'gateway']

export interface TurnFigures {
  p50: number
  p99: number
  p999: number
  max: number
  n: number
  missing: number
  disorder: number
  closed: number
  span_s: number
  cpu_us_per_line: number
  redis_cpu_us_per_line: number | null
  load1: number
}

export interface SideRuns {
  runs: TurnFigures[]
  /** Set when the side could not finish its turns (the cell's figures for it are then missing). */
  error?: string
  /** Process RSS growth per session after the cell, after a full GC (bytes). */
  rss_per_session: number | null
}

export interface Cell {
  sessions: number
  rate: number
  clients: number
  lines_per_session: number
  sides: Record<SideName, SideRuns>
}

interface Target {
  name: SideName
  ws: string
  pid: number
  ids: string[]
  token?: string
  /** Starts (label) or ends (null) a profiling window of the side's process (the gateway's, with --profile). */
  profile?: (label: string | null) => Promise<void>
  rss: () => Promise<number>
  emptyRss: number
}

const log = (text: string): void => { process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${text}\n`) }

async function createSessions (gw: Gateway, n: number): Promise<string[]> {
  const ids: string[] = new Array(n)
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < n) {
      const i = next++
      ids[i] = await gw.createSession()
    }
  }
  await Promise.all(Array.from({ length: Math.min(n, 8) }, worker))
  return ids
}

/** Runs every cell of the curve; `store` is the relay's faster store mode (measured by the caller). */
export async function runScaling (sizes: ScalingSizes, store: Exclude<RelayStore, 'none'>, profile: { dir: string, kind: 'cpu' | 'heap' | 'heap-survivors' } | null = null): Promise<Cell[]> {
  const cells: Cell[] = []
  const rpid = await redisPid()
  // Processes with no session: what each costs before its first session.
  const empties: Record<string, number> = {}
  for (const mode of ['none', store] as const) {
    const r = await startRelay(mode, { sessions: 0 })
    try { empties[mode] = (await r.stats()).rss } finally { await r.close() }
  }
  for (const n of sizes.sessions) {
    log(`scaling: ${n} session(s): starting the generator, two relays and a gateway with ${n} socat CLIs each`)
    const gen = await startMultiGen()
    const relay = await startRelay('none', { sessions: n, cli: gen.cli })
    const stored = await startRelay(store, { sessions: n, cli: gen.cli })
    const gw = await startGateway({ claudeBin: gen.cli, profileDir: profile?.dir, profileKind: profile?.kind, env: { MAX_SESSIONS: String(n + 20), MAX_SESSIONS_PER_TENANT: String(n + 20) } })
    try {
      const gwEmpty = (await gw.stats()).proc_rss
      const ids = await createSessions(gw, n)
      const relayIds = Array.from({ length: n }, (_v, k) => String(k))
      const targets: Target[] = [
        { name: 'relay', ws: relay.ws, pid: relay.pid, ids: relayIds, rss: async () => (await relay.stats()).rss, emptyRss: empties.none as number },
        { name: 'store', ws: stored.ws, pid: stored.pid, ids: relayIds, rss: async () => (await stored.stats()).rss, emptyRss: empties[store] as number },
        { name: 'gateway', ws: gw.ws, pid: gw.pid, ids, token: TOKEN, profile: async (label) => { await gw.profile(label) }, rss: async () => (await gw.stats()).proc_rss, emptyRss: gwEmpty }
      ]
      for (const rate of sizes.rates) {
        for (const clients of sizes.clients) {
          cells.push(await runCell(sizes, targets, n, rate, clients, rpid))
        }
      }
    } finally {
      await gw.close()
      await relay.close()
      await stored.close()
      await gen.close()
    }
  }
  return cells
}

async function runCell (sizes: ScalingSizes, targets: Target[], n: number, rate: number, clients: number, rpid: number | null): Promise<Cell> {
  const lines = Math.max(1, Math.round(rate * sizes.seconds))
  const spec = { lines, rate, bytes: sizes.bytes }
  const warm = { lines: Math.max(1, Math.round(rate * 0.5)), rate, bytes: sizes.bytes }
  const turns = [{ spec: warm, measure: false }, ...Array.from({ length: sizes.reps }, () => ({ spec, measure: true }))]
  // A turn that cannot keep up runs long: allow four times its length and a minute more.
  const timeoutMs = 60_000 + 4 * sizes.seconds * 1000
  log(`scaling: ${n} sessions × ${rate} lines/s × ${clients} client(s): ${sizes.reps} turn(s) of ${lines} lines per session on each side`)
  const procs = targets.map((t) => runClients({ mode: 'multi', url: t.ws, token: t.token, sessions: t.ids, per_session: clients, turns, wait_go: true, timeout_ms: timeoutMs }))
  const sides = Object.fromEntries(targets.map((t) => [t.name, { runs: [] as TurnFigures[], rss_per_session: null as number | null }])) as Record<SideName, SideRuns & { cpu: Array<{ cpu: number, rcpu: number | null, load1: number }> }>
  for (const s of Object.values(sides)) s.cpu = []
  const alive = targets.map(() => true)
  const fail = (i: number, err: unknown): void => {
    alive[i] = false
    const side = sides[(targets[i] as Target).name]
    side.error ??= err instanceof Error ? err.message : String(err)
  }
  // Settles when a clients process ends: null when it ended with a result, else its error.
  const ended = procs.map((p) => p.result.then(() => null, (err: unknown) => err instanceof Error ? err : new Error(String(err))))
  const step = async (i: number): Promise<boolean> => {
    const p = procs[i] as (typeof procs)[number]
    const got = await Promise.race([p.nextEvent().then(() => 'event' as const), ended[i] as Promise<Error | null>])
    if (got === 'event') return true
    fail(i, got ?? new Error('clients ended before the turn'))
    return false
  }
  // Every process connects and waits before the warm-up turn.
  await Promise.all(targets.map(async (_t, i) => await step(i)))
  for (let turn = 0; turn < turns.length; turn++) {
    for (let i = 0; i < targets.length; i++) {
      if (!alive[i]) continue
      const t = targets[i] as Target
      const p = procs[i] as (typeof procs)[number]
      const load1 = loadavg()[0] as number
      const cpu0 = procCpuMs(t.pid)
      const r0 = rpid === null ? 0 : procCpuMs(rpid)
      // Measured turns only; the profiling window's own cost lands outside the CPU reading above.
      const profiled = turn > 0 && t.profile !== undefined
      if (profiled) await t.profile?.(`scaling-${n}x${rate}x${clients}-${turn}`)
      p.command('go')
      // The next turn's `ready` ends this one; after the last turn the result does.
      if (turn < turns.length - 1) {
        if (!await step(i)) continue
      } else {
        const err = await ended[i]
        if (err !== null && err !== undefined) { fail(i, err); continue }
      }
      if (turn > 0) sides[t.name].cpu.push({ cpu: procCpuMs(t.pid) - cpu0, rcpu: rpid === null ? null : procCpuMs(rpid) - r0, load1 })
      if (profiled) await t.profile?.(null)
    }
  }
  for (let i = 0; i < targets.length; i++) {
    const t = targets[i] as Target
    const side = sides[t.name]
    if (alive[i]) {
      const result = await (procs[i] as (typeof procs)[number]).result
      const total = n * lines
      result.turns.forEach((r: any, k: number) => {
        const c = side.cpu[k] as { cpu: number, rcpu: number | null, load1: number }
        side.runs.push({
          p50: r.latency_ms.p50, p99: r.latency_ms.p99, p999: r.latency_ms.p999, max: r.latency_ms.max, n: r.latency_ms.n,
          missing: r.missing, disorder: r.disorder, closed: r.closed.length, span_s: r.span_s,
          cpu_us_per_line: (c.cpu * 1000) / total, redis_cpu_us_per_line: c.rcpu === null ? null : (c.rcpu * 1000) / total, load1: c.load1
        })
      })
    } else {
      await ended[i]
    }
    side.rss_per_session = (await t.rss() - t.emptyRss) / n
    delete (side as Partial<typeof side>).cpu
  }
  return { sessions: n, rate, clients, lines_per_session: lines, sides }
}

// ---------------------------------------------------------------- figures

export function med (xs: number[]): number {
  const a = xs.filter((x) => Number.isFinite(x)).sort((x, y) => x - y)
  if (a.length === 0) return NaN
  const m = Math.floor(a.length / 2)
  return a.length % 2 === 1 ? a[m] as number : ((a[m - 1] as number) + (a[m] as number)) / 2
}

/** Median of one figure over a side's runs, with its min–max. */
export function spread (runs: TurnFigures[], pick: (r: TurnFigures) => number | null): { med: number, min: number, max: number } {
  const xs = runs.map(pick).filter((x): x is number => x !== null && Number.isFinite(x))
  return { med: med(xs), min: xs.length === 0 ? NaN : Math.min(...xs), max: xs.length === 0 ? NaN : Math.max(...xs) }
}

/** Added latency per run: gateway run k minus relay run k (they ran back to back), median and spread. */
export function added (cell: Cell, pick: (r: TurnFigures) => number): { med: number, min: number, max: number } {
  const g = cell.sides.gateway.runs
  const r = cell.sides.relay.runs
  const diffs = g.slice(0, r.length).map((x, k) => pick(x) - pick(r[k] as TurnFigures))
  return { med: med(diffs), min: diffs.length === 0 ? NaN : Math.min(...diffs), max: diffs.length === 0 ? NaN : Math.max(...diffs) }
}

const f = (v: number, d: number): string => Number.isFinite(v) ? v.toFixed(d) : '—'
function fs (s: { med: number, min: number, max: number }, d: number, reps: number): string {
  if (!Number.isFinite(s.med)) return '—'
  return reps > 1 ? `${f(s.med, d)} (${f(s.min, d)}–${f(s.max, d)})` : f(s.med, d)
}

/** The curve as a markdown table: medians of the turns with min–max, per side. */
export function renderScaling (cells: Cell[], sizes: ScalingSizes, store: string): string {
  const out: string[] = []
  out.push('## Scaling curve', '')
  out.push(`Each cell: every session gets ${sizes.seconds} s of lines at the given rate (${sizes.bytes} B), ${sizes.reps} measured turn(s) per side after a warm-up turn, sides interleaved; figures are the median of the turns with min–max in brackets. ` +
    `relay = bench/relay.mjs without store; relay+store = the same storing each chunk first (${store}, the faster mode in this run's saturation test), shown for latency too: it pays the store hop the gateway pays. Added = gateway − relay of the same turn pair. ` +
    'CPU per line = the process\'s CPU time over the turn ÷ lines generated (all sessions); Redis CPU likewise for redis-server. RSS per session = (process RSS after a full GC after the cell − the same process kind with no session) ÷ sessions, shown from 100 sessions up (below that, heap noise is larger than the figure; the JSON has it). Load = 1-minute load average when each turn started.', '')
  out.push('| sessions × lines/s × clients | load (1 min) | relay p50 / p99 ms | relay+store p50 / p99 ms | gateway p50 / p99 ms | added p50 / p99 ms | CPU µs/line: gateway / relay / relay+store | Redis µs/line: gateway / relay+store | RSS KiB/session: gateway / relay | notes |')
  out.push('|---|---|---|---|---|---|---|---|---|---|')
  for (const c of cells) {
    const reps = sizes.reps
    const g = c.sides.gateway
    const r = c.sides.relay
    const s = c.sides.store
    const loads = [...r.runs, ...s.runs, ...g.runs].map((x) => x.load1)
    const load = loads.length === 0 ? '—' : `${f(Math.min(...loads), 2)}–${f(Math.max(...loads), 2)}`
    const notes: string[] = []
    for (const [name, side] of [['gateway', g], ['relay', r], ['relay+store', s]] as const) {
      if (side.error !== undefined) notes.push(`${name} FAILED: ${side.error.slice(0, 120)}`)
      const missing = side.runs.reduce((a, x) => a + x.missing, 0)
      const disorder = side.runs.reduce((a, x) => a + x.disorder, 0)
      if (missing > 0 || disorder > 0) notes.push(`${name}: ${missing} lines missing, ${disorder} out of order`)
      // A turn lasts the lines' span plus the last line's latency; much longer means the side (or the generator) fell behind.
      const nominal = c.lines_per_session / c.rate
      const slow = side.runs.filter((x) => x.span_s > nominal * 1.2 + 0.2)
      if (slow.length > 0) notes.push(`${name} fell behind: turns took ${side.runs.map((x) => f(x.span_s, 1)).join(', ')} s for ${f(nominal, 1)} s of lines`)
    }
    notes.push(`${g.runs[0]?.n ?? 0} samples a turn`)
    out.push(`| ${c.sessions} × ${c.rate} × ${c.clients} | ${load} | ${fs(spread(r.runs, (x) => x.p50), 2, reps)} / ${fs(spread(r.runs, (x) => x.p99), 2, reps)} | ${fs(spread(s.runs, (x) => x.p50), 2, reps)} / ${fs(spread(s.runs, (x) => x.p99), 2, reps)} | ${fs(spread(g.runs, (x) => x.p50), 2, reps)} / ${fs(spread(g.runs, (x) => x.p99), 2, reps)} | ` +
      `${fs(added(c, (x) => x.p50), 2, reps)} / ${fs(added(c, (x) => x.p99), 2, reps)} | ${fs(spread(g.runs, (x) => x.cpu_us_per_line), 1, reps)} / ${fs(spread(r.runs, (x) => x.cpu_us_per_line), 1, reps)} / ${fs(spread(s.runs, (x) => x.cpu_us_per_line), 1, reps)} | ` +
      `${fs(spread(g.runs, (x) => x.redis_cpu_us_per_line), 1, reps)} / ${fs(spread(s.runs, (x) => x.redis_cpu_us_per_line), 1, reps)} | ${c.sessions < 100 ? '—' : `${f((g.rss_per_session ?? NaN) / 1024, 1)} / ${f((r.rss_per_session ?? NaN) / 1024, 1)}`} | ${notes.join('; ').replace(/\|/g, '\\|')} |`)
  }
  out.push('')
  return out.join('\n')
}
