#!/usr/bin/env node
/* global fetch */
// Benchmark WebSocket/HTTP clients, run in their own process by bench/run.ts.
// The task comes as JSON in BENCH_CFG; progress events and the final report
// are JSON lines on stdout ({"event":...} and {"result":...}). Commands from
// the orchestrator arrive as lines on stdin ("go", "close").
//
// Latency = this process's process.hrtime.bigint() when a frame arrives minus
// the generator's send time carried in the frame ("bench":{"i":..,"t":ns}).
// Both are CLOCK_MONOTONIC on the same machine.
//
// Modes: stream | multi | permission | replay | idle | sessions | soak (see each below).
import { writeFileSync } from 'node:fs'
import { createInterface } from 'node:readline'
import WebSocket from 'ws'

const cfg = JSON.parse(process.env.BENCH_CFG ?? '{}')
const hr = () => Number(process.hrtime.bigint())
const BENCH_RE = /"bench":\{"i":(\d+),"t":(\d+)\}/
const SEQ_RE = /"seq":(\d+)/
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

function emit (obj) { process.stdout.write(JSON.stringify(obj) + '\n') }

const stdinLines = []
const stdinWaiters = []
createInterface({ input: process.stdin }).on('line', (line) => {
  const w = stdinWaiters.shift()
  if (w !== undefined) w(line.trim())
  else stdinLines.push(line.trim())
})
function nextCommand () {
  const line = stdinLines.shift()
  return line !== undefined ? Promise.resolve(line) : new Promise((resolve) => stdinWaiters.push(resolve))
}

function headers () {
  return cfg.token ? { authorization: `Bearer ${cfg.token}` } : {}
}

function wsUrl (query, session) {
  const q = Object.entries(query).filter(([, v]) => v !== undefined).map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join('&')
  return session ? `${cfg.url}/v1/sessions/${session}/ws${q ? `?${q}` : ''}` : `${cfg.url}/${q ? `?${q}` : ''}`
}

/** Opens a socket; resolves once the hello frame is in. Frames go to `onFrame(data, recvNs, ws)`. */
function open (query, onFrame, onClose, session = cfg.session) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(wsUrl(query, session), { headers: headers(), perMessageDeflate: false })
    let hello = false
    ws.on('message', (data) => {
      const recv = hr()
      if (!hello) {
        const text = data.toString()
        if (text.includes('"subtype":"hello"')) { hello = true; resolve(ws); return }
      }
      onFrame(data, recv, ws)
    })
    ws.on('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)))
    ws.on('error', (err) => { if (!hello) reject(err) })
    ws.on('close', (code) => { if (!hello) reject(new Error(`closed before hello: ${code}`)); onClose?.(code) })
  })
}

async function pool (count, concurrency, fn) {
  const results = new Array(count)
  let next = 0
  const worker = async () => {
    while (next < count) {
      const i = next++
      results[i] = await fn(i)
    }
  }
  await Promise.all(Array.from({ length: Math.min(count, concurrency) }, worker))
  return results
}

function userFrame (spec) {
  return JSON.stringify({ type: 'user', message: { role: 'user', content: JSON.stringify(spec) } })
}

function stats (values) {
  const a = Float64Array.from(values).sort()
  const n = a.length
  if (n === 0) return { n: 0 }
  const q = (p) => a[Math.min(n - 1, Math.max(0, Math.ceil(p * n) - 1))]
  let sum = 0
  for (const v of a) sum += v
  return { n, mean: sum / n, p50: q(0.5), p90: q(0.9), p99: q(0.99), p999: q(0.999), max: a[n - 1], min: a[0] }
}

function timeout (ms, what) {
  return new Promise((_resolve, reject) => setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms).unref())
}

// ---------------------------------------------------------------- stream
// N clients on one session (the first is the controller when cfg.controller).
// For each turn the controller sends the spec; every client records latency
// of each bench line and checks order (bench index and seq contiguity) until
// it sees the turn's `result` line.
async function stream () {
  const n = cfg.clients ?? 1
  const clients = []
  for (let k = 0; k < n; k++) clients.push({ k, lat: null, got: 0, expectI: 0, disorder: 0, seqPrev: null, seqBad: 0, firstT: null, lastRecv: 0, done: null, doneResolve: null, closeCode: null, answered: 0 })
  const makeTurnState = (c, lines) => {
    c.lat = new Float64Array(lines)
    c.got = 0; c.expectI = 0; c.disorder = 0; c.firstT = null; c.lastRecv = 0
    c.done = new Promise((resolve) => { c.doneResolve = resolve })
  }
  const onFrame = (c) => (data, recv, ws) => {
    const head = data.toString('latin1', 0, Math.min(data.length, 160))
    const s = SEQ_RE.exec(head)
    if (s !== null) {
      const seq = Number(s[1])
      if (c.seqPrev !== null && seq !== c.seqPrev + 1) c.seqBad++
      c.seqPrev = seq
    }
    const m = BENCH_RE.exec(head)
    if (m !== null) {
      const i = Number(m[1])
      const t = Number(m[2])
      if (i !== c.expectI) c.disorder++
      c.expectI = i + 1
      if (c.firstT === null) c.firstT = t
      if (c.lat !== null && c.got < c.lat.length) c.lat[c.got] = (recv - t) / 1e6
      c.got++
      c.lastRecv = recv
      return
    }
    const text = data.toString()
    if (text.includes('"type":"result"')) { c.lastResult = JSON.parse(text); c.doneResolve?.(); return }
    if (c.k === 0 && cfg.controller !== false && text.includes('"can_use_tool"')) {
      const msg = JSON.parse(text)
      if (msg.type === 'control_request') {
        ws.send(JSON.stringify({ type: 'control_response', response: { subtype: 'success', request_id: msg.request_id, response: { behavior: 'allow' } } }))
        c.answered++
      }
    }
  }
  const t0 = hr()
  await pool(n, 100, async (k) => {
    const c = clients[k]
    const role = k === 0 && cfg.controller !== false ? 'controller' : 'observer'
    c.ws = await open({ role }, onFrame(c), (code) => { c.closeCode = code; c.doneResolve?.() })
  })
  const connectMs = (hr() - t0) / 1e6
  const turns = []
  for (const turn of cfg.turns) {
    for (const c of clients) makeTurnState(c, turn.spec.lines ?? 0)
    if (cfg.wait_go) {
      emit({ event: 'ready' })
      await nextCommand()
    }
    if (cfg.controller !== false) clients[0].ws.send(userFrame(turn.spec))
    await Promise.race([Promise.all(clients.map((c) => c.done)), timeout(cfg.timeout_ms ?? 120_000, 'turn result')])
    if (!turn.measure) continue
    const all = []
    let firstT = Infinity
    let lastRecv = 0
    let got = 0
    const perClient = []
    for (const c of clients) {
      for (let i = 0; i < Math.min(c.got, c.lat.length); i++) all.push(c.lat[i])
      if (c.firstT !== null) firstT = Math.min(firstT, c.firstT)
      lastRecv = Math.max(lastRecv, c.lastRecv)
      got += c.got
      const span = c.firstT === null ? 0 : (c.lastRecv - c.firstT) / 1e9
      perClient.push({ got: c.got, missing: turn.spec.lines - c.got, disorder: c.disorder, seq_bad: c.seqBad, close: c.closeCode, lines_per_s: span > 0 ? c.got / span : 0 })
    }
    const spanS = (lastRecv - firstT) / 1e9
    // The 20 slowest lines of the first client (index, ms): shows whether the tail is bursts (stalls) or scattered.
    const c0 = clients[0]
    const slowest = Array.from(c0.lat.subarray(0, Math.min(c0.got, c0.lat.length)), (ms, i) => [i, ms]).sort((a, b) => b[1] - a[1]).slice(0, 20).map(([i, ms]) => [i, Number(ms.toFixed(2))])
    turns.push({
      slowest,
      spec: turn.spec,
      latency_ms: stats(all),
      frames: got,
      span_s: spanS,
      frames_per_s: spanS > 0 ? got / spanS : 0,
      first_send_ns: firstT,
      last_recv_ns: lastRecv,
      lines_per_s_per_client: stats(perClient.map((p) => p.lines_per_s)),
      missing: perClient.reduce((s, p) => s + p.missing, 0),
      disorder: perClient.reduce((s, p) => s + p.disorder, 0),
      seq_bad: perClient.reduce((s, p) => s + p.seq_bad, 0),
      closed: perClient.filter((p) => p.close !== null).map((p) => p.close),
      generator: clients[0].lastResult?.bench ?? null
    })
  }
  for (const c of clients) c.ws.close()
  return { clients: n, connect_ms: connectMs, turns }
}

// ---------------------------------------------------------------- multi
// Many sessions at once (the scaling curve): cfg.sessions (ids; the relay
// takes 0..N-1), cfg.per_session clients each (the first the controller).
// For each turn every controller sends the spec with its own phase (k/N, so
// the sessions' lines are spread over each interval rather than bunched),
// and every client records the latency of each bench line until its result.
async function multi () {
  const ids = cfg.sessions
  const per = cfg.per_session ?? 1
  const clients = []
  const onFrame = (c) => (data, recv) => {
    const head = data.toString('latin1', 0, Math.min(data.length, 160))
    const m = BENCH_RE.exec(head)
    if (m !== null) {
      const i = Number(m[1])
      if (i !== c.expectI) c.disorder++
      c.expectI = i + 1
      if (c.got < c.lat.length) {
        c.lat[c.got] = (recv - Number(m[2])) / 1e6
        if (c.sent !== undefined) c.sent[c.got] = Number(m[2])
      }
      c.got++
      return
    }
    if (data.length < 2048 && data.toString().includes('"type":"result"')) c.doneResolve?.()
  }
  const t0 = hr()
  await pool(ids.length * per, 100, async (j) => {
    const c = { s: Math.floor(j / per), k: j % per, lat: new Float64Array(0), got: 0, expectI: 0, disorder: 0, done: null, doneResolve: null, closeCode: null }
    clients[j] = c
    c.ws = await open({ role: c.k === 0 ? 'controller' : 'observer' }, onFrame(c), (code) => { c.closeCode = code; c.doneResolve?.() }, String(ids[c.s]))
  })
  const connectMs = (hr() - t0) / 1e6
  const turns = []
  for (const turn of cfg.turns) {
    const lines = turn.spec.lines ?? 0
    for (const c of clients) {
      c.lat = new Float64Array(lines)
      if (process.env.BENCH_LATENCY_DUMP !== undefined) c.sent = new Float64Array(lines)
      c.got = 0; c.expectI = 0; c.disorder = 0
      c.done = new Promise((resolve) => { c.doneResolve = resolve })
    }
    if (cfg.wait_go) {
      emit({ event: 'ready' })
      await nextCommand()
    }
    const start = hr()
    for (const c of clients) if (c.k === 0) c.ws.send(userFrame({ ...turn.spec, phase: c.s / ids.length }))
    await Promise.race([Promise.all(clients.map((c) => c.done)), timeout(cfg.timeout_ms ?? 120_000, 'multi turn result')])
    const spanS = (hr() - start) / 1e9
    if (!turn.measure) continue
    let n = 0
    for (const c of clients) n += Math.min(c.got, lines)
    const all = new Float64Array(n)
    let at = 0
    for (const c of clients) { all.set(c.lat.subarray(0, Math.min(c.got, lines)), at); at += Math.min(c.got, lines) }
    if (process.env.BENCH_LATENCY_DUMP !== undefined) {
      // Diagnostics: every line's send time (ms since the turn's start), latency (ms) and session index, one row each.
      const rows = []
      for (const c of clients) for (let i = 0; i < Math.min(c.got, lines); i++) rows.push(`${((c.sent[i] - start) / 1e6).toFixed(3)} ${c.lat[i].toFixed(3)} ${c.s}`)
      writeFileSync(`${process.env.BENCH_LATENCY_DUMP}-${process.pid}-${turns.length}.txt`, `# ${start}\n` + rows.join('\n') + '\n')
    }
    turns.push({
      spec: turn.spec,
      latency_ms: stats(all),
      frames: n,
      span_s: spanS,
      missing: clients.reduce((s, c) => s + Math.max(0, lines - c.got), 0),
      disorder: clients.reduce((s, c) => s + c.disorder, 0),
      closed: clients.filter((c) => c.closeCode !== null).map((c) => c.closeCode)
    })
  }
  for (const c of clients) c.ws.close()
  return { sessions: ids.length, per_session: per, connect_ms: connectMs, turns }
}

// ---------------------------------------------------------------- permission
// One controller answers every can_use_tool prompt with allow at once; the
// generator measures each round trip and reports them in its result line.
// An optional warm-up turn (cfg.warm, same socket) runs first, so that the
// measured turn finds the generator, this process and the gateway past V8's
// tier-up: cold, a run shows a stall of 10-20 ms at the same prompt index
// every time.
async function permission () {
  let oneWay = []
  let resultMsg = null
  let resolveDone
  const ws = await open({ role: 'controller' }, (data, recv, sock) => {
    const text = data.toString()
    if (text.includes('"can_use_tool"')) {
      const msg = JSON.parse(text)
      if (msg.type !== 'control_request') return
      sock.send(JSON.stringify({ type: 'control_response', response: { subtype: 'success', request_id: msg.request_id, response: { behavior: 'allow' } } }))
      oneWay.push((recv - msg.request.bench_t) / 1e6)
    } else if (text.includes('"type":"result"')) {
      resultMsg = JSON.parse(text)
      resolveDone()
    }
  })
  const turn = async (spec) => {
    oneWay = []
    resultMsg = null
    const done = new Promise((resolve) => { resolveDone = resolve })
    ws.send(userFrame(spec))
    await Promise.race([done, timeout(cfg.timeout_ms ?? 120_000, 'permission result')])
  }
  if (cfg.warm !== undefined) await turn(cfg.warm)
  await turn(cfg.spec)
  ws.close()
  const rtts = resultMsg?.bench?.rtt_ms ?? []
  // The 20 slowest round trips (index, ms): bursts (a stall) or scattered (wake-ups).
  const slowest = rtts.map((ms, i) => [i, Number(ms.toFixed(2))]).sort((a, b) => b[1] - a[1]).slice(0, 20)
  return { rtt_ms: stats(rtts), one_way_ms: stats(oneWay), slowest }
}

// ---------------------------------------------------------------- replay
// Writes `lines` events (one fast turn), then measures reconnecting with
// ?after=<seq before them> until all are delivered, `resume_reps` times
// (history pages: the `history` mode below).
async function replay () {
  // cfg.bare = {key, after, last}: measure bench/bare-server.mjs over events
  // already in the stream `key` instead of filling a gateway session first.
  const bare = cfg.bare ?? null
  let after
  let resultSeq
  if (bare !== null) {
    after = bare.after
    resultSeq = bare.last
  } else {
    let firstSeq = null
    let resolveDone
    const done = new Promise((resolve) => { resolveDone = resolve })
    const ctl = await open({ role: 'controller' }, (data) => {
      const head = data.toString('latin1', 0, Math.min(data.length, 160))
      const s = SEQ_RE.exec(head)
      if (s === null) return
      if (firstSeq === null && BENCH_RE.test(head)) firstSeq = Number(s[1])
      if (data.toString().includes('"type":"result"')) { resultSeq = Number(s[1]); resolveDone() }
    })
    ctl.send(userFrame({ lines: cfg.lines, rate: 0, bytes: cfg.bytes }))
    await Promise.race([done, timeout(cfg.timeout_ms ?? 120_000, 'replay fill')])
    ctl.close()
    after = firstSeq - 1
  }
  const expected = resultSeq - after

  // One extra run first, reported apart (first_resume): the replay code
  // path is cold (JIT) the first time in a gateway process.
  const resume = []
  let firstResume = null
  for (let r = -1; r < cfg.resume_reps; r++) {
    await sleep(50)
    const t0 = hr()
    let count = 0
    let bad = 0
    let prev = after
    let firstFrameMs = null
    let resolveAll
    const all = new Promise((resolve) => { resolveAll = resolve })
    const ws = await open(bare === null ? { role: 'observer', after } : { key: bare.key, after }, (data) => {
      const head = data.toString('latin1', 0, Math.min(data.length, 160))
      const s = SEQ_RE.exec(head)
      if (s === null) return
      const seq = Number(s[1])
      if (firstFrameMs === null) firstFrameMs = (hr() - t0) / 1e6
      if (seq !== prev + 1) bad++
      prev = seq
      count++
      if (seq >= resultSeq) resolveAll()
    })
    const openMs = (hr() - t0) / 1e6
    await Promise.race([all, timeout(30_000, 'resume')])
    const ms = (hr() - t0) / 1e6
    ws.close()
    if (r >= 0) resume.push({ ms, open_ms: openMs, first_frame_ms: firstFrameMs, count, expected, bad })
    else firstResume = { ms, open_ms: openMs, first_frame_ms: firstFrameMs, count, expected, bad }
  }

  return {
    events: expected,
    after,
    last_seq: resultSeq,
    resume,
    resume_ms: stats(resume.map((x) => x.ms)),
    first_resume: firstResume
  }
}

// ---------------------------------------------------------------- history
// GET /events pages of 1000 through events (after, last], `history_reps`
// passes after one warm-up pass, from each of `targets` in turn page by page
// (the gateway's page k, then the bare server's page k, ...), so both sides
// are timed under the same conditions. A target is {name, http, session,
// token} (the gateway's API) or {name, http, key} (bench/bare-server.mjs).
async function history () {
  const url = (t, cursor) => t.key === undefined
    ? `${t.http}/v1/sessions/${t.session}/events?after=${cursor}&limit=1000`
    : `${t.http}/events?key=${encodeURIComponent(t.key)}&after=${cursor}&limit=1000`
  const out = new Map(cfg.targets.map((t) => [t.name, { pages: [], first: [], checks: { events: 0, bad: 0 } }]))
  for (let r = -1; r < cfg.history_reps; r++) {
    const cursors = new Map(cfg.targets.map((t) => [t.name, cfg.after]))
    let open = cfg.targets.length
    while (open > 0) {
      for (const t of cfg.targets) {
        const cursor = cursors.get(t.name)
        if (cursor === null) continue
        const o = out.get(t.name)
        const t0 = hr()
        const res = await fetch(url(t, cursor), { headers: t.token === undefined ? {} : { authorization: `Bearer ${t.token}` } })
        const text = await res.text()
        const ms = (hr() - t0) / 1e6
        if (res.status !== 200) throw new Error(`${t.name} history page: ${res.status} ${text.slice(0, 200)}`)
        const body = JSON.parse(text)
        if (r >= 0) o.pages.push({ ms, events: body.events.length, bytes: text.length })
        else o.first.push(ms)
        let next = cursor
        for (const e of body.events) { if (e.seq !== next + 1) o.checks.bad++; next = e.seq; if (r >= 0) o.checks.events++ }
        const done = !body.has_more || next >= cfg.last
        cursors.set(t.name, done ? null : next)
        if (done) open--
      }
    }
  }
  const result = {}
  for (const [name, o] of out) {
    result[name] = {
      first_history_page_ms: stats(o.first),
      history_page_ms: stats(o.pages.map((p) => p.ms)),
      history_pages: o.pages.length,
      history_page_events: stats(o.pages.map((p) => p.events)),
      history_page_bytes: stats(o.pages.map((p) => p.bytes)),
      history_checks: o.checks
    }
  }
  return result
}

// ---------------------------------------------------------------- idle
// Opens `count` observer sockets and keeps them open until told "close".
async function idle () {
  const sockets = []
  const t0 = hr()
  let failed = 0
  let closedEarly = 0
  await pool(cfg.count, cfg.concurrency ?? 100, async () => {
    try {
      sockets.push(await open({ role: 'observer' }, () => {}, () => { closedEarly++ }))
    } catch (err) {
      if (failed++ < 3) process.stderr.write(`idle connect failed: ${err.message}\n`)
    }
  })
  emit({ event: 'connected', n: sockets.length, failed, ms: (hr() - t0) / 1e6 })
  await nextCommand()
  const stillOpen = sockets.filter((ws) => ws.readyState === WebSocket.OPEN).length
  for (const ws of sockets) ws.terminate()
  return { opened: sockets.length, failed, still_open: stillOpen, closed_early: closedEarly }
}

// ---------------------------------------------------------------- sessions
// Creates `count` sessions; each gets one controller that runs one light turn
// and disconnects. At most `concurrency` at once, `per_second` starts a second.
async function sessions () {
  const ids = []
  const failures = []
  const t0 = hr()
  const gapMs = 1000 / (cfg.per_second ?? 50)
  let nextStart = Date.now()
  await pool(cfg.count, cfg.concurrency ?? 8, async () => {
    const wait = nextStart - Date.now()
    nextStart = Math.max(Date.now(), nextStart) + gapMs
    if (wait > 0) await sleep(wait)
    try {
      const res = await fetch(`${cfg.http}/v1/sessions`, { method: 'POST', headers: { ...headers(), 'content-type': 'application/json' }, body: '{}' })
      const body = await res.json()
      if (res.status !== 201) throw new Error(`create: ${res.status} ${JSON.stringify(body)}`)
      ids.push(body.id)
      let resolveDone
      const done = new Promise((resolve) => { resolveDone = resolve })
      const ws = await open({ role: 'controller' }, (data) => { if (data.toString().includes('"type":"result"')) resolveDone() }, undefined, body.id)
      ws.send(userFrame(cfg.spec ?? { lines: 10, rate: 0, bytes: 200 }))
      await Promise.race([done, timeout(30_000, 'light turn')])
      ws.close()
    } catch (err) {
      failures.push(String(err.message ?? err))
    }
  })
  return { created: ids.length, failures: failures.length, failure_samples: failures.slice(0, 3), ms: (hr() - t0) / 1e6 }
}

// ---------------------------------------------------------------- soak
// One controller runs turns back to back for `duration_ms`; `observers`
// clients stay attached but are dropped and resumed (?after=<last seq>) at
// random, `churn_per_s` times a second; short-lived visitors come and go.
// Every client checks that its seqs are contiguous across reconnects, keeps
// each frame's length by seq, and at the end everything is compared with
// GET /events history: no lost, duplicated or altered seq.
async function soak () {
  const end = Date.now() + cfg.duration_ms
  const lat = []
  const track = (name) => ({ name, start: null, last: null, gaps: 0, dups: 0, lens: new Map(), reconnects: 0, frames: 0 })
  const onSeqFrame = (t, data, recv) => {
    const head = data.toString('latin1', 0, Math.min(data.length, 160))
    const s = SEQ_RE.exec(head)
    if (s === null) return null
    const seq = Number(s[1])
    if (t.last !== null) {
      if (seq <= t.last) t.dups++
      else if (seq !== t.last + 1) t.gaps++
    } else {
      t.start = seq
    }
    if (t.last === null || seq > t.last) t.last = seq
    t.lens.set(seq, data.length)
    t.frames++
    const m = BENCH_RE.exec(head)
    if (m !== null && t.name === 'controller') lat.push((recv - Number(m[2])) / 1e6)
    return seq
  }

  // controller
  const ctl = track('controller')
  let turns = 0
  let resolveTurn = () => {}
  const ctlWs = await open({ role: 'controller' }, (data, recv) => {
    onSeqFrame(ctl, data, recv)
    if (data.length < 4096 && data.toString().includes('"type":"result"')) resolveTurn()
  })
  const runTurns = (async () => {
    while (Date.now() < end) {
      const done = new Promise((resolve) => { resolveTurn = resolve })
      ctlWs.send(userFrame(cfg.spec))
      await Promise.race([done, timeout(120_000, 'soak turn')])
      turns++
    }
  })()

  // observers
  const observers = []
  const connectObserver = async (t, after) => {
    t.ws = await open({ role: 'observer', after: after ?? undefined }, (data, recv) => onSeqFrame(t, data, recv), () => { t.ws = null })
  }
  for (let k = 0; k < cfg.observers; k++) {
    const t = track(`observer-${k}`)
    observers.push(t)
    await connectObserver(t, null)
  }
  const visitors = []
  let churns = 0
  let errors = 0
  const churner = (async () => {
    const gap = 1000 / cfg.churn_per_s
    while (Date.now() < end - 2000) {
      await sleep(gap * (0.5 + Math.random()))
      churns++
      try {
        if (churns % 4 === 0) {
          // A visitor: joins a little in the past, stays a while, leaves for good.
          const t = track(`visitor-${churns}`)
          const after = Math.max(0, (ctl.last ?? 0) - Math.floor(Math.random() * 500))
          t.start = null
          visitors.push(t)
          await connectObserver(t, after)
          t.after = after
          setTimeout(() => { t.ws?.close() }, 200 + Math.random() * 1500)
        } else {
          const t = observers[Math.floor(Math.random() * observers.length)]
          if (t.ws === null) continue
          const ws = t.ws
          await new Promise((resolve) => {
            ws.once('close', resolve)
            if (Math.random() < 0.5) ws.close()
            else ws.terminate()
          })
          await sleep(Math.random() * 200)
          t.reconnects++
          await connectObserver(t, t.last ?? 0)
        }
      } catch (err) {
        if (errors++ < 3) process.stderr.write(`soak churn error: ${err.message}\n`)
      }
    }
  })()
  await Promise.all([runTurns, churner])
  await sleep(500)
  ctlWs.close()
  for (const t of observers) t.ws?.close()
  for (const t of visitors) t.ws?.close()

  // History: every seq once, contiguous, and every client's frames equal to it.
  const history = new Map()
  let cursor = 0
  let historyBad = 0
  for (;;) {
    const res = await fetch(`${cfg.http}/v1/sessions/${cfg.session}/events?after=${cursor}&limit=1000`, { headers: headers() })
    const body = await res.json()
    if (res.status !== 200) throw new Error(`history: ${res.status}`)
    for (const e of body.events) {
      if (e.seq !== cursor + 1) historyBad++
      cursor = e.seq
      history.set(e.seq, Buffer.byteLength(JSON.stringify(e)))
    }
    if (!body.has_more) break
  }
  const clients = [ctl, ...observers, ...visitors]
  let lost = 0
  let mismatched = 0
  let gaps = 0
  let dups = 0
  for (const t of clients) {
    gaps += t.gaps
    dups += t.dups
    if (t.last === null) continue
    const from = t.after !== undefined ? t.after + 1 : t.start
    for (let seq = from; seq <= t.last; seq++) {
      const mine = t.lens.get(seq)
      if (mine === undefined) { lost++; continue }
      // Frame text is re-serialised from the parsed history page; the bench's
      // frames have no escapes or whitespace, so byte lengths must match.
      const stored = history.get(seq)
      if (stored === undefined || stored !== mine) mismatched++
    }
  }
  return {
    duration_ms: cfg.duration_ms,
    turns,
    clients: clients.length,
    observers: observers.length,
    visitors: visitors.length,
    reconnects: observers.reduce((s, t) => s + t.reconnects, 0),
    frames: clients.reduce((s, t) => s + t.frames, 0),
    history_events: history.size,
    history_last: cursor,
    history_bad: historyBad,
    gaps,
    dups,
    lost,
    mismatched_vs_history: mismatched,
    churn_errors: errors,
    controller_latency_ms: stats(lat)
  }
}

const modes = { stream, multi, permission, replay, history, idle, sessions, soak }
const fn = modes[cfg.mode]
if (fn === undefined) {
  emit({ error: `unknown mode ${cfg.mode}` })
  process.exit(2)
}
fn().then((result) => {
  emit({ result })
  process.exit(0)
}, (err) => {
  emit({ error: String(err?.stack ?? err) })
  process.exit(1)
})
