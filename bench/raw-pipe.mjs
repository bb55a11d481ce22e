#!/usr/bin/env node
// The naive pipe, kept only as a labelled extra row of the bench (issue 14):
// the same load generator, its stdout lines forwarded as-is to every
// connected WebSocket client over a bare `ws` server, one ws.send (one frame
// built, one corked write) per line per client. The real baseline is
// bench/relay.mjs, which batches per chunk and builds each frame once.
// Client text frames are written to the generator's stdin verbatim (one line
// each). Prints {"port":n} on stdout once listening; SIGTERM ends it.
//
// With `--store <redis url> <key>` each line is first written to a Redis
// stream (one plain `XADD key MAXLEN ~ 100000 * f <line>` per line, over
// ioredis) and sent to the clients when Redis acknowledges it, in order. The
// bench no longer uses it: one XADD per line is slower than the gateway's
// batch append; bench/relay.mjs --store stores a chunk in one round trip.
import { spawn } from 'node:child_process'
import { createServer } from 'node:http'
import { fileURLToPath } from 'node:url'
import { WebSocketServer } from 'ws'

const GENERATOR = fileURLToPath(new URL('./load-cli.mjs', import.meta.url))
const child = spawn(process.execPath, [GENERATOR, '--session-id', '00000000-0000-4000-8000-00000000raw0'], { stdio: ['pipe', 'pipe', 'inherit'] })
const clients = new Set()
const storeAt = process.argv.indexOf('--store')
const store = storeAt === -1 ? null : await openStore(process.argv[storeAt + 1], process.argv[storeAt + 2])

async function openStore (url, key) {
  const { Redis } = await import('ioredis')
  const redis = new Redis(url)
  await redis.del(key)
  return { redis, key }
}

function relay (line) {
  if (store === null) {
    for (const ws of clients) ws.send(line, { binary: false })
    return
  }
  // Replies come back in the order the commands went out, so lines stay in order.
  store.redis.xadd(store.key, 'MAXLEN', '~', '100000', '*', 'f', line).then(() => {
    for (const ws of clients) ws.send(line, { binary: false })
  }, (err) => process.stderr.write(`raw-pipe: XADD failed: ${err.message}\n`))
}

let rest = null
child.stdout.on('data', (chunk) => {
  const buf = rest === null ? chunk : Buffer.concat([rest, chunk])
  rest = null
  let start = 0
  let nl = buf.indexOf(10)
  while (nl !== -1) {
    if (nl > start) relay(buf.subarray(start, nl))
    start = nl + 1
    nl = buf.indexOf(10, start)
  }
  if (start < buf.length) rest = Buffer.from(buf.subarray(start))
})
child.on('exit', () => process.exit(0))
child.stdin.on('error', () => {})
// Same start-up exchange the gateway does.
child.stdin.write('{"type":"control_request","request_id":"raw_init","request":{"subtype":"initialize"}}\n')

const server = createServer((_req, res) => { res.writeHead(404); res.end() })
const wss = new WebSocketServer({ server, maxPayload: 1024 * 1024 })
wss.on('connection', (ws) => {
  clients.add(ws)
  ws.send('{"type":"gateway","subtype":"hello","raw":true}')
  ws.on('message', (data) => { child.stdin.write(Buffer.concat([Buffer.isBuffer(data) ? data : Buffer.from(data), Buffer.from('\n')])) })
  ws.on('close', () => clients.delete(ws))
  ws.on('error', () => {})
})
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ port: server.address().port, pid: process.pid, generator_pid: child.pid }) + '\n')
})

const stop = () => {
  if (store !== null) void store.redis.del(store.key).finally(() => store.redis.disconnect())
  for (const ws of clients) ws.terminate()
  server.close()
  child.stdin.end()
  setTimeout(() => { child.kill('SIGKILL'); process.exit(0) }, 1000).unref()
}
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
