/**
 * The cluster scenario of bench/run.ts (issue 15): three gateway nodes
 * (bench/gateway-proc.mjs on dist/, each its own NODE_ID) sharing one Redis,
 * one key prefix, one STORE_SECRET and one DATA_DIR, as docs/SCALING.md asks.
 *
 * - Cross-node latency: a session created on node A (its owner, running
 *   bench/load-cli.mjs), one client on A and one on B attached at once; every
 *   line's delivery delay is read on both in the same turn (client receive
 *   time − generator send time, CLOCK_MONOTONIC, as in bench/live.ts). The
 *   baseline is the same-node client of the same turn, so the difference is
 *   what following the session through Redis adds.
 * - Throughput: the same number of sessions printing as fast as they can, one
 *   client each, either all on node A or spread over the three nodes (session
 *   k created on, and its client on, node k mod 3). Both layouts run on the
 *   same three processes, turns interleaved; the clients are three processes
 *   in both layouts, so only the gateway side differs.
 */
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { type ClientsProc, type Gateway, TOKEN, deleteKeys, livePrefixes, procCpuMs, redisPid, runClients, startGateway } from './lib.js'
import type { RowInput } from './live.js'
import { med } from './scaling.js'

export interface ClusterSizes {
  /** Runs of each part (latency: one session each; throughput: one turn per layout each, interleaved). */
  reps: number
  bytes: number
  latencyLines: number
  latencyRate: number
  warmLines: number
  /** Sessions in each throughput layout (a multiple of 3). */
  sessions: number
  /** Lines per session in one throughput turn (as fast as possible). */
  linesPerSession: number
}

export const CLUSTER_FULL: ClusterSizes = { reps: 3, bytes: 512, latencyLines: 5000, latencyRate: 1000, warmLines: 1000, sessions: 6, linesPerSession: 40_000 }
export const CLUSTER_QUICK: ClusterSizes = { reps: 1, bytes: 512, latencyLines: 1000, latencyRate: 1000, warmLines: 500, sessions: 6, linesPerSession: 5000 }

export interface ClusterContext {
  sizes: ClusterSizes
  row: (r: RowInput) => void
  raw: Record<string, unknown>
  log: (text: string) => void
}

const NODES = 3
const fmt = (v: number | null | undefined, digits = 2): string => v === null || v === undefined || !Number.isFinite(v) ? '—' : v.toFixed(digits)

interface Spread { med: number, min: number, max: number, all: number[] }
function spread (xs: number[]): Spread {
  const all = xs.filter((x) => Number.isFinite(x))
  return { med: med(all), min: all.length === 0 ? NaN : Math.min(...all), max: all.length === 0 ? NaN : Math.max(...all), all }
}
/** "median (min–max, n runs)" for a note. */
function sp (s: Spread, digits: number, unit = ''): string {
  return s.all.length > 1 ? `${fmt(s.med, digits)}${unit} (${fmt(s.min, digits)}–${fmt(s.max, digits)}, ${s.all.length} runs)` : `${fmt(s.med, digits)}${unit} (1 run)`
}

interface Cluster { nodes: Gateway[], prefix: string, close: () => Promise<void> }

/**
 * Three nodes as one deployment: the shared prefix and data folder are this
 * function's (lib.ts makes a fresh one per gateway, unused here), so it
 * deletes them itself.
 */
async function startCluster (): Promise<Cluster> {
  const prefix = `cgwbench:${process.pid}-${randomBytes(4).toString('hex')}:`
  livePrefixes.add(prefix)
  const dataDir = mkdtempSync(join(tmpdir(), 'cgw-bench-cluster-'))
  const secret = randomBytes(32).toString('hex')
  const nodes: Gateway[] = []
  const close = async (): Promise<void> => {
    await Promise.all(nodes.map(async (n) => await n.close().catch(() => {})))
    await deleteKeys(prefix).catch(() => 0)
    livePrefixes.delete(prefix)
    rmSync(dataDir, { recursive: true, force: true })
  }
  try {
    for (let i = 0; i < NODES; i++) {
      // EVENTS_MAX_PER_SESSION bounds what the throughput turns leave in the shared Redis (12 sessions × 130,000 lines of 512 B otherwise).
      const env = { NODE_ID: `bench-node-${'abc'[i] as string}`, REDIS_PREFIX: prefix, DATA_DIR: dataDir, STORE_SECRET: secret, EVENTS_MAX_PER_SESSION: '25000' }
      nodes.push(await startGateway({ env }))
    }
  } catch (err) {
    await close()
    throw err
  }
  return { nodes, prefix, close }
}

/** The clients process's next event; rejects instead of waiting forever when the process ends first (with its error). */
async function step (p: ClientsProc): Promise<void> {
  await Promise.race([p.nextEvent(), p.result.then(() => { throw new Error('clients process ended before its next turn') })])
}

interface StreamTurn { latency_ms: { p50: number, p99: number, p999: number, max: number, n: number }, frames: number, missing: number, disorder: number, seq_bad: number, closed: number[] }

function integrity (name: string, t: StreamTurn | undefined): string[] {
  if (t === undefined) return [`${name}: no measured turn`]
  const bad: string[] = []
  if (t.missing !== 0) bad.push(`${name}: ${t.missing} missing`)
  if (t.disorder !== 0) bad.push(`${name}: ${t.disorder} out of order`)
  if (t.seq_bad !== undefined && t.seq_bad !== 0) bad.push(`${name}: ${t.seq_bad} seq breaks`)
  if (t.closed.length !== 0) bad.push(`${name}: closed ${t.closed.join(',')}`)
  return bad
}

interface LatencyRun { a: StreamTurn, b: StreamTurn, load1: number, cpu_ms: { a: number, b: number, redis: number | null } }

/** One session on node A, a client on A and one on B; a warm-up turn, then one measured turn. */
async function latencyRun (c: ClusterContext, cl: Cluster, rpid: number | null): Promise<LatencyRun> {
  const [a, b] = cl.nodes as [Gateway, Gateway]
  const session = await a.createSession()
  const spec = { lines: c.sizes.latencyLines, rate: c.sizes.latencyRate, bytes: c.sizes.bytes }
  const warm = { lines: c.sizes.warmLines, rate: 2000, bytes: c.sizes.bytes }
  const base = { mode: 'stream', clients: 1, token: TOKEN, session, turns: [{ spec: warm, measure: false }, { spec, measure: true }], wait_go: true, timeout_ms: 120_000 }
  const pa = runClients({ ...base, url: a.ws })
  // B only watches: A's client sends the turns, B's waits for the same `result` line.
  const pb = runClients({ ...base, url: b.ws, controller: false })
  const both = async (): Promise<void> => { await Promise.all([step(pa), step(pb)]) }
  await both()
  pb.command('go')
  pa.command('go')
  await both()
  const load1 = loadavg()[0] as number
  const cpuA = procCpuMs(a.pid)
  const cpuB = procCpuMs(b.pid)
  const cpuR = rpid === null ? 0 : procCpuMs(rpid)
  pb.command('go')
  pa.command('go')
  const [ra, rb] = await Promise.all([pa.result, pb.result])
  return {
    a: ra.turns[0] as StreamTurn,
    b: rb.turns[0] as StreamTurn,
    load1,
    cpu_ms: { a: procCpuMs(a.pid) - cpuA, b: procCpuMs(b.pid) - cpuB, redis: rpid === null ? null : procCpuMs(rpid) - cpuR }
  }
}

async function latency (c: ClusterContext, cl: Cluster, rpid: number | null): Promise<void> {
  const runs: LatencyRun[] = []
  for (let rep = 0; rep < c.sizes.reps; rep++) {
    c.log(`cluster: cross-node latency, ${c.sizes.latencyLines} lines at ${c.sizes.latencyRate}/s, client on owner A and on B (run ${rep + 1} of ${c.sizes.reps})`)
    runs.push(await latencyRun(c, cl, rpid))
  }
  c.raw.cluster_latency = runs
  const pick = (side: 'a' | 'b', k: 'p50' | 'p99' | 'p999'): Spread => spread(runs.map((r) => r[side].latency_ms[k]))
  const add = (k: 'p50' | 'p99'): Spread => spread(runs.map((r) => r.b.latency_ms[k] - r.a.latency_ms[k]))
  const problems = runs.flatMap((r) => [...integrity('A', r.a), ...integrity('B', r.b)])
  const scenario = `Cluster: cross-node delivery, 1 session on node A, ${c.sizes.latencyRate} lines/s, a client on A and one on B`
  const loads = `load ${runs.map((r) => fmt(r.load1, 2)).join(', ')}`
  const cpu = `CPU/line node A ${sp(spread(runs.map((r) => (r.cpu_ms.a * 1000) / c.sizes.latencyLines)), 0, ' µs')}, node B ${sp(spread(runs.map((r) => (r.cpu_ms.b * 1000) / c.sizes.latencyLines)), 0, ' µs')}`
  const vs = 'same-node client (A)'
  c.row({
    scenario, metric: 'p50 (B on another node vs A on the owner)', unit: 'ms', gateway: pick('b', 'p50').med, baseline: pick('a', 'p50').med, vs, target: '—', pass: null,
    note: [...problems, `added p50 (B − A per run) ${sp(add('p50'), 2, ' ms')}; median of ${runs.length} run(s) of ${c.sizes.latencyLines} lines, both clients in the same turn; ${cpu}; ${loads}`].join('; ')
  })
  const added99 = add('p99')
  c.row({
    scenario, metric: 'p99 (pass: added p99 = B − A per run)', unit: 'ms', gateway: pick('b', 'p99').med, baseline: pick('a', 'p99').med, vs, target: 'added ≤ 2 ms',
    pass: added99.med <= 2 && problems.length === 0,
    note: `added p99 ${sp(added99, 2, ' ms')}; B ${sp(pick('b', 'p99'), 2)}, A ${sp(pick('a', 'p99'), 2)}`
  })
  c.row({ scenario, metric: 'p99.9', unit: 'ms', gateway: pick('b', 'p999').med, baseline: pick('a', 'p999').med, vs, target: '—', pass: null, note: `max B ${fmt(spread(runs.map((r) => r.b.latency_ms.max)).med)} vs A ${fmt(spread(runs.map((r) => r.a.latency_ms.max)).med)} ms` })
}

type Layout = 'one' | 'three'
interface MultiTurn { frames: number, span_s: number, missing: number, disorder: number, closed: number[], latency_ms: { p50: number, p99: number } }
interface TputRun { lines_per_s: number, frames: number, span_s: number, missing: number, disorder: number, closed: number, cpu_us_per_line: number, redis_cpu_us_per_line: number | null, load1: number }

/** Creates `n` sessions, session k on `node(k)`, a few at a time. */
async function createOn (n: number, node: (k: number) => Gateway): Promise<string[]> {
  const ids: string[] = new Array(n)
  await Promise.all(Array.from({ length: NODES }, async (_v, w) => {
    for (let k = w; k < n; k += NODES) ids[k] = await node(k).createSession()
  }))
  return ids
}

async function throughput (c: ClusterContext, cl: Cluster, rpid: number | null): Promise<void> {
  const n = c.sizes.sessions
  const nodes = cl.nodes
  const a = nodes[0] as Gateway
  const spec = { lines: c.sizes.linesPerSession, rate: 0, bytes: c.sizes.bytes }
  const warm = { lines: Math.max(1, Math.round(c.sizes.linesPerSession / 4)), rate: 0, bytes: c.sizes.bytes }
  const turns = [{ spec: warm, measure: false }, ...Array.from({ length: c.sizes.reps }, () => ({ spec, measure: true }))]
  const layouts: Layout[] = ['one', 'three']
  const ids: Record<Layout, string[]> = {
    one: await createOn(n, () => a),
    three: await createOn(n, (k) => nodes[k % NODES] as Gateway)
  }
  // Three clients processes per layout; process p holds sessions k ≡ p (mod 3), on node A or on node p.
  const procs: Record<Layout, ClientsProc[]> = { one: [], three: [] }
  for (const layout of layouts) {
    for (let p = 0; p < NODES; p++) {
      const mine = ids[layout].filter((_id, k) => k % NODES === p)
      const url = (layout === 'one' ? a : nodes[p] as Gateway).ws
      procs[layout].push(runClients({ mode: 'multi', url, token: TOKEN, sessions: mine, per_session: 1, turns, wait_go: true, timeout_ms: 300_000 }))
    }
  }
  const nextAll = async (layout: Layout): Promise<void> => { await Promise.all(procs[layout].map(step)) }
  const total = n * c.sizes.linesPerSession
  const cpu: Record<Layout, Array<{ cpu: number, rcpu: number | null, load1: number }>> = { one: [], three: [] }
  for (const layout of layouts) await nextAll(layout)
  for (let turn = 0; turn < turns.length; turn++) {
    if (turn > 0) c.log(`cluster: throughput, ${n} sessions × ${c.sizes.linesPerSession} lines as fast as possible, one node and three in turn (run ${turn} of ${c.sizes.reps})`)
    // Alternate which layout goes first, so a drift in the machine's load does not favour one.
    for (const layout of turn % 2 === 0 ? layouts : [...layouts].reverse()) {
      const load1 = loadavg()[0] as number
      const cpu0 = nodes.reduce((s, g) => s + procCpuMs(g.pid), 0)
      const r0 = rpid === null ? 0 : procCpuMs(rpid)
      for (const p of procs[layout]) p.command('go')
      // The next turn's `ready` ends this one; after the last turn the result does.
      if (turn < turns.length - 1) await nextAll(layout)
      else await Promise.all(procs[layout].map(async (p) => await p.result))
      if (turn > 0) cpu[layout].push({ cpu: nodes.reduce((s, g) => s + procCpuMs(g.pid), 0) - cpu0, rcpu: rpid === null ? null : procCpuMs(rpid) - r0, load1 })
    }
  }
  const runs = {} as Record<Layout, TputRun[]>
  for (const layout of layouts) {
    const results = await Promise.all(procs[layout].map(async (p) => await p.result))
    runs[layout] = Array.from({ length: c.sizes.reps }, (_v, k) => {
      const ts = results.map((r) => r.turns[k] as MultiTurn)
      const frames = ts.reduce((s, t) => s + t.frames, 0)
      // The processes get `go` within a millisecond of each other; the turn lasts until the slowest is done.
      const span = Math.max(...ts.map((t) => t.span_s))
      const cc = cpu[layout][k] as { cpu: number, rcpu: number | null, load1: number }
      return {
        lines_per_s: frames / span, frames, span_s: span,
        missing: ts.reduce((s, t) => s + t.missing, 0), disorder: ts.reduce((s, t) => s + t.disorder, 0), closed: ts.reduce((s, t) => s + t.closed.length, 0),
        cpu_us_per_line: (cc.cpu * 1000) / total, redis_cpu_us_per_line: cc.rcpu === null ? null : (cc.rcpu * 1000) / total, load1: cc.load1
      }
    })
  }
  c.raw.cluster_throughput = { sessions: n, lines_per_session: c.sizes.linesPerSession, runs }
  const problems = layouts.flatMap((l) => runs[l].flatMap((r) => {
    const bad: string[] = []
    if (r.missing !== 0) bad.push(`${l} node(s): ${r.missing} missing`)
    if (r.disorder !== 0) bad.push(`${l} node(s): ${r.disorder} out of order`)
    if (r.closed !== 0) bad.push(`${l} node(s): ${r.closed} closed`)
    return bad
  }))
  const t = (l: Layout): Spread => spread(runs[l].map((r) => r.lines_per_s))
  const cp = (l: Layout): Spread => spread(runs[l].map((r) => r.cpu_us_per_line))
  const rc = (l: Layout): Spread => spread(runs[l].map((r) => r.redis_cpu_us_per_line ?? NaN))
  const scenario = `Cluster: throughput, ${n} sessions × 1 client, ${c.sizes.bytes} B lines as fast as possible`
  const vs = 'one node'
  const loads = `load ${runs.three.map((r) => fmt(r.load1, 2)).join(', ')}`
  c.row({
    scenario, metric: 'lines/s delivered, all clients (three nodes: session k on node k mod 3)', unit: 'lines/s', gateway: t('three').med, baseline: t('one').med, vs, target: '≥ 1 × one node',
    pass: t('three').med >= t('one').med && problems.length === 0,
    note: [...problems, `three nodes ${sp(t('three'), 0)}; one node ${sp(t('one'), 0)}; ${c.sizes.linesPerSession} lines per session a turn, layouts interleaved (alternating which goes first) on the same three processes; ${loads}`].join('; ')
  })
  c.row({
    scenario, metric: 'gateway CPU per line (all three processes)', unit: 'µs', gateway: cp('three').med, baseline: cp('one').med, vs, target: 'reference', pass: null,
    note: `three nodes ${sp(cp('three'), 1)}, one node ${sp(cp('one'), 1)}; redis-server per line: three ${sp(rc('three'), 1, ' µs')}, one ${sp(rc('one'), 1, ' µs')}`
  })
}

/**
 * Runs both parts on one three-node cluster (started here, closed before
 * returning) and adds their rows: cross-node p50/p99/p99.9 against the
 * same-node client, and three nodes' lines/s and CPU against one node's.
 */
export async function scenarioCluster (c: ClusterContext): Promise<void> {
  if (c.sizes.sessions % NODES !== 0) throw new Error(`cluster: sessions (${c.sizes.sessions}) must be a multiple of ${NODES}`)
  c.log(`cluster: starting ${NODES} gateway nodes on one Redis (shared prefix, DATA_DIR and STORE_SECRET)`)
  const cl = await startCluster()
  try {
    const rpid = await redisPid()
    await latency(c, cl, rpid)
    await throughput(c, cl, rpid)
  } finally {
    await cl.close()
  }
}
