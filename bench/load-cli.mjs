#!/usr/bin/env node
// Load-generator CLI for the benchmark (run as CLAUDE_BIN, or by raw-pipe.mjs).
// Speaks just enough of the stream-json protocol: answers `initialize`, and
// treats the text of each user message as a JSON spec:
//
//   {"lines":N,"rate":R,"bytes":B}   N assistant lines at R lines/s (0 = as fast
//                                    as stdout takes them), each padded to about
//                                    B bytes and carrying "bench":{"i":index,"t":send
//                                    time}, then a `result` line.
//   {"permission":true,"count":K}    K can_use_tool control_requests, one at a
//                                    time; each round trip (request written →
//                                    answer read on stdin) is measured here and
//                                    the list is reported in the `result` line.
//
// Times are process.hrtime.bigint() in ns (CLOCK_MONOTONIC: the same clock in
// every process of the machine), so a receiver computes latency as its own
// hrtime minus "t". Node builtins only; turns run one after another.

const SID = argValue('--session-id') ?? argValue('--resume') ?? '00000000-0000-4000-8000-000000000000'
const out = process.stdout
const now = () => process.hrtime.bigint()
const queue = []
let running = false
const waiting = new Map() // request_id -> resolve(receive time)
let stdinEnded = false

function argValue (name) {
  const i = process.argv.indexOf(name)
  return i >= 0 ? process.argv[i + 1] : undefined
}

/** Writes one chunk; resolves at once unless stdout asks us to wait (backpressure). */
function write (text) {
  if (out.write(text)) return null
  return new Promise((resolve) => out.once('drain', resolve))
}

function send (obj) {
  return write(JSON.stringify(obj) + '\n')
}

// ---- stdin -----------------------------------------------------------------
let rest = ''
process.stdin.setEncoding('utf8')
process.stdin.on('data', (text) => {
  const received = now()
  const lines = (rest + text).split('\n')
  rest = lines.pop() ?? ''
  for (const line of lines) if (line.trim() !== '') onInput(line, received)
})
process.stdin.on('end', () => {
  stdinEnded = true
  if (!running) process.exit(0)
})

function onInput (line, received) {
  let msg
  try { msg = JSON.parse(line) } catch { return }
  if (msg.type === 'control_request') {
    const id = msg.request_id
    const subtype = msg.request?.subtype
    if (subtype === 'initialize') send({ type: 'control_response', response: { subtype: 'success', request_id: id, response: { commands: [], models: [], account: {}, bench: true } } })
    else if (subtype === 'interrupt') send({ type: 'control_response', response: { subtype: 'success', request_id: id, response: {} } })
    else send({ type: 'control_response', response: { subtype: 'error', request_id: id, error: `unsupported: ${subtype}` } })
    return
  }
  if (msg.type === 'control_response') {
    const id = msg.response?.request_id
    const resolve = waiting.get(id)
    if (resolve !== undefined) { waiting.delete(id); resolve(received) }
    return
  }
  if (msg.type === 'user') {
    const content = msg.message?.content
    const text = typeof content === 'string' ? content : Array.isArray(content) ? content.map((b) => b.text ?? '').join('') : ''
    let spec
    try { spec = JSON.parse(text) } catch { spec = { lines: 1, rate: 0, bytes: 200 } }
    queue.push(spec)
    if (!running) void runQueue()
  }
}

async function runQueue () {
  running = true
  while (queue.length > 0) {
    const spec = queue.shift()
    try {
      if (spec.permission) await permissionTurn(spec)
      else await linesTurn(spec)
    } catch (err) {
      process.stderr.write(`load-cli: turn failed: ${err?.stack ?? err}\n`)
    }
  }
  running = false
  if (stdinEnded) process.exit(0)
}

// ---- lines -----------------------------------------------------------------
function lineMaker (bytes) {
  const head = '{"type":"assistant","bench":{"i":'
  const mid = ',"t":'
  const tail1 = '},"message":{"id":"msg_bench","type":"message","role":"assistant","model":"bench","content":[{"type":"text","text":"'
  const tail2 = `"}],"stop_reason":null},"parent_tool_use_id":null,"session_id":"${SID}"}\n`
  // Fixed part plus typical digit counts (index ~5, ns time ~13): pad the rest.
  const fixed = head.length + mid.length + tail1.length + tail2.length + 5 + 13
  const pad = 'x'.repeat(Math.max(0, bytes - fixed))
  const tail = tail1 + pad + tail2
  return (i, t) => head + i + mid + t + tail
}

async function linesTurn (spec) {
  const n = Math.max(0, Math.floor(Number(spec.lines ?? 0)))
  const rate = Math.max(0, Number(spec.rate ?? 0))
  const make = lineMaker(Math.max(0, Math.floor(Number(spec.bytes ?? 300))))
  const started = now()
  let i = 0
  if (rate === 0) {
    // As fast as stdout takes them: one write per line (like the CLI), yielding
    // to the event loop every few hundred lines so stdin is still read.
    while (i < n) {
      const end = Math.min(n, i + 256)
      for (; i < end; i++) {
        const wait = write(make(i, now()))
        if (wait !== null) { i++; await wait; break }
      }
      await new Promise((resolve) => setImmediate(resolve))
    }
  } else {
    const intervalNs = 1e9 / rate
    while (i < n) {
      const due = Math.min(n, Math.floor(Number(now() - started) / intervalNs) + 1)
      while (i < due) {
        const wait = write(make(i, now()))
        i++
        if (wait !== null) await wait
      }
      if (i < n) {
        const nextAt = Number(started) + i * intervalNs
        const sleepMs = (nextAt - Number(now())) / 1e6
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, Math.floor(sleepMs))))
      }
    }
  }
  const ended = now()
  await result({ lines: n, rate, elapsed_ms: Number(ended - started) / 1e6 })
}

// ---- permissions -----------------------------------------------------------
async function permissionTurn (spec) {
  const count = Math.max(1, Math.floor(Number(spec.count ?? 100)))
  const gapMs = Math.max(0, Number(spec.gap_ms ?? 2))
  const rtts = []
  for (let k = 0; k < count; k++) {
    const id = `bench_perm_${process.pid}_${k}`
    const answered = new Promise((resolve) => waiting.set(id, resolve))
    const t = now()
    await send({
      type: 'control_request',
      request_id: id,
      request: { subtype: 'can_use_tool', tool_name: 'Bash', display_name: 'Bash', input: { command: 'true' }, description: 'bench', tool_use_id: `toolu_bench_${k}`, bench_t: Number(t) }
    })
    const at = await answered
    rtts.push(Number(at - t) / 1e6)
    if (gapMs > 0) await new Promise((resolve) => setTimeout(resolve, gapMs))
  }
  await result({ permission: true, count, rtt_ms: rtts })
}

function result (bench) {
  return send({ type: 'result', subtype: 'success', is_error: false, result: 'bench turn done', session_id: SID, bench })
}
