#!/usr/bin/env node
// The strongest live-path baseline of the bench (issue 14): what a good relay
// does with no gateway around it. Each stdout chunk of a CLI is split into
// lines, each line becomes a WebSocket frame once (Sender.frame, no
// copy of the payload), the chunk's frames are joined once, and every client
// gets them in one socket write. No JSON parsing, seq, auth or routing logic.
//
//   node --expose-gc bench/relay.mjs [--sessions N] [--cli <path>]
//        [--store pipeline|script --redis <url> --prefix <p>]
//
// --sessions N   N CLIs (default 1, bench/load-cli.mjs or --cli), one per
//                session; a client of /v1/sessions/<k>/ws (k = 0..N-1) joins
//                session k, any other path session 0.
// --store        before a chunk is sent, its lines are in Redis, in one round
//                trip per chunk: `pipeline` = one ioredis pipeline of
//                `XADD <key> MAXLEN ~ 5000000 <seq>-0 f <line>`; `script` = one
//                EVALSHA of a script looping the same XADDs. Replies come back
//                in order, so chunks are sent in order; several may be in flight.
// Client text frames go to the session's CLI stdin, one line each.
// Prints {"port":n,"pid":n} once listening; stdin commands (one JSON answer
// a line): `stats` → {"rss":..,"heap_used":..} after a full GC. SIGTERM ends it.
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { createServer } from 'node:http'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { Sender, WebSocketServer } from 'ws'

const arg = (name, fallback) => { const i = process.argv.indexOf(name); return i === -1 ? fallback : process.argv[i + 1] }
const N = Number(arg('--sessions', '1'))
const CLI = arg('--cli', fileURLToPath(new URL('./load-cli.mjs', import.meta.url)))
const STORE = arg('--store', null)
const PREFIX = arg('--prefix', `cgwbench:relay-${process.pid}:`)
const MAXLEN = '5000000'
const FRAME = { fin: true, opcode: 1, mask: false, readOnly: true, rsv1: false }
const NL = Buffer.from('\n')

const SCRIPT = `for i = 2, #ARGV, 2 do
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], ARGV[i], 'f', ARGV[i + 1])
end
return 0`
const SHA = createHash('sha1').update(SCRIPT).digest('hex')

let redis = null
if (STORE !== null) {
  if (STORE !== 'pipeline' && STORE !== 'script') throw new Error(`--store pipeline|script, not ${STORE}`)
  const { Redis } = await import('ioredis')
  redis = new Redis(arg('--redis', 'redis://127.0.0.1:6379'), { enableAutoPipelining: false, maxRetriesPerRequest: 1 })
  await redis.script('LOAD', SCRIPT)
}

/** Writes one chunk's frames to every client of the session, one write each. */
function sendAll (session, out) {
  for (const ws of session.clients) ws._socket.write(out)
}

/** Lines (Buffers without the newline) → one Buffer holding their frames. */
function frames (lines) {
  const parts = []
  let total = 0
  for (const line of lines) {
    const [head, data] = Sender.frame(line, FRAME)
    parts.push(head, data)
    total += head.length + data.length
  }
  return Buffer.concat(parts, total)
}

function store (session, lines) {
  if (STORE === 'pipeline') {
    const p = redis.pipeline()
    for (const line of lines) p.xadd(session.key, 'MAXLEN', '~', MAXLEN, `${++session.seq}-0`, 'f', line)
    return p.exec().then((results) => {
      for (const [err] of results) if (err !== null) throw err
    })
  }
  const args = [MAXLEN]
  for (const line of lines) args.push(`${++session.seq}-0`, line)
  return redis.evalsha(SHA, 1, session.key, ...args)
}

function onChunk (session, chunk) {
  const buf = session.rest === null ? chunk : Buffer.concat([session.rest, chunk])
  session.rest = null
  const lines = []
  let start = 0
  let nl = buf.indexOf(10)
  while (nl !== -1) {
    if (nl > start) lines.push(buf.subarray(start, nl))
    start = nl + 1
    nl = buf.indexOf(10, start)
  }
  if (start < buf.length) session.rest = Buffer.from(buf.subarray(start))
  if (lines.length === 0) return
  if (redis === null) {
    if (session.clients.size > 0) sendAll(session, frames(lines))
    return
  }
  // The payloads are views of `buf`, which nothing reuses, so they can wait for the acknowledgement.
  store(session, lines).then(() => { if (session.clients.size > 0) sendAll(session, frames(lines)) },
    (err) => process.stderr.write(`relay: store failed: ${err.message}\n`))
}

const sessions = []
for (let k = 0; k < N; k++) {
  const sid = `00000000-0000-4000-8000-${String(k).padStart(12, '0')}`
  const child = spawn(CLI, ['--session-id', sid], { stdio: ['pipe', 'pipe', 'inherit'] })
  const session = { k, child, clients: new Set(), rest: null, seq: 0, key: `${PREFIX}{s${k}}:events` }
  sessions.push(session)
  if (redis !== null) await redis.del(session.key)
  child.stdout.on('data', (chunk) => onChunk(session, chunk))
  child.stdin.on('error', () => {})
  child.on('exit', (code, signal) => { if (!stopping) process.stderr.write(`relay: CLI ${k} exited (${code ?? signal})\n`) })
  // The same start-up exchange the gateway does.
  child.stdin.write('{"type":"control_request","request_id":"relay_init","request":{"subtype":"initialize"}}\n')
}

const server = createServer((_req, res) => { res.writeHead(404); res.end() })
const wss = new WebSocketServer({ server, maxPayload: 1024 * 1024, perMessageDeflate: false })
wss.on('connection', (ws, req) => {
  const m = /^\/v1\/sessions\/(\d+)\/ws/.exec(req.url ?? '/')
  const session = sessions[m === null ? 0 : Number(m[1])]
  if (session === undefined) { ws.close(1008); return }
  ws.on('error', () => {})
  ws.send('{"type":"gateway","subtype":"hello","relay":true}')
  session.clients.add(ws)
  ws.on('message', (data) => {
    session.child.stdin.write(Buffer.isBuffer(data) ? data : Buffer.from(data))
    session.child.stdin.write(NL)
  })
  ws.on('close', () => session.clients.delete(ws))
})
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ port: server.address().port, pid: process.pid }) + '\n')
})

createInterface({ input: process.stdin }).on('line', (line) => {
  if (line.trim() !== 'stats') { process.stdout.write('{"error":"unknown command"}\n'); return }
  globalThis.gc?.()
  const m = process.memoryUsage()
  process.stdout.write(JSON.stringify({ rss: m.rss, heap_used: m.heapUsed }) + '\n')
})

let stopping = false
async function stop () {
  if (stopping) return
  stopping = true
  setTimeout(() => {
    for (const s of sessions) s.child.kill('SIGKILL')
    process.exit(0)
  }, 1500).unref()
  for (const ws of wss.clients) ws.terminate()
  server.close()
  for (const s of sessions) s.child.stdin.end()
  // The command pipe would keep the process up until the timer: it exits once its CLIs and sockets are gone.
  process.stdin.destroy()
  if (redis !== null) {
    await redis.del(...sessions.map((s) => s.key)).catch(() => {})
    redis.disconnect()
  }
}
process.on('SIGTERM', () => { void stop() })
process.on('SIGINT', () => { void stop() })
