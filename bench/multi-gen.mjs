#!/usr/bin/env node
// One load generator for many sessions (the scaling curve of bench/scaling.ts).
// 500 bench/load-cli.mjs processes would cost ~20 GB and ~30 s of CPU to
// start; instead each session's CLI is a tiny `socat - UNIX-CONNECT:<path>`
// (bench/lib.ts writeSocatCli), the same for the gateway and for the relay
// baseline, and this one process speaks for all of them, one connection per
// session, with load-cli.mjs's protocol: `initialize` is answered; a user
// message's text is a spec {"lines":N,"rate":R,"bytes":B,"phase":0..1}: N
// assistant lines at R lines/s, the first `phase` of an interval late (so
// sessions started together do not all write in the same millisecond), each
// carrying "bench":{"i":..,"t":<hrtime ns>}, one write per line, then `result`.
//
//   node bench/multi-gen.mjs <socket path>
//
// Prints {"port":0,"pid":n} once listening; SIGTERM ends it.
import { rmSync } from 'node:fs'
import { createServer } from 'node:net'

const PATH = process.argv[2]
const now = () => process.hrtime.bigint()
const active = new Set()
let ticking = false

function lineMaker (bytes, sid) {
  const head = '{"type":"assistant","bench":{"i":'
  const mid = ',"t":'
  const tail1 = '},"message":{"id":"msg_bench","type":"message","role":"assistant","model":"bench","content":[{"type":"text","text":"'
  const tail2 = `"}],"stop_reason":null},"parent_tool_use_id":null,"session_id":"${sid}"}\n`
  const fixed = head.length + mid.length + tail1.length + tail2.length + 5 + 13
  const tail = tail1 + 'x'.repeat(Math.max(0, bytes - fixed)) + tail2
  return (i, t) => head + i + mid + t + tail
}

const SID = '00000000-0000-4000-8000-000000000000'

/** Writes every line that is due in every running turn; runs every ~1 ms while any turn runs. */
function tick () {
  const t = now()
  for (const turn of active) {
    if (turn.sock.destroyed) { active.delete(turn); continue }
    const due = t < turn.start ? 0 : Math.min(turn.n, Math.floor(Number(t - turn.start) / turn.intervalNs) + 1)
    while (turn.i < due) turn.sock.write(turn.make(turn.i++, now()))
    if (turn.i >= turn.n) {
      active.delete(turn)
      turn.sock.write(JSON.stringify({ type: 'result', subtype: 'success', is_error: false, result: 'bench turn done', session_id: SID, bench: { lines: turn.n, rate: turn.rate } }) + '\n')
    }
  }
  if (active.size > 0) setTimeout(tick, 1)
  else ticking = false
}

function onLine (sock, line) {
  let msg
  try { msg = JSON.parse(line) } catch { return }
  if (msg.type === 'control_request') {
    const ok = msg.request?.subtype === 'initialize' || msg.request?.subtype === 'interrupt'
    sock.write(JSON.stringify({ type: 'control_response', response: ok ? { subtype: 'success', request_id: msg.request_id, response: { commands: [], models: [], account: {}, bench: true } } : { subtype: 'error', request_id: msg.request_id, error: 'unsupported' } }) + '\n')
    return
  }
  if (msg.type !== 'user') return
  let spec
  try { spec = JSON.parse(msg.message?.content) } catch { spec = { lines: 1, rate: 100, bytes: 200 } }
  const rate = Math.max(1, Number(spec.rate ?? 100))
  const intervalNs = 1e9 / rate
  active.add({ sock, n: Math.max(0, Math.floor(spec.lines ?? 0)), rate, intervalNs, i: 0, start: now() + BigInt(Math.round((spec.phase ?? 0) * intervalNs)), make: lineMaker(Number(spec.bytes ?? 512), SID) })
  if (!ticking) { ticking = true; setTimeout(tick, 0) }
}

rmSync(PATH, { force: true })
const server = createServer((sock) => {
  let rest = ''
  sock.setEncoding('utf8')
  sock.on('data', (text) => {
    const lines = (rest + text).split('\n')
    rest = lines.pop() ?? ''
    for (const line of lines) if (line.trim() !== '') onLine(sock, line)
  })
  sock.on('error', () => {})
  sock.on('end', () => sock.end())
})
server.listen(PATH, () => process.stdout.write(JSON.stringify({ port: 0, pid: process.pid, path: PATH }) + '\n'))
const stop = () => { server.close(); rmSync(PATH, { force: true }); process.exit(0) }
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
