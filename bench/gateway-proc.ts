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
 * Started by bench/run.ts as `node --import tsx --expose-gc bench/gateway-proc.ts`
 * (see `npm run bench -- --profile`).
 */
import { writeFileSync } from 'node:fs'
import { Session } from 'node:inspector/promises'
import { join } from 'node:path'
import { writeHeapSnapshot } from 'node:v8'
import { buildApp } from '../src/app.js'
import { loadConfig } from '../src/config.js'

interface Command { cmd: 'stats' | 'profile' | 'unprofile' | 'snapshot' | 'close', id?: number, label?: string }

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
let inspector: Session | null = null
let window: string | null = null

async function startProfile (label: string): Promise<void> {
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

async function stopProfile (): Promise<void> {
  if (inspector === null || profileDir === undefined || window === null) return
  const file = join(profileDir, `gateway-${window}-${process.pid}.${heap ? 'heapprofile' : 'cpuprofile'}`)
  window = null
  const { profile } = heap ? await inspector.post('HeapProfiler.stopSampling') : await inspector.post('Profiler.stop')
  writeFileSync(file, JSON.stringify(profile))
}

let closing = false
async function close (): Promise<void> {
  if (closing) return
  closing = true
  const force = setTimeout(() => process.exit(1), config.shutdownGraceMs + 3 * config.cliStopTimeoutMs + 5000)
  force.unref()
  try {
    await stopProfile()
    await app.close()
  } finally {
    process.exit(0)
  }
}

function stats (): Record<string, unknown> {
  const gc = (globalThis as { gc?: () => void }).gc
  if (gc !== undefined) { gc(); gc() }
  const mem = process.memoryUsage()
  const resources = process.getActiveResourcesInfo()
  const byType: Record<string, number> = {}
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

process.on('message', (message: Command) => {
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
