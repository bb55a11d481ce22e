/**
 * Bringing a client that attaches with `after` up to date: where its replay
 * starts (and whether history has a gap there), then history up to the seq
 * committed when it attached, then the live frames it collected meanwhile.
 * Each seq is sent once: by the replay (≤ upTo) or from the backlog (> upTo).
 */
import type { Logger } from 'pino'
import type { Attachment, Audience } from './audience.js'
import type { EventLog, LogEvent } from './event-log.js'
import { errorFrame } from './frames.js'
import { readHistoryPage } from './history-page.js'

const REPLAY_PAGE = 1000
/** Replay reads at most about this much at once (CLI lines may be MiBs each). */
const REPLAY_PAGE_BYTES = 4 * 1024 * 1024

export interface ResumePoint {
  /** The replay sends seqs after this one. */
  from: number
  resume: 'none' | 'ok' | 'gap'
  oldest: number | null
}

/** Where a client resuming after seq `after` starts, given that seqs up to `upTo` were committed. */
export async function resumePoint (events: EventLog, after: number | undefined, upTo: number): Promise<ResumePoint> {
  if (after === undefined) return { from: upTo, resume: 'none', oldest: null }
  let from = Math.min(after, upTo)
  const first = await events.firstSeq()
  // Nothing readable although seqs after `from` were committed (e.g. Redis restarted empty): a gap too.
  // Unknown (store down, nothing held): try the replay, which reports where it stopped.
  const missing = first === null ? from < upTo : first !== undefined && first > from + 1
  if (missing) from = first === null ? upTo : (first as number) - 1
  return { from, resume: missing ? 'gap' : 'ok', oldest: first ?? null }
}

export interface ReplayParts {
  events: EventLog
  audience: Audience
  log: Logger
}

/**
 * Sends `att` the frames in (from, upTo], then its backlog, then makes it live.
 * Returns the seq up to which control requests went out as notices (another
 * client held the session meanwhile), for redelivery if it holds it now.
 */
export async function replay (att: Attachment, from: number, upTo: number, parts: ReplayParts): Promise<number> {
  const { events, audience } = parts
  const port = att.port
  let cursor = from
  let noticedUpTo = from
  while (cursor < upTo) {
    let page
    try {
      page = (await readHistoryPage(events, cursor, REPLAY_PAGE, REPLAY_PAGE_BYTES, upTo)).events
    } catch (err) {
      parts.log.warn({ err }, 'replay read failed')
      port.send(errorFrame('store_unavailable', `Replay stopped at seq ${cursor}: the event store did not answer`))
      break
    }
    if (page.length === 0 || !audience.has(port)) break
    for (const event of page) {
      port.send(audience.render(event, att))
      const wait = port.writable?.() ?? null
      if (wait !== null) await wait
    }
    cursor = (page[page.length - 1] as LogEvent).seq
    if (audience.holder !== att) noticedUpTo = cursor
  }
  // Live frames held during the replay go out the same way; more may be held while it waits.
  const backlog = att.backlog ?? []
  for (let i = 0; i < backlog.length && audience.has(port); i++) {
    const event = backlog[i] as LogEvent
    if (event.seq <= cursor) continue
    port.send(audience.render(event, att))
    const wait = port.writable?.() ?? null
    if (wait !== null) await wait
  }
  att.backlog = null
  return noticedUpTo
}
