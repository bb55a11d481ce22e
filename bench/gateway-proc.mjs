/**
 * The gateway under test, in its own process so its RSS can be read from
 * /proc/<pid>/status. Configured from the environment exactly like
 * src/server.ts (loadConfig + buildApp); listens on PORT (0 = any free port)
 * and reports the port over IPC. IPC commands:
 *   {cmd: 'stats', id}          memory and open-handle counts (after a GC when
 *                               started with --expose-gc), answered {id, stats}
 *   {cmd: 'profile', id, label} start a profiling window (BENCH_PROFILE_DIR set)
 *   {cmd: 'unprofile', id}      end it: <dir>/gateway-<label>-<pid>.cpuprofile
 *                               (.heapprofile with BENCH_PROFILE_KIND=heap)
 *   {cmd: 'snapshot', id, label} write a heap snapshot to BENCH_PROFILE_DIR
 *   {cmd: 'close'}              close cleanly (as on SIGTERM) and exit
 *
 * Started by bench/lib.ts as `node --expose-gc bench/gateway-proc.mjs`. It runs
 * the production build (dist/, what `npm start` runs; bench/run.ts builds it
 * first), not the sources through tsx: tsx keeps function names by wrapping
 * every named closure in a defineProperty call, which costs CPU on hot paths
 * and about 250 bytes per closure held, so it measured a gateway nobody runs.
 */
import { writeFileSync } from 'node:fs'
import { Session } from 'node:inspector/promises'
import { join } from 'node:path'
import { writeHeapSnapshot } from 'node:v8'
import { buildApp } from '../dist/src/app.js'
import { loadConfig } from '../dist/src/config.js'

const config = loadConfig(process.env)
const app = await buildApp(config)
await app.listen({ port: config.port, host: config.host })
const address = app.server.address()
const port = address !== null && typeof address === 'object' ? address.port : config.port

// Profiling windows cover only what the bench measures: no start-up, no
// module loading. CPU: sampled every 200 µs; heap: allocations sampled
// every 4 KiB, including objects the GC has already collected.
const profileDir = process.env.BENCH_PROFILE_DIR
const kind = process.env.BENCH_PROFILE_KIND ?? 'cpu'
const heap = kind === 'heap' || kind === 'heap-survivors'
/** @type {Session | null} */
let inspector = null
/** @type {string | null} */
let window = null

async function startProfile (label) {
  if (profileDir === undefined || profileDir === '' || window !== null) return
  if (inspector === null) {
    inspector = new Session()
    inspector.connect()
    await inspector.post(heap ? 'HeapProfiler.enable' : 'Profiler.enable')
    if (!heap) await inspector.post('Profiler.setSamplingInterval', { interval: 200 })
  }
  window = label.replace(/[^A-Za-z0-9_.-]/g, '_')
  // heap-survivors: only objects that outlived a scavenge (what makes scavenges slow and old space grow).
  if (heap) await inspector.post('HeapProfiler.startSampling', { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: kind === 'heap' })
  else await inspector.post('Profiler.start')
}

async function stopProfile () {
  if (inspector === null || profileDir === undefined || window === null) return
  const file = join(profileDir, `gateway-${window}-${process.pid}.${heap ? 'heapprofile' : 'cpuprofile'}`)
  window = null
  const { profile } = heap ? await inspector.post('HeapProfiler.stopSampling') : await inspector.post('Profiler.stop')
  writeFileSync(file, JSON.stringify(profile))
}

// Diagnostics (BENCH_STALL_DUMP=<file prefix>): GC pauses and event-loop stalls
// over 6 ms, each with its CLOCK_MONOTONIC start (ns), written at close, to
// set beside the clients' per-line latencies (BENCH_LATENCY_DUMP).
const stallDump = process.env.BENCH_STALL_DUMP
const stalls = []
if (stallDump !== undefined) {
  const { PerformanceObserver, performance } = await import('node:perf_hooks')
  const origin = process.hrtime.bigint() - BigInt(Math.round(performance.now() * 1e6))
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) stalls.push(`gc ${origin + BigInt(Math.round(e.startTime * 1e6))} ${e.duration.toFixed(2)} ${e.detail?.kind ?? e.kind}`)
  }).observe({ entryTypes: ['gc'] })
  let last = process.hrtime.bigint()
  setInterval(() => {
    const now = process.hrtime.bigint()
    if (now - last > 6_000_000n) stalls.push(`loop ${last} ${(Number(now - last) / 1e6).toFixed(2)}`)
    last = now
  }, 1).unref()
}

let closing = false
async function close () {
  if (closing) return
  closing = true
  const force = setTimeout(() => process.exit(1), config.shutdownGraceMs + 3 * config.cliStopTimeoutMs + 5000)
  force.unref()
  try {
    if (stallDump !== undefined) writeFileSync(`${stallDump}-${process.pid}.txt`, stalls.join('\n') + '\n')
    await stopProfile()
    await app.close()
  } finally {
    process.exit(0)
  }
}

function stats () {
  const gc = globalThis.gc
  if (gc !== undefined) { gc(); gc() }
  const mem = process.memoryUsage()
  const resources = process.getActiveResourcesInfo()
  const byType = {}
  for (const r of resources) byType[r] = (byType[r] ?? 0) + 1
  return {
    rss: mem.rss,
    heap_used: mem.heapUsed,
    heap_total: mem.heapTotal,
    external: mem.external,
    array_buffers: mem.arrayBuffers,
    handles: resources.length,
    handle_types: byType,
    ws_clients: app.gateway.heartbeat.size,
    running_sessions: app.gateway.manager.runningCount
  }
}

process.on('message', (message) => {
  if (message.cmd === 'stats') process.send?.({ id: message.id, stats: stats() })
  else if (message.cmd === 'profile') void startProfile(message.label ?? 'window').then(() => process.send?.({ id: message.id, stats: null }))
  else if (message.cmd === 'unprofile') void stopProfile().then(() => process.send?.({ id: message.id, stats: null }))
  else if (message.cmd === 'snapshot' && profileDir !== undefined) process.send?.({ id: message.id, stats: { file: writeHeapSnapshot(join(profileDir, `gateway-${message.label ?? 'snapshot'}-${process.pid}.heapsnapshot`)) } })
  else if (message.cmd === 'close') void close()
})
process.on('SIGTERM', () => { void close() })
process.on('SIGINT', () => { void close() })
process.on('disconnect', () => { void close() })

process.send?.({ ready: true, port, pid: process.pid })
