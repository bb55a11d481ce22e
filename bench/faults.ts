/**
 * The fault suite (`npm run bench -- --faults`): what the gateway does to
 * clients' streams, its history and its child processes when things go
 * wrong — a reconnect storm, Redis stopping, a CLI or the gateway SIGKILLed,
 * a client that stops reading, many sessions at once. Each scenario is a
 * function of a size, run against a gateway in its own process
 * (bench/lib.ts) with bench/faults-cli.mjs as the CLI, and reports lost,
 * duplicated and out-of-order seqs (bench/faults-stream.ts), orphan
 * processes and the time to recover. A scenario that throws or times out is
 * reported as a failure with what was measured so far, never dropped.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { type Gateway, TOKEN, procRss, sleep, startGateway } from './lib.js'
import { LogicalStream, checkHistory, recordedPids } from './faults-stream.js'
import { FAULTS_CLI, type FaultRow, MiB, RssPeak, eventually, gatewayEnv, gatewayFor, guarded, lastSeq, now, orphans, recovery, sendTurn, streamOf, tally, Row } from './faults-kit.js'
import { startRedisServer } from '../test/support/redis-server.js'

export type { FaultRow } from './faults-kit.js'
export { renderFaults } from './faults-kit.js'

// ---------------------------------------------------------------- 1. reconnect storm

export function reconnectStorm (reconnects: number): Promise<FaultRow> {
  const lines = reconnects * 20
  return guarded('Reconnect storm', `${reconnects.toLocaleString('en-US')} reconnects, ${lines.toLocaleString('en-US')} events`, async (row, cleanup) => {
    const { gw, pidDir } = await gatewayFor(row, cleanup)
    const id = await gw.createSession()
    const holder = streamOf('holder', gw, id, 'controller')
    const storm = streamOf('storm client', gw, id, 'observer', false)
    cleanup.push(async () => { holder.stop(); storm.stop() })
    await holder.open(0)
    await storm.open(0)
    sendTurn(holder, { lines, rate: 1000, bytes: 512 })
    if (!await storm.until(() => storm.last > 0, 15_000)) throw new Error('the stream did not start within 15 s')
    let midStream = 0
    // Per reconnect: from dropping the connection until the client again has what the holder had then.
    const catchUp: number[] = []
    for (let k = 0; k < reconnects; k++) {
      // A few frames (0-10) between drops, half of them without a close handshake.
      const want = storm.last + Math.floor(Math.random() * 11)
      if (holder.resultSeq === null) await storm.until(() => storm.last >= want || holder.resultSeq !== null, 2000)
      if (holder.resultSeq === null) midStream++
      const target = holder.last
      const t = now()
      await storm.reconnect(k % 2 === 0 ? 'close' : 'terminate')
      if (await storm.until(() => storm.contiguous >= target, 10_000)) catchUp.push(now() - t)
      else row.fail(`reconnect ${k + 1} did not catch up to seq ${target} within 10 s`)
    }
    row.expect(await holder.until(() => holder.resultSeq !== null, 60_000), 'no result line within 60 s')
    const { last } = await lastSeq(gw.http, id)
    await storm.until(() => storm.contiguous >= last, 30_000)
    await holder.until(() => holder.contiguous >= last, 30_000)
    const history = await checkHistory(gw.http, id, TOKEN, last, [...holder.declared, ...storm.declared])
    tally(row, [holder, storm], last, history)
    row.expect(history.producerLines === lines, `history holds ${history.producerLines} of ${lines} producer lines`)
    catchUp.sort((a, b) => a - b)
    row.r.recover_ms = catchUp.at(-1) ?? null
    const p50 = catchUp[Math.floor((catchUp.length - 1) / 2)] ?? NaN
    row.note(`${midStream} of ${reconnects} reconnects while the CLI was producing; time to recover = worst drop-to-caught-up of a reconnect (median ${p50.toFixed(1)} ms)`)
    row.r.details = { reconnects, mid_stream: midStream, last_seq: last, history_events: history.events }
    holder.stop(); storm.stop()
    await gw.close()
    await orphans(row, pidDir)
  })
}

// ---------------------------------------------------------------- 2. Redis outage

export function redisOutage (outageMs: number): Promise<FaultRow> {
  const rate = 1000
  const lines = Math.round(((2000 + outageMs + 3000) * rate) / 1000)
  return guarded(`Redis stopped ${outageMs / 1000} s mid-burst`, `${lines.toLocaleString('en-US')} events at ${rate}/s`, async (row, cleanup) => {
    // Persistent (AOF), so that a stopped Redis comes back with what it had: a stop, not a wipe.
    const dir = mkdtempSync(join(tmpdir(), 'cgw-faults-redis-'))
    const redis = await startRedisServer({ args: ['--appendonly', 'yes', '--dir', dir] })
    cleanup.push(async () => { await redis.kill(); rmSync(dir, { recursive: true, force: true }) })
    const { gw, pidDir } = await gatewayFor(row, cleanup, { REDIS_URL: redis.url, REDIS_PREFIX: `cgwfault:${randomBytes(4).toString('hex')}:` })
    const id = await gw.createSession()
    const live = streamOf('live client', gw, id, 'controller')
    // Leaves before the outage and comes back during it: its replay needs the store.
    const early = streamOf('client away since before the outage', gw, id, 'observer')
    // Leaves and comes back during the outage: what it misses is held in the gateway.
    const late = streamOf('client resuming during the outage', gw, id, 'observer')
    const streams = [live, early, late]
    cleanup.push(async () => { for (const s of streams) s.stop() })
    for (const s of streams) await s.open(0)
    sendTurn(live, { lines, rate, bytes: 512 })
    row.expect(await live.until(() => live.last >= rate, 20_000), 'the burst did not start')
    await early.disconnect()
    row.expect(await live.until(() => live.last >= 2 * rate, 20_000), 'the burst stopped')
    const stopAt = now()
    await redis.stop()
    await sleep(Math.min(1000, outageMs / 2))
    const at = (now() - stopAt) / 1000
    const afters = `?after=${early.last} (away since before the outage) and ?after=${late.last}`
    await late.reconnect('terminate')
    // Not awaited: its hello waits for the store (up to RESUME_STORE_WAIT_MS), then it is told to come back.
    const earlyBack = early.reconnect()
    await sleep(Math.max(0, outageMs - (now() - stopAt)))
    await redis.start()
    const back = now()
    const caughtUpTo = live.last
    // When the gateway says its store is fine again (it has written what it held).
    const storeOk = eventually(async () => (await fetch(`${gw.http}/readyz`)).status === 200, 30_000).then((ok) => ok ? now() - back : null)
    await earlyBack
    row.note(`Redis down ${((back - stopAt) / 1000).toFixed(1)} s; observers reconnected ${at.toFixed(1)} s into it with ${afters}`)
    row.expect(await live.until(() => live.resultSeq !== null, 60_000), 'no result line within 60 s of Redis coming back')
    const { last } = await lastSeq(gw.http, id)
    for (const s of streams) await s.until(() => s.contiguous >= last, 30_000)
    const okAfter = await storeOk
    row.expect(okAfter !== null, '/readyz not 200 within 30 s of Redis coming back')
    if (okAfter !== null) row.note(`/readyz 200 again ${(okAfter / 1000).toFixed(2)} s after Redis was back`)
    const history = await checkHistory(gw.http, id, TOKEN, last, streams.flatMap((s) => s.declared))
    tally(row, streams, last, history)
    row.expect(history.producerLines === lines, `history holds ${history.producerLines} of ${lines} producer lines`)
    row.r.recover_ms = recovery(streams, caughtUpTo, back)
    row.r.details = { outage_ms: outageMs, last_seq: last, history_events: history.events, store_ok_ms: okAfter, verdicts: Object.fromEntries(streams.map((s) => [s.name, s.verdicts])) }
    for (const s of streams) s.stop()
    await gw.close()
    await orphans(row, pidDir)
  })
}

// ---------------------------------------------------------------- 3. kill -9 of a CLI

export function cliKill (lines: number): Promise<FaultRow> {
  return guarded('kill -9 of the CLI mid-stream', `${lines.toLocaleString('en-US')}-event turn, killed after ~${Math.round(lines * 0.15).toLocaleString('en-US')}`, async (row, cleanup) => {
    const { gw, pidDir } = await gatewayFor(row, cleanup)
    const id = await gw.createSession()
    const holder = streamOf('holder', gw, id, 'controller')
    const observer = streamOf('observer', gw, id, 'observer')
    cleanup.push(async () => { holder.stop(); observer.stop() })
    await holder.open(0)
    await observer.open(0)
    sendTurn(holder, { lines, rate: 2000, bytes: 512, tool: true })
    row.expect(await holder.until(() => holder.last >= lines * 0.15, 30_000), 'the stream did not start')
    const cli = recordedPids(pidDir).find((p) => p.kind === 'cli')
    if (cli === undefined) throw new Error('the CLI did not record its pid')
    const killedAt = now()
    process.kill(cli.pid, 'SIGKILL')
    const isExited = (s: LogicalStream): boolean => s.statuses.some((f) => f.status === 'exited')
    const seen = (await Promise.all([holder, observer].map((s) => s.until(() => isExited(s), 15_000)))).every(Boolean)
    row.expect(seen, 'a client saw no status frame "exited" within 15 s')
    const { last, body } = await lastSeq(gw.http, id)
    row.expect(body.status === 'exited', `the session is ${String(body.status)}, not exited`)
    row.note(`session ${String(body.status)}, exit ${JSON.stringify({ reason: body.exit?.reason, code: body.exit?.code, signal: body.exit?.signal })}`)
    await holder.until(() => holder.contiguous >= last, 10_000)
    await observer.until(() => observer.contiguous >= last, 10_000)
    const history = await checkHistory(gw.http, id, TOKEN, last, [...holder.declared, ...observer.declared])
    tally(row, [holder, observer], last, history)
    row.expect(history.lastFrame?.subtype === 'status', `history ends with ${JSON.stringify(history.lastFrame)?.slice(0, 80)}, not a status frame`)
    row.r.recover_ms = recovery([holder, observer], last, killedAt)
    row.note(`${history.producerLines} producer lines in history before the kill`)
    // The CLI's tool process must not outlive it, without waiting for the gateway's shutdown.
    await orphans(row, pidDir)
    row.r.details = { last_seq: last, status: body.status, exit: body.exit }
  })
}

// ---------------------------------------------------------------- 4. kill -9 of the gateway

export function gatewayKill (lines: number): Promise<FaultRow> {
  return guarded('kill -9 of the gateway, restart on the same DATA_DIR and Redis', `${lines.toLocaleString('en-US')}-event turn, killed after ~${Math.round(lines * 0.15).toLocaleString('en-US')}`, async (row, cleanup) => {
    const pidDir = mkdtempSync(join(tmpdir(), 'cgw-faults-pids-'))
    const dataDir = mkdtempSync(join(tmpdir(), 'cgw-faults-data-'))
    const env = gatewayEnv(pidDir, { DATA_DIR: dataDir, REDIS_PREFIX: `cgwfault:${randomBytes(4).toString('hex')}:` })
    const rss = new RssPeak()
    const first = await startGateway({ claudeBin: FAULTS_CLI, env })
    let current: Gateway = first
    rss.watch(first.pid)
    cleanup.push(async () => {
      rss.stop()
      row.r.peak_rss_mib = rss.peak / MiB
      await current.close()
      rmSync(dataDir, { recursive: true, force: true })
      rmSync(pidDir, { recursive: true, force: true })
    })
    const id = await first.createSession()
    const base = (): string => current.ws
    const holder = new LogicalStream('holder', { base, session: id, token: TOKEN, role: 'controller', autoReconnect: true })
    const observer = new LogicalStream('observer', { base, session: id, token: TOKEN, role: 'observer', autoReconnect: true })
    cleanup.push(async () => { holder.stop(); observer.stop() })
    await holder.open(0)
    await observer.open(0)
    sendTurn(holder, { lines, rate: 2000, bytes: 512, tool: true })
    row.expect(await holder.until(() => holder.last >= lines * 0.15, 30_000), 'the stream did not start')
    const before = new Set([...holder.got.keys(), ...observer.got.keys()])
    const killedAt = now()
    process.kill(first.pid, 'SIGKILL')
    await eventually(() => { try { procRss(first.pid); return false } catch { return true } }, 10_000)
    await sleep(100)
    await first.close().catch(() => {})
    const second = await startGateway({ claudeBin: FAULTS_CLI, env })
    current = second
    const upAt = now()
    rss.watch(second.pid)
    row.note(`restart took ${((upAt - killedAt) / 1000).toFixed(1)} s`)
    const { last, body } = await lastSeq(second.http, id)
    row.expect(body.status === 'stopped', `the session is ${String(body.status)}, not stopped`)
    row.expect(body.exit?.reason === 'lost', `exit.reason is ${String(body.exit?.reason)}, not lost`)
    const lostStatus = (s: LogicalStream): boolean => s.statuses.some((f) => f.exit?.reason === 'lost')
    await Promise.all([holder, observer].map((s) => s.until(() => s.contiguous >= last && lostStatus(s), 10_000)))
    row.expect(lostStatus(holder) && lostStatus(observer), 'a client saw no status frame with reason lost')
    const history = await checkHistory(second.http, id, TOKEN, last, [...holder.declared, ...observer.declared])
    tally(row, [holder, observer], last, history)
    const missingFromHistory = [...before].filter((s) => s > history.last).length
    row.expect(missingFromHistory === 0, `${missingFromHistory} seqs relayed before the crash are not in history`)
    const end = history.lastFrame
    row.expect(end?.subtype === 'status' && end?.exit?.reason === 'lost', `history ends with ${JSON.stringify(end)?.slice(0, 100)}, not a status frame with reason lost`)
    row.r.recover_ms = recovery([holder, observer], last, upAt)
    row.note(`${before.size} seqs relayed before the crash; history ${history.events} events, ${history.producerLines} producer lines`)
    await orphans(row, pidDir)
    row.r.details = { last_seq: last, status: body.status, exit: body.exit, restart_ms: upAt - killedAt }
  })
}

// ---------------------------------------------------------------- 5. a slow client

export function slowClient (megabytes: number): Promise<FaultRow> {
  const bytes = 4096
  const lines = Math.round((megabytes * MiB) / bytes)
  return guarded('Slow client during a large stream', `${megabytes} MB (${lines.toLocaleString('en-US')} × 4 KiB)`, async (row, cleanup) => {
    const { gw, pidDir, rss } = await gatewayFor(row, cleanup)
    const id = await gw.createSession()
    const fast = streamOf('reading client', gw, id, 'controller')
    const slow = streamOf('slow client', gw, id, 'observer')
    cleanup.push(async () => { fast.stop(); slow.stop() })
    await fast.open(0)
    await slow.open(0)
    const rssBefore = procRss(gw.pid)
    sendTurn(fast, { lines, rate: 0, bytes })
    row.expect(await slow.until(() => slow.last >= 500, 30_000), 'the stream did not start')
    slow.pause()
    const pausedAt = now()
    // Stopped for 5 s, or until the producer is done (whichever is later, at most 60 s).
    await fast.until(() => fast.resultSeq !== null && now() - pausedAt >= 5000, 60_000)
    await sleep(Math.max(0, 5000 - (now() - pausedAt)))
    slow.resume()
    const resumedAt = now()
    const caughtUpTo = fast.last
    row.note(`slow client stopped reading for ${((resumedAt - pausedAt) / 1000).toFixed(1)} s at seq ${slow.last}`)
    row.expect(await fast.until(() => fast.resultSeq !== null, 120_000), 'no result line within 120 s')
    const { last } = await lastSeq(gw.http, id)
    await slow.until(() => slow.contiguous >= last, 60_000)
    await fast.until(() => fast.contiguous >= last, 10_000)
    const history = await checkHistory(gw.http, id, TOKEN, last, [...fast.declared, ...slow.declared])
    tally(row, [fast, slow], last, history)
    const closedSlow = slow.closeCodes.filter((c) => c === 4008).length
    const other = slow.closeCodes.filter((c) => c !== 4008)
    row.expect(other.length === 0, `slow client closed with ${other.join(', ')} (not 4008)`)
    row.note(closedSlow > 0 ? `slow client closed with 4008 ×${closedSlow}, resumed with ?after=` : 'slow client kept up (never closed)')
    row.r.recover_ms = recovery([slow], caughtUpTo, resumedAt)
    rss.stop()
    row.note(`gateway RSS ${(rssBefore / MiB).toFixed(0)} → peak ${(rss.peak / MiB).toFixed(0)} MiB (+${((rss.peak - rssBefore) / MiB).toFixed(0)} MiB)`)
    row.r.details = { last_seq: last, closes_4008: closedSlow, rss_before_mib: rssBefore / MiB, rss_peak_mib: rss.peak / MiB }
    fast.stop(); slow.stop()
    await gw.close()
    await orphans(row, pidDir)
  })
}

// ---------------------------------------------------------------- 6. many sessions at once

export function manySessions (count: number): Promise<FaultRow> {
  const lines = 2000
  return guarded('Sessions × 2 clients at once', `${count} sessions × 2 clients, ${lines.toLocaleString('en-US')} events each`, async (row, cleanup) => {
    const { gw, pidDir } = await gatewayFor(row, cleanup)
    const ids: string[] = []
    for (let i = 0; i < count; i++) ids.push(await gw.createSession())
    const pairs = ids.map((id, i) => ({ id, holder: streamOf(`s${i} holder`, gw, id, 'controller'), observer: streamOf(`s${i} observer`, gw, id, 'observer') }))
    cleanup.push(async () => { for (const p of pairs) { p.holder.stop(); p.observer.stop() } })
    await Promise.all(pairs.map(async (p) => { await p.holder.open(0); await p.observer.open(0) }))
    const t0 = now()
    for (const p of pairs) sendTurn(p.holder, { lines, rate: 0, bytes: 512 })
    const done = await Promise.all(pairs.map((p) => p.holder.until(() => p.holder.resultSeq !== null, 180_000)))
    row.expect(done.every(Boolean), `${done.filter((d) => !d).length} sessions gave no result line within 180 s`)
    let incomplete = 0
    let lostTotal = 0
    for (const p of pairs) {
      const { last } = await lastSeq(gw.http, p.id)
      await p.observer.until(() => p.observer.contiguous >= last, 10_000)
      const history = await checkHistory(gw.http, p.id, TOKEN, last, [...p.holder.declared, ...p.observer.declared])
      const before = row.r.lost + row.r.duplicated + row.r.out_of_order
      const sub = new Row('', '')
      tally(sub, [p.holder, p.observer], last, history)
      row.r.lost += sub.r.lost
      row.r.duplicated += sub.r.duplicated
      row.r.out_of_order += sub.r.out_of_order
      if (history.producerLines !== lines) incomplete++
      if (row.r.lost + row.r.duplicated + row.r.out_of_order > before) row.note(`session ${p.id}: ${sub.r.notes.join('; ')}`)
      lostTotal += sub.r.lost
    }
    row.expect(row.r.lost === 0 && row.r.duplicated === 0 && row.r.out_of_order === 0, `lost ${lostTotal}, duplicated ${row.r.duplicated}, out of order ${row.r.out_of_order} across sessions`)
    row.expect(incomplete === 0, `${incomplete} sessions' history lacks producer lines`)
    const verdicts = new Set(pairs.flatMap((p) => [...p.holder.verdicts, ...p.observer.verdicts]))
    const closes = pairs.flatMap((p) => [...p.holder.closeCodes, ...p.observer.closeCodes])
    row.note(`all ${count * 2} streams ${row.r.lost + row.r.duplicated + row.r.out_of_order === 0 ? 'complete and ordered' : 'checked'} in ${((now() - t0) / 1000).toFixed(1)} s; hello verdicts ${[...verdicts].join(', ')}${closes.length > 0 ? `; closes ${closes.join(', ')}` : ''}`)
    row.r.details = { sessions: count, lines_each: lines }
    for (const p of pairs) { p.holder.stop(); p.observer.stop() }
    await gw.close()
    await orphans(row, pidDir)
  })
}

// ---------------------------------------------------------------- suite

export interface FaultSizes { storm: number, outagesMs: number[], cliKillLines: number, gatewayKillLines: number, slowMegabytes: number, sessions: number }

export const FULL_SIZES: FaultSizes = { storm: 1000, outagesMs: [2000, 10_000], cliKillLines: 20_000, gatewayKillLines: 20_000, slowMegabytes: 200, sessions: 50 }
export const QUICK_SIZES: FaultSizes = { storm: 200, outagesMs: [1000, 3000], cliKillLines: 5000, gatewayKillLines: 5000, slowMegabytes: 50, sessions: 10 }

export async function runFaultSuite (sizes: FaultSizes): Promise<FaultRow[]> {
  const rows: FaultRow[] = []
  rows.push(await reconnectStorm(sizes.storm))
  for (const ms of sizes.outagesMs) rows.push(await redisOutage(ms))
  rows.push(await cliKill(sizes.cliKillLines))
  rows.push(await gatewayKill(sizes.gatewayKillLines))
  rows.push(await slowClient(sizes.slowMegabytes))
  rows.push(await manySessions(sizes.sessions))
  return rows
}
