/**
 * The fault suite's plumbing (bench/faults.ts holds the scenarios): a result
 * row that collects failed expectations instead of throwing, the gateway's
 * peak RSS, a gateway per scenario with the fault CLI, the tally of lost /
 * duplicated / out-of-order seqs over clients and history, the orphan count,
 * and the markdown table.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type Gateway, BENCH_DIR, TOKEN, procRss, sleep, startGateway } from './lib.js'
import { type HistoryCheck, LogicalStream, type Range, killSurvivors, orphansAfter, recordedPids } from './faults-stream.js'

export const FAULTS_CLI = join(BENCH_DIR, 'faults-cli.mjs')

export interface FaultRow {
  scenario: string
  size: string
  lost: number
  duplicated: number
  out_of_order: number
  orphans: number
  /** ms from the fault's end until every reader had everything up to the producer's last line; null when not applicable or never. */
  recover_ms: number | null
  pass: boolean
  notes: string[]
  peak_rss_mib: number | null
  details: Record<string, unknown>
}

export const log = (text: string): void => { process.stderr.write(`[faults ${new Date().toISOString().slice(11, 19)}] ${text}\n`) }
export const now = (): number => performance.now()
export const MiB = 2 ** 20

/** A row being filled in; `fail` marks a broken expectation without stopping the scenario. */
export class Row {
  readonly r: FaultRow
  constructor (scenario: string, size: string) {
    this.r = { scenario, size, lost: 0, duplicated: 0, out_of_order: 0, orphans: 0, recover_ms: null, pass: true, notes: [], peak_rss_mib: null, details: {} }
  }

  note (text: string): void { this.r.notes.push(text) }
  fail (text: string): void { this.r.pass = false; this.r.notes.push(`FAIL: ${text}`) }
  expect (ok: boolean, text: string): void { if (!ok) this.fail(text) }
}

/** Peak RSS of gateway processes, sampled from /proc every 100 ms. */
export class RssPeak {
  peak = 0
  base = 0
  #timer: NodeJS.Timeout | null = null
  watch (pid: number): void {
    this.stop()
    try { this.base = this.base === 0 ? procRss(pid) : this.base } catch { /* gone */ }
    const tick = (): void => { try { this.peak = Math.max(this.peak, procRss(pid)) } catch { /* gone */ } }
    tick()
    this.#timer = setInterval(tick, 100)
  }

  stop (): void { if (this.#timer !== null) clearInterval(this.#timer); this.#timer = null }
}

/** bench/lib.ts's settings, plus connection limits a storm of 1,000 reconnects from one address stays under. */
export function gatewayEnv (pidDir: string, extra: Record<string, string> = {}): Record<string, string> {
  const many = '1000000'
  return {
    CLAUDE_ARGS_EXTRA: `--pid-dir ${pidDir}`,
    MAX_CONNECTIONS: many,
    MAX_CONNECTIONS_PER_TENANT: many,
    WS_UPGRADES_PER_MINUTE: many,
    WS_UPGRADES_PER_MINUTE_PER_ADDRESS: many,
    ...extra
  }
}

export function sendTurn (s: LogicalStream, spec: Record<string, unknown>): void {
  s.ws?.send(JSON.stringify({ type: 'user', message: { role: 'user', content: JSON.stringify(spec) } }))
}

export async function lastSeq (http: string, id: string): Promise<{ last: number, body: any }> {
  const res = await fetch(`${http}/v1/sessions/${id}`, { headers: { authorization: `Bearer ${TOKEN}` } })
  const body = await res.json() as any
  return { last: Number(body.last_seq ?? 0), body }
}

/** Polls until `check` holds; false after `ms`. */
export async function eventually (check: () => boolean | Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = now() + ms
  while (!(await check())) {
    if (now() > deadline) return false
    await sleep(50)
  }
  return true
}

function verdicts (s: LogicalStream): string {
  const counts = new Map<string, number>()
  for (const v of s.verdicts) counts.set(v, (counts.get(v) ?? 0) + 1)
  const closes = new Map<number, number>()
  for (const c of s.closeCodes) closes.set(c, (closes.get(c) ?? 0) + 1)
  const part = (m: Map<string | number, number>): string => [...m].map(([k, n]) => `${k}×${n}`).join(' ')
  return `${s.name}: hello ${part(counts)}${closes.size > 0 ? `; closed ${part(closes)}` : ''}${s.declared.length > 0 ? `; gap declared ${fmtRanges(s.declared)}` : ''}`
}

function fmtRanges (ranges: Range[]): string {
  return ranges.map(([a, b]) => a === b ? `${a}` : `${a}–${b}`).join(', ')
}

/** Adds the readers' and the history's counts to the row, with one note per reader. */
export function tally (row: Row, streams: LogicalStream[], upTo: number, history: HistoryCheck | null): void {
  for (const s of streams) {
    const lost = s.lostUpTo(upTo)
    row.r.lost += lost
    row.r.duplicated += s.duplicated
    row.r.out_of_order += s.outOfOrder
    row.note(verdicts(s) + (lost + s.duplicated + s.outOfOrder > 0 ? ` — lost ${lost}, duplicated ${s.duplicated}, out of order ${s.outOfOrder}` : ''))
  }
  if (history !== null) {
    row.r.lost += history.lost
    row.r.duplicated += history.duplicated
    row.r.out_of_order += history.outOfOrder
    if (history.error !== undefined) row.fail(`history: ${history.error}`)
    if (history.lost + history.duplicated + history.outOfOrder > 0) row.note(`history: ${history.events} events up to ${history.last}, lost ${history.lost}, duplicated ${history.duplicated}, out of order ${history.outOfOrder}`)
  }
  row.expect(row.r.lost === 0, `${row.r.lost} seqs lost`)
  row.expect(row.r.duplicated === 0, `${row.r.duplicated} seqs duplicated`)
  row.expect(row.r.out_of_order === 0, `${row.r.out_of_order} seqs out of order`)
}

/** When every reader had everything up to `upTo`, relative to `from` (ms); null when one never did. */
export function recovery (streams: LogicalStream[], upTo: number, from: number): number | null {
  let worst = 0
  for (const s of streams) {
    const at = s.completeAt(upTo)
    if (at === null) return null
    worst = Math.max(worst, at - from)
  }
  return Math.max(0, worst)
}

export async function orphans (row: Row, pidDir: string, ms = 5000): Promise<void> {
  const left = await orphansAfter(pidDir, ms)
  row.r.orphans += left.length
  const watched = recordedPids(pidDir)
  const tools = watched.filter((p) => p.kind === 'tool').length
  row.note(`watched ${watched.length - tools} CLI${tools > 0 ? ` + ${tools} tool` : ''} process(es)`)
  if (left.length > 0) {
    row.fail(`${left.length} process(es) still alive ${ms / 1000} s later: ${left.map((p) => `${p.kind} ${p.pid}`).join(', ')} (killed by the harness)`)
    killSurvivors(left)
  }
}

/** Runs one scenario; an exception becomes a failed row with what was measured so far. */
export async function guarded (name: string, size: string, fn: (row: Row, cleanup: Array<() => Promise<void>>) => Promise<void>): Promise<FaultRow> {
  const row = new Row(name, size)
  const cleanup: Array<() => Promise<void>> = []
  const t0 = now()
  log(`${name} (${size})`)
  try {
    await fn(row, cleanup)
  } catch (err) {
    row.fail(`harness: ${err instanceof Error ? err.message : String(err)}`)
  } finally {
    for (const c of cleanup.reverse()) await c().catch((err: unknown) => row.note(`cleanup: ${String(err)}`))
  }
  row.r.details.duration_s = (now() - t0) / 1000
  log(`${name}: ${row.r.pass ? 'pass' : 'FAIL'} (${((now() - t0) / 1000).toFixed(1)} s)`)
  return row.r
}

/** A gateway with the fault CLI, its RSS watched; closed (and its CLIs checked) by the cleanup list. */
export async function gatewayFor (row: Row, cleanup: Array<() => Promise<void>>, extraEnv: Record<string, string> = {}): Promise<{ gw: Gateway, pidDir: string, rss: RssPeak }> {
  const pidDir = mkdtempSync(join(tmpdir(), 'cgw-faults-pids-'))
  const gw = await startGateway({ claudeBin: FAULTS_CLI, env: gatewayEnv(pidDir, extraEnv) })
  const rss = new RssPeak()
  rss.watch(gw.pid)
  cleanup.push(async () => {
    rss.stop()
    row.r.peak_rss_mib = rss.peak / MiB
    await gw.close()
    rmSync(pidDir, { recursive: true, force: true })
  })
  return { gw, pidDir, rss }
}

export function streamOf (name: string, gw: { ws: string }, session: string, role: 'controller' | 'observer', autoReconnect = true): LogicalStream {
  return new LogicalStream(name, { base: () => gw.ws, session, token: TOKEN, role, autoReconnect })
}


export function renderFaults (rows: FaultRow[], header: string[]): string {
  const lines = ['# claude-gateway fault runs', '', ...header.map((h) => `- ${h}`), '']
  lines.push('| scenario | size | lost | duplicated | out-of-order | orphans | time to recover | result | notes |')
  lines.push('|---|---|---:|---:|---:|---:|---:|---|---|')
  for (const r of rows) {
    const recover = r.recover_ms === null ? '—' : `${(r.recover_ms / 1000).toFixed(2)} s`
    const notes = [...r.notes, ...(r.peak_rss_mib === null ? [] : [`gateway peak RSS ${r.peak_rss_mib.toFixed(0)} MiB`])].join('; ').replace(/\|/g, '\\|')
    lines.push(`| ${r.scenario} | ${r.size} | ${r.lost} | ${r.duplicated} | ${r.out_of_order} | ${r.orphans} | ${recover} | ${r.pass ? 'pass' : '**FAIL**'} | ${notes} |`)
  }
  lines.push('', `Passed: ${rows.filter((r) => r.pass).length} of ${rows.length}.`, '')
  lines.push('Generated by `npm run bench -- --faults`; raw figures in faults.json. How to read it: docs/PERFORMANCE.md, "Fault runs".', '')
  return lines.join('\n')
}
