/**
 * What the fault suite (bench/faults.ts) measures, kept apart from the
 * scenarios: a logical client stream (one reader over any number of
 * WebSocket connections, each resuming with ?after=<last seq seen>) that
 * counts duplicated and out-of-order seqs as they arrive and records the
 * gaps the gateway declares; the check of a session's history; and the
 * count of fake-CLI and tool processes still alive.
 */
import { readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import WebSocket from 'ws'

export type Range = [number, number]

const SEQ_HEAD = /^\{"seq":(\d+)/
const now = (): number => performance.now()

export interface StreamOptions {
  /** ws://host:port of the gateway; a function, since a restarted gateway listens elsewhere. */
  base: () => string
  session: string
  token: string
  role: 'controller' | 'observer'
  /** Reconnect with ?after=<last seq> when the gateway ends the connection (4008, 1013, 1012, 1006…). */
  autoReconnect: boolean
}

/** True when `seq` lies in one of `ranges` (inclusive). */
export function inRanges (seq: number, ranges: Range[]): boolean {
  for (const [a, b] of ranges) if (seq >= a && seq <= b) return true
  return false
}

/** One reader of a session, across reconnects. */
export class LogicalStream {
  readonly name: string
  readonly o: StreamOptions
  /** Seqs after this one are expected (the ?after of the first connection). */
  start = 0
  /** Highest seq seen (what a reconnect resumes after). */
  last = 0
  prev: number | null = null
  duplicated = 0
  outOfOrder = 0
  /** First arrival time of each seq. */
  readonly got = new Map<number, number>()
  /** Ranges the gateway declared missing to this reader (hello gap, gap / store / store_overflow frames). */
  readonly declared: Range[] = []
  readonly verdicts: string[] = []
  readonly closeCodes: number[] = []
  /** Status frames seen, e.g. {status:'exited', exit:{reason}}. */
  readonly statuses: any[] = []
  connects = 0
  connectFailures = 0
  lastError: string | null = null
  resultSeq: number | null = null
  /** Every seq up to this one has arrived or was declared missing; and when it got there. */
  contiguous = 0
  readonly reachedAt = new Map<number, number>()
  ws: WebSocket | null = null
  #stopped = false
  #closingOnPurpose = false
  #paused = false
  #wakers: Array<() => void> = []

  constructor (name: string, o: StreamOptions) {
    this.name = name
    this.o = o
  }

  /** Opens the first connection with ?after=`after`; resolves once its hello is in. */
  async open (after = 0): Promise<void> {
    this.start = after
    this.last = after
    this.contiguous = after
    await this.#connect(after)
  }

  /** Drops the connection (`terminate`: no close handshake) and resumes with ?after=<last seq>. */
  async reconnect (how: 'close' | 'terminate' = 'close'): Promise<void> {
    const ws = this.ws
    if (ws !== null) {
      this.#closingOnPurpose = true
      const closed = new Promise<void>((resolve) => ws.once('close', () => resolve()))
      if (how === 'close') ws.close()
      else ws.terminate()
      await closed
      this.#closingOnPurpose = false
    }
    await this.#connect(this.last)
  }

  /** Drops the connection and stays away until `reconnect`. */
  async disconnect (): Promise<void> {
    const ws = this.ws
    if (ws === null) return
    this.#closingOnPurpose = true
    const closed = new Promise<void>((resolve) => ws.once('close', () => resolve()))
    ws.terminate()
    await closed
    this.#closingOnPurpose = false
  }

  pause (): void { this.#paused = true; this.ws?.pause() }
  resume (): void { this.#paused = false; this.ws?.resume() }

  /** Ends the stream: no more reconnects, socket closed. */
  stop (): void {
    this.#stopped = true
    this.ws?.terminate()
    this.#wake()
  }

  /** Resolves true once `check` holds, false after `ms`. */
  async until (check: () => boolean, ms: number): Promise<boolean> {
    const deadline = now() + ms
    while (!check()) {
      const left = deadline - now()
      if (left <= 0) return false
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 250))
        this.#wakers.push(() => { clearTimeout(timer); resolve() })
      })
    }
    return true
  }

  /** Seqs in (start, upTo] neither received nor declared missing. */
  lostUpTo (upTo: number): number {
    let lost = 0
    for (let s = this.start + 1; s <= upTo; s++) if (!this.got.has(s) && !inRanges(s, this.declared)) lost++
    return lost
  }

  /** When every seq up to `seq` had arrived (or been declared missing); null if it never did. */
  completeAt (seq: number): number | null {
    if (seq <= this.start) return this.reachedAt.get(this.start) ?? null
    return this.contiguous >= seq ? (this.reachedAt.get(seq) ?? null) : null
  }

  #wake (): void {
    const w = this.#wakers
    this.#wakers = []
    for (const f of w) f()
  }

  async #connect (after: number): Promise<void> {
    for (let attempt = 0; !this.#stopped; attempt++) {
      try {
        await this.#open(after)
        return
      } catch (err) {
        this.connectFailures++
        this.lastError = err instanceof Error ? err.message : String(err)
        if (!this.o.autoReconnect && attempt >= 2) throw new Error(`${this.name}: cannot connect after ${this.connects} connections (${this.lastError})`, { cause: err })
        await new Promise((resolve) => setTimeout(resolve, Math.min(1000, 50 * 2 ** Math.min(attempt, 5))))
      }
    }
  }

  #open (after: number): Promise<void> {
    const url = `${this.o.base()}/v1/sessions/${this.o.session}/ws?role=${this.o.role}&after=${after}`
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, { headers: { authorization: `Bearer ${this.o.token}` }, perMessageDeflate: false })
      let hello = false
      let retryAfter = 200
      ws.on('message', (data: Buffer) => {
        if (!hello) {
          const h = JSON.parse(data.toString())
          if (h.type === 'gateway' && h.subtype === 'hello') {
            hello = true
            this.connects++
            this.verdicts.push(String(h.resume))
            if (typeof h.retry_after_ms === 'number') retryAfter = h.retry_after_ms
            if (h.resume === 'gap') this.#declare(h)
            resolve()
            return
          }
        }
        this.#frame(data)
      })
      ws.once('unexpected-response', (_req, res) => { ws.terminate(); reject(new Error(`upgrade refused: ${res.statusCode}`)) })
      ws.once('error', (err) => { if (!hello) reject(err) })
      ws.once('close', (code) => {
        if (this.ws === ws) this.ws = null
        if (!hello) { reject(new Error(`closed before hello: ${code}`)); return }
        this.closeCodes.push(code)
        this.#wake()
        if (!this.#closingOnPurpose && !this.#stopped && this.o.autoReconnect) {
          setTimeout(() => { void this.#connect(this.last) }, code === 1013 ? retryAfter : 50)
        }
      })
      this.ws = ws
      if (this.#paused) ws.pause()
    })
  }

  #declare (f: any): void {
    if (Array.isArray(f.missing)) {
      for (const r of f.missing) if (Array.isArray(r)) this.declared.push([Number(r[0]), Number(r[1])])
    } else if (typeof f.missing_from === 'number' && typeof f.missing_to === 'number') {
      this.declared.push([f.missing_from, f.missing_to])
    }
    this.#advance()
  }

  #frame (data: Buffer): void {
    const head = data.toString('latin1', 0, Math.min(data.length, 120))
    let seq: number | null = null
    const m = SEQ_HEAD.exec(head)
    if (m !== null) {
      seq = Number(m[1])
      if (head.includes('"type":"result"')) this.resultSeq = seq
    } else if (head.startsWith('{"type":"gateway"')) {
      const f = JSON.parse(data.toString())
      if (typeof f.seq === 'number') seq = f.seq
      if (f.subtype === 'status') this.statuses.push(f)
      if (typeof f.missing_from === 'number' || Array.isArray(f.missing)) this.#declare(f)
    }
    if (seq === null) return
    if (this.prev !== null && seq <= this.prev) this.outOfOrder++
    this.prev = seq
    if (this.got.has(seq)) this.duplicated++
    else this.got.set(seq, now())
    if (seq > this.last) this.last = seq
    this.#advance()
    this.#wake()
  }

  #advance (): void {
    const t = now()
    while (this.got.has(this.contiguous + 1) || inRanges(this.contiguous + 1, this.declared)) {
      this.contiguous++
      this.reachedAt.set(this.contiguous, t)
    }
  }
}

// ---------------------------------------------------------------- history

export interface HistoryCheck {
  events: number
  last: number
  /** Seqs in [1, upTo] not in history and not declared missing. */
  lost: number
  duplicated: number
  outOfOrder: number
  /** Producer lines (fault.i) seen in history, distinct. */
  producerLines: number
  lastFrame: any
  error?: string
}

/** Reads a session's whole history (GET /events, pages of 1000) and checks it against seqs 1..upTo. */
export async function checkHistory (http: string, session: string, token: string, upTo: number, declared: Range[]): Promise<HistoryCheck> {
  const seen = new Set<number>()
  const lines = new Set<number>()
  let prev = 0
  let duplicated = 0
  let outOfOrder = 0
  let lastFrame: any = null
  let after = 0
  let error: string | undefined
  for (;;) {
    const res = await fetch(`${http}/v1/sessions/${session}/events?after=${after}&limit=1000`, { headers: { authorization: `Bearer ${token}` } })
    const body = await res.json() as any
    if (res.status !== 200) { error = `GET /events after=${after}: ${res.status} ${String(body?.code ?? '')}`; break }
    for (const e of body.events as any[]) {
      if (e.seq <= prev) outOfOrder++
      if (seen.has(e.seq)) duplicated++
      seen.add(e.seq)
      prev = e.seq
      lastFrame = e
      if (typeof e.fault?.i === 'number') lines.add(e.fault.i)
    }
    if (body.has_more !== true || body.next_after === null) break
    after = body.next_after
  }
  let lost = 0
  for (let s = 1; s <= upTo; s++) if (!seen.has(s) && !inRanges(s, declared)) lost++
  return { events: seen.size, last: prev, lost, duplicated, outOfOrder, producerLines: lines.size, lastFrame, ...(error === undefined ? {} : { error }) }
}

// ---------------------------------------------------------------- processes

/** Field 22 (start time) and state of a process, or null when it is gone. */
function procStat (pid: number): { state: string, pgrp: number, started: string } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return { state: f[0] ?? '', pgrp: Number(f[2]), started: f[19] ?? '' }
  } catch {
    return null
  }
}

/** The processes bench/faults-cli.mjs recorded in `pidDir` (CLIs and their tools). */
export function recordedPids (pidDir: string): Array<{ pid: number, started: string, kind: string }> {
  let files: string[]
  try { files = readdirSync(pidDir) } catch { return [] }
  return files.map((f) => {
    const [pid, started] = readFileSync(join(pidDir, f), 'utf8').trim().split(' ')
    return { pid: Number(pid), started: started ?? '', kind: f.split('.')[1] ?? '' }
  })
}

/**
 * Recorded processes still alive (same start time, not a zombie), plus any
 * other live member of a recorded CLI's process group (a tool it started).
 */
export function survivors (pidDir: string): Array<{ pid: number, kind: string }> {
  const recorded = recordedPids(pidDir)
  const alive = new Map<number, string>()
  for (const r of recorded) {
    const s = procStat(r.pid)
    if (s !== null && s.state !== 'Z' && s.started === r.started) alive.set(r.pid, r.kind)
  }
  const groups = new Map(recorded.filter((r) => r.kind === 'cli').map((r) => [r.pid, BigInt(r.started || '0')]))
  if (groups.size > 0) {
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry) || alive.has(Number(entry))) continue
      const s = procStat(Number(entry))
      const since = s === null ? undefined : groups.get(s.pgrp)
      if (s !== null && s.state !== 'Z' && since !== undefined && /^\d+$/.test(s.started) && BigInt(s.started) >= since) alive.set(Number(entry), 'group member')
    }
  }
  return [...alive].map(([pid, kind]) => ({ pid, kind }))
}

/** Waits up to `ms` for every recorded process to be gone; returns those still alive then. */
export async function orphansAfter (pidDir: string, ms: number): Promise<Array<{ pid: number, kind: string }>> {
  const deadline = now() + ms
  for (;;) {
    const left = survivors(pidDir)
    if (left.length === 0 || now() > deadline) return left
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

/** SIGKILLs what `survivors` found (after it was counted), so one scenario's leftovers do not burden the next. */
export function killSurvivors (list: Array<{ pid: number }>): void {
  for (const p of list) {
    try { process.kill(p.pid, 'SIGKILL') } catch { /* gone */ }
  }
}
