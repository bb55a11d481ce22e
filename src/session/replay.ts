/**
 * Bringing a client that attaches with `after` up to date: where its replay
 * starts and what its hello may truthfully say about it (the verdict), then
 * history up to the seq committed when it attached, then the live frames it
 * collected meanwhile, then the prompts another node redelivered to it
 * meanwhile (Attachment.owed). Each seq is sent once: by the replay (≤ upTo) or from
 * the backlog (> upTo); a redelivered prompt again, as one.
 *
 * The verdict never guesses. `gap` names exactly the seqs history no longer
 * has; `unavailable` says the store could not answer for the range asked
 * (within a bound), and the client is ended rather than given live frames
 * with a hole before them.
 *
 * A control request still pending whose seq history lost (dropped past
 * STORE_QUEUE_MAX while the store was down) is not lost to the client: the
 * session holds it, and the replay sends it where it jumps over its seq.
 */
import type { Logger } from 'pino'
import type { Attachment, Audience } from './audience.js'
import type { EventLog, LogEvent, SeqRange } from './event-log.js'
import { errorFrame, gatewayFrame } from './frames.js'
import { readHistoryPage } from './history-page.js'

const REPLAY_PAGE = 1000
/** Replay reads at most about this much at once (CLI lines may be MiBs each). */
const REPLAY_PAGE_BYTES = 4 * 1024 * 1024
/** First pause between store attempts while waiting for it; doubled up to the cap. */
const RETRY_FIRST_MS = 100
const RETRY_CAP_MS = 1000

export type ResumeVerdict = 'none' | 'ok' | 'gap' | 'unavailable'

export interface ResumePoint {
  /** The replay sends seqs after this one. */
  from: number
  resume: ResumeVerdict
  /** Oldest seq history holds; null when it holds none or the store could not say. */
  oldest: number | null
  /** With `gap`: the seqs missing within what was asked, as inclusive ranges, ascending. */
  missing: SeqRange[]
}

export interface ResumeWait {
  /** How long the store may take to answer before the verdict is `unavailable` (RESUME_STORE_WAIT_MS). */
  waitMs: number
  /** True once the client left: stop waiting for it. */
  gone: () => boolean
}

const UNAVAILABLE = Symbol('unavailable')

/** Where a client resuming after seq `after` starts, given that seqs up to `upTo` were committed. */
export async function resumePoint (events: EventLog, after: number | undefined, upTo: number, wait: ResumeWait): Promise<ResumePoint> {
  if (after === undefined) return { from: upTo, resume: 'none', oldest: null, missing: [] }
  const from = Math.min(after, upTo)
  // A client that has everything needs no store; frames held in memory serve a replay that starts inside them.
  const held = events.heldFrom
  const needsStore = from < upTo && (held === undefined || held > from + 1)
  const first = await retrying(() => events.firstSeq(), needsStore ? wait : { ...wait, waitMs: 0 })
  if (first === UNAVAILABLE) {
    return needsStore
      ? { from, resume: 'unavailable', oldest: null, missing: [] }
      : { from, resume: 'ok', oldest: null, missing: [] }
  }
  const missing: SeqRange[] = []
  let start = from
  if (from < upTo && (first === null || first > from + 1)) {
    // Trimmed, expired or lost with the store's data: everything before `first` is gone.
    const to = first === null ? upTo : Math.min(first - 1, upTo)
    missing.push([from + 1, to])
    start = to
  }
  missing.push(...events.lostWithin(start, upTo))
  return { from: start, resume: missing.length > 0 ? 'gap' : 'ok', oldest: first, missing }
}

/** A pending CLI control request as recorded (ControlPlane.list()). */
export interface PendingFrame {
  seq: number
  frame: string
}

export interface ReplayParts {
  events: EventLog
  audience: Audience
  log: Logger
  wait: ResumeWait
  /** The CLI control requests pending now: those history lost are sent in their place. */
  pending?: () => readonly PendingFrame[]
  /** The seq the client asked to resume after: pending requests history trimmed between it and `from` go to an observer first. */
  after?: number | undefined
}

/**
 * Sends `att` the frames in (from, upTo], then its backlog, then makes it
 * live. A jump over missing seqs is marked where it happens with a `gap`
 * frame, followed by the pending control requests within it. Returns the
 * seq up to which control requests went out as notices
 * (another client held the session meanwhile), for redelivery if it holds
 * it now; null when the store stopped answering and the client was ended
 * (1013) instead of being handed live frames after a hole.
 */
export async function replay (att: Attachment, from: number, upTo: number, parts: ReplayParts): Promise<number | null> {
  const { events, audience } = parts
  const port = att.port
  let cursor = from
  let noticedUpTo = from
  // Rendered for the role `att` has at that moment: a notice sent while it observed is owed in full should it hold later.
  const sendRecorded = (event: { seq: number, frame: string }): void => {
    audience.send(port, audience.render(event, att), event.seq)
    if (audience.holder !== att) noticedUpTo = Math.max(noticedUpTo, event.seq)
  }
  const pendingWithin = (after: number, to: number): PendingFrame[] =>
    (parts.pending?.() ?? []).filter((p) => p.seq > after && p.seq <= to).sort((a, b) => a.seq - b.seq)
  // Trimmed from history before `from` (the oldest seq kept) and still pending: the hello lists their ids, and an
  // observer gets their notices here, before any later seq; a holder gets them in full right after the replay
  // (ControlPlane.holderChanged up to the seq returned, which is `from` or later).
  if (parts.after !== undefined && parts.after < from && audience.holder !== att) {
    for (const p of pendingWithin(parts.after, from)) sendRecorded(p)
  }
  // Prompts in a hole would otherwise reach no one who resumes over it: its id in the hello, its body nowhere.
  const jump = (to: number): void => {
    audience.send(port, gapFrame(cursor + 1, to))
    for (const p of pendingWithin(cursor, to)) sendRecorded(p)
  }
  while (cursor < upTo) {
    const at = cursor
    const page = await retrying(async () => (await readHistoryPage(events, at, REPLAY_PAGE, REPLAY_PAGE_BYTES, upTo)).events, parts.wait)
    if (page === UNAVAILABLE) {
      if (!audience.has(port)) return null
      parts.log.warn({ client: port.id, at: cursor }, 'replay stopped: the event store did not answer')
      audience.send(port, errorFrame('store_unavailable', `Replay stopped after seq ${cursor}: the event store did not answer; reconnect with ?after=${cursor}`, { after: cursor }))
      att.backlog = null
      port.end?.('store_unavailable', `event store unavailable: reconnect with ?after=${cursor}`)
      return null
    }
    if (!audience.has(port)) return noticedUpTo
    if (page.length === 0) break
    for (const event of page) {
      if (event.seq > cursor + 1) jump(event.seq - 1)
      sendRecorded(event)
      cursor = event.seq
      const drained = port.writable?.() ?? null
      if (drained !== null) await drained
      if (!audience.has(port)) return noticedUpTo
    }
  }
  if (cursor < upTo) jump(upTo)
  // The live frames held during the replay go to the client's send queue in one go, and it is live
  // in the same tick. Waiting for the socket between them (as for history pages) would let a
  // running burst keep the client in this held mode for as long as it lasts, its budget counting
  // every frame in flight: a reader that keeps up would be ended as a slow consumer. The queue
  // applies the same budget to them as to any live frame.
  const backlog = att.backlog ?? []
  for (let i = 0; i < backlog.length && audience.has(port); i++) {
    const event = backlog[i] as LogEvent
    if (event.seq > upTo) audience.send(port, audience.render(event, att), event.seq)
  }
  att.backlog = null
  const owed = att.owed ?? []
  att.owed = null
  for (let i = 0; i < owed.length && audience.has(port); i++) {
    const { frame, seq } = owed[i] as { frame: string, seq: number }
    audience.send(port, frame, seq)
  }
  return noticedUpTo
}

/** An unrecorded frame marking where a replay jumps over seqs history does not have. */
function gapFrame (from: number, to: number): string {
  return gatewayFrame('gap', { missing_from: from, missing_to: to })
}

/** `read()`, retried with backoff while the store does not answer, for at most `wait.waitMs`. */
async function retrying<T> (read: () => Promise<T>, wait: ResumeWait): Promise<T | typeof UNAVAILABLE> {
  const deadline = Date.now() + wait.waitMs
  let pause = RETRY_FIRST_MS
  for (;;) {
    try {
      return await read()
    } catch {
      const left = deadline - Date.now()
      if (left <= 0 || wait.gone()) return UNAVAILABLE
      await new Promise((resolve) => setTimeout(resolve, Math.min(pause, left)))
      pause = Math.min(RETRY_CAP_MS, pause * 2)
    }
  }
}
