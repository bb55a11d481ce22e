#!/usr/bin/env node
// Fake CLI for the fault suite (bench/faults.ts), run as CLAUDE_BIN. Like
// bench/load-cli.mjs it answers `initialize` and reads each user message as a
// JSON spec, but it also leaves what the suite needs to find orphans:
//
//   {"lines":N,"rate":R,"bytes":B}  N assistant lines ("fault":{"i":index})
//                                    at R lines/s (0 = as fast as stdout takes
//                                    them), each about B bytes, then a result line.
//   "tool":true in a spec           first starts `sleep 600` the way a Bash tool
//                                    would (same process group, not waited for).
//
// With --pid-dir <dir> it writes <dir>/<pid>.cli at start and <dir>/<pid>.tool
// per tool process: "pid start-time" (field 22 of /proc/<pid>/stat), so the
// suite can tell a leftover process from a stranger that reused the pid.
// Node builtins only; turns run one after another; exits when stdin ends.
import { spawn } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

const arg = (name) => {
  const i = process.argv.indexOf(name)
  return i >= 0 ? process.argv[i + 1] : undefined
}
const SID = arg('--session-id') ?? arg('--resume') ?? '00000000-0000-4000-8000-000000000000'
const PID_DIR = arg('--pid-dir')
const out = process.stdout
const queue = []
let running = false
let stdinEnded = false

function startTime (pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? ''
  } catch {
    return ''
  }
}

function remember (pid, kind) {
  if (PID_DIR === undefined) return
  try { writeFileSync(join(PID_DIR, `${pid}.${kind}`), `${pid} ${startTime(pid)}\n`) } catch { /* the suite then misses it */ }
}
remember(process.pid, 'cli')

// A broken pipe (the gateway died) ends this process, as it would the real CLI.
out.on('error', () => process.exit(1))

function write (text) {
  if (out.write(text)) return null
  return new Promise((resolve) => out.once('drain', resolve))
}

let rest = ''
process.stdin.setEncoding('utf8')
process.stdin.on('data', (text) => {
  const lines = (rest + text).split('\n')
  rest = lines.pop() ?? ''
  for (const line of lines) if (line.trim() !== '') onInput(line)
})
process.stdin.on('end', () => {
  stdinEnded = true
  if (!running) process.exit(0)
})

function onInput (line) {
  let msg
  try { msg = JSON.parse(line) } catch { return }
  if (msg.type === 'control_request') {
    const id = msg.request_id
    const ok = msg.request?.subtype === 'initialize' || msg.request?.subtype === 'interrupt'
    const response = ok
      ? { subtype: 'success', request_id: id, response: msg.request?.subtype === 'initialize' ? { commands: [], models: [], account: {} } : {} }
      : { subtype: 'error', request_id: id, error: `unsupported: ${msg.request?.subtype}` }
    void write(JSON.stringify({ type: 'control_response', response }) + '\n')
    return
  }
  if (msg.type !== 'user') return
  const content = msg.message?.content
  const text = typeof content === 'string' ? content : Array.isArray(content) ? content.map((b) => b.text ?? '').join('') : ''
  let spec
  try { spec = JSON.parse(text) } catch { spec = { lines: 1, rate: 0, bytes: 200 } }
  queue.push(spec)
  if (!running) void runQueue()
}

async function runQueue () {
  running = true
  while (queue.length > 0) await turn(queue.shift())
  running = false
  if (stdinEnded) process.exit(0)
}

function lineMaker (bytes) {
  const head = '{"type":"assistant","fault":{"i":'
  const tail1 = '},"message":{"id":"msg_fault","type":"message","role":"assistant","model":"fault","content":[{"type":"text","text":"'
  const tail2 = `"}],"stop_reason":null},"parent_tool_use_id":null,"session_id":"${SID}"}\n`
  const pad = 'x'.repeat(Math.max(0, bytes - head.length - tail1.length - tail2.length - 6))
  const tail = tail1 + pad + tail2
  return (i) => head + i + tail
}

async function turn (spec) {
  if (spec.tool === true) {
    const tool = spawn('sleep', ['600'], { stdio: 'ignore' })
    tool.unref()
    if (tool.pid !== undefined) remember(tool.pid, 'tool')
  }
  const n = Math.max(0, Math.floor(Number(spec.lines ?? 0)))
  const rate = Math.max(0, Number(spec.rate ?? 0))
  const make = lineMaker(Math.max(0, Math.floor(Number(spec.bytes ?? 300))))
  const started = Date.now()
  let i = 0
  while (i < n) {
    // Rate 0: batches of 256, yielding so stdin is still read; else what is due by now.
    const due = rate === 0 ? Math.min(n, i + 256) : Math.min(n, Math.floor(((Date.now() - started) * rate) / 1000) + 1)
    while (i < due) {
      const wait = write(make(i++))
      if (wait !== null) await wait
    }
    if (i < n) {
      const nextAt = rate === 0 ? 0 : started + (i * 1000) / rate - Date.now()
      await new Promise((resolve) => nextAt > 1 ? setTimeout(resolve, Math.floor(nextAt)) : setImmediate(resolve))
    }
  }
  await write(JSON.stringify({ type: 'result', subtype: 'success', is_error: false, result: 'fault turn done', session_id: SID, fault: { lines: n } }) + '\n')
}
