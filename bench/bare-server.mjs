#!/usr/bin/env node
// Bare baselines for the scenarios where the relay does not apply (resume,
// history, idle clients, sessions). The same job as the gateway, done the most
// direct way known with node:http, ws and ioredis: no auth, no routing, no zod,
// no session state; pages read as Buffers (no UTF-8 decoding) and written in
// one batch. The gateway's figure divided by this one is what the gateway's
// own code costs on top of the work itself.
//
//   node --expose-gc bench/bare-server.mjs [--redis <url>]
//
// Prints {"port":n,"pid":n} on stdout once listening. Serves:
//   GET /events?key=&after=&limit=  XRANGE key (after+1)-0 + COUNT limit, answered
//                                   as {"events":[<stored frames>],"has_more":..,"next_after":..}
//                                   in one write
//   WebSocket /replay?key=&after=   a hello frame, then the stream after `after`
//                                   in pages of 1000 (XRANGE), each page's frames
//                                   built once and written to the socket at once
//   WebSocket /idle                 a hello frame, then nothing: held open
// Commands on stdin, one per line, each answered with one JSON line:
//   stats                 {"rss":..,"heap_used":..} after a full GC
//   spawn <n> <cli path>  starts n copies of the CLI with piped stdio (one
//                         process group each), gives each one user turn, reads
//                         until its result line, and keeps them running:
//                         {"spawned":n,"ms":..,"spawn_ms":..} (spawn_ms: the
//                         time spent inside spawn() calls, summed)
// SIGTERM (or stdin closing) ends the CLIs and the server.
import { spawn } from 'node:child_process'
import { createServer } from 'node:http'
import { createInterface } from 'node:readline'
import { Redis } from 'ioredis'
import { Sender, WebSocketServer } from 'ws'

const PAGE = 1000
const FRAME = { fin: true, opcode: 1, mask: false, readOnly: true, rsv1: false }
const COMMA = Buffer.from(',')
const redisAt = process.argv.indexOf('--redis')
const redis = new Redis(redisAt === -1 ? 'redis://127.0.0.1:6379' : process.argv[redisAt + 1])
const children = []

/** Up to `limit` stored frames after `after`, as Buffers. */
async function page (key, after, limit) {
  const entries = await redis.xrangeBuffer(key, `${after + 1}-0`, '+', 'COUNT', limit)
  return entries.map((e) => ({ seq: Number(e[0].toString('latin1', 0, e[0].indexOf(45))), frame: e[1][1] }))
}

const server = createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://x')
  if (url.pathname !== '/events') { res.writeHead(404); res.end(); return }
  const limit = Number(url.searchParams.get('limit') ?? PAGE)
  page(url.searchParams.get('key') ?? '', Number(url.searchParams.get('after') ?? 0), limit + 1).then((events) => {
    const hasMore = events.length > limit
    const kept = hasMore ? events.slice(0, limit) : events
    const last = kept.length > 0 ? kept[kept.length - 1].seq : null
    const parts = [Buffer.from('{"events":[')]
    for (let i = 0; i < kept.length; i++) { if (i > 0) parts.push(COMMA); parts.push(kept[i].frame) }
    parts.push(Buffer.from(`],"has_more":${hasMore},"next_after":${hasMore ? last : 'null'}}`))
    const body = Buffer.concat(parts)
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length })
    res.end(body)
  }, (err) => { res.writeHead(500); res.end(String(err)) })
})

const wss = new WebSocketServer({ server })
wss.on('connection', (ws, req) => {
  ws.on('error', () => {})
  const url = new URL(req.url ?? '/', 'http://x')
  const path = url.pathname.replace(/\/$/, '')
  ws.send('{"type":"gateway","subtype":"hello","bare":true}')
  if (path === '/idle') return
  if (path !== '/replay') { ws.close(1008); return }
  const key = url.searchParams.get('key') ?? ''
  void (async () => {
    let after = Number(url.searchParams.get('after') ?? 0)
    for (;;) {
      const events = await page(key, after, PAGE)
      if (events.length > 0) {
        const parts = []
        for (const e of events) for (const b of Sender.frame(e.frame, FRAME)) parts.push(b)
        ws._socket.write(Buffer.concat(parts))
      }
      if (events.length < PAGE) break
      after = events[events.length - 1].seq
      // Like the gateway's replay: let the socket drain before the next page.
      if (ws.bufferedAmount > 0) await new Promise((resolve) => ws._socket.once('drain', resolve))
    }
  })().catch((err) => { process.stderr.write(`bare-server replay: ${err.message}\n`); ws.close(1011) })
})

/** Time spent inside spawn() by the current `spawn` command (the fork holds the event loop). */
let spawnNs = 0n

/** Starts one CLI, gives it a user turn, resolves once its result line is out. */
function spawnOne (cli, k) {
  const t0 = process.hrtime.bigint()
  const child = spawn(cli, ['--session-id', `00000000-0000-4000-8000-${String(k).padStart(12, '0')}`], { stdio: ['pipe', 'pipe', 'ignore'], detached: true })
  spawnNs += process.hrtime.bigint() - t0
  children.push(child)
  child.stdin.on('error', () => {})
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout })
    lines.on('line', (line) => { if (line.includes('"type":"result"')) resolve() })
    child.once('error', reject)
    child.stdin.write('{"type":"user","message":{"role":"user","content":"{}"}}\n')
  })
}

async function command (line) {
  const [cmd, ...args] = line.trim().split(/\s+/)
  if (cmd === 'stats') {
    globalThis.gc?.()
    const m = process.memoryUsage()
    return { rss: m.rss, heap_used: m.heapUsed }
  }
  if (cmd === 'spawn') {
    const n = Number(args[0])
    const t0 = Date.now()
    spawnNs = 0n
    for (let k = 0; k < n; k += 8) {
      const batch = []
      for (let j = k; j < Math.min(n, k + 8); j++) batch.push(spawnOne(args[1], children.length + 1))
      await Promise.all(batch)
    }
    return { spawned: n, ms: Date.now() - t0, spawn_ms: Number(spawnNs) / 1e6 }
  }
  return { error: `unknown command ${cmd}` }
}

let stopping = false
function stop () {
  if (stopping) return
  stopping = true
  // The command pipe would keep the process up until the timer: it exits once its CLIs and sockets are gone.
  process.stdin.destroy()
  // Closing stdin ends a light CLI; a group still there a moment later is killed.
  for (const child of children) child.stdin.end()
  setTimeout(() => {
    for (const child of children) {
      if (child.exitCode !== null || child.signalCode !== null) continue
      try { process.kill(-child.pid, 'SIGKILL') } catch { /* already gone */ }
    }
  }, 500).unref()
  for (const ws of wss.clients) ws.terminate()
  server.close()
  redis.disconnect()
  setTimeout(() => process.exit(0), 1000).unref()
}

createInterface({ input: process.stdin }).on('line', (line) => {
  command(line).then((out) => process.stdout.write(JSON.stringify(out) + '\n'), (err) => process.stdout.write(JSON.stringify({ error: err.message }) + '\n'))
}).on('close', stop)
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ port: server.address().port, pid: process.pid }) + '\n')
})
