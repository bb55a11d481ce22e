/**
 * On a node that follows a session another node runs: the CLI control
 * requests its log leaves open (asked, not yet ended), as of what this node
 * has committed. The node running the CLI knows them from its control plane;
 * this node only from the log, so what it learned before it followed the
 * log (it loaded the session after the prompt was asked, or stopped
 * following meanwhile) is read from the store once (`ensure`). A hello here
 * lists them (`pending_requests`), and a client here made holder is sent in
 * full those it may have seen as notices.
 */
import { isRecord } from '../protocol/is-record.js'
import { type EventStore, isFinal } from '../store/store.js'
import { LOST_SCAN_EVENTS } from './unresolved-requests.js'

/** A CLI control request as recorded. */
export interface OpenRequest { seq: number, frame: string }

/**
 * The requests the node running the CLI has pending now (its control plane),
 * for those asked before the scanned part of the log.
 */
export type PendingThere = () => Promise<ReadonlyArray<OpenRequest & { requestId: string }>>

const PAGE = 500
/** Pages of the store scan stay about this size (CLI lines may be MiBs each). */
const PAGE_BYTES = 4 * 1024 * 1024

type Change = { open: string, request: OpenRequest } | { ended: string } | { final: true } | null

export class OpenRequests {
  readonly #open = new Map<string, OpenRequest>()
  /** True while #open holds every request open up to the seqs learned here (read back from the store, or nothing was before). */
  #known = false
  /** Bumped whenever what is known is dropped: a store read begun before does not count. */
  #generation = 0
  /** While the store is read: ids ended in events learned meanwhile ('all' after a CLI's end). */
  #endedMeanwhile: Set<string> | 'all' | null = null
  #reading: Promise<void> | null = null
  /** The highest seq learned: a frame learned twice (a re-read status, a feed overlap) changes nothing. */
  #learnedTo = 0

  /** The requests open now, by request id. */
  get open (): ReadonlyMap<string, OpenRequest> { return this.#open }

  /** True when `open` is complete (no store read needed). */
  get known (): boolean { return this.#known }

  /** A frame of the log, in seq order; `final`: a status frame saying the CLI ended. */
  learn (seq: number, frame: string, final: boolean): void {
    if (seq <= this.#learnedTo) return
    this.#learnedTo = seq
    const change = final ? { final: true as const } : changeOf(frame, seq, false)
    if (change === null) return
    if ('open' in change) {
      this.#open.set(change.open, change.request)
    } else if ('ended' in change) {
      this.#open.delete(change.ended)
      if (this.#endedMeanwhile instanceof Set) this.#endedMeanwhile.add(change.ended)
    } else {
      // The CLI ended: so did every request it asked. Nothing before this can be open.
      this.#open.clear()
      if (this.#endedMeanwhile !== null) this.#endedMeanwhile = 'all'
      this.#known = true
    }
  }

  /**
   * Not followed from here on (or owned here, where the control plane knows):
   * ends of requests may go unseen, so the next `ensure` reads the store again.
   */
  forget (): void {
    this.#open.clear()
    this.#known = false
    this.#generation++
  }

  /**
   * The session ended (its record says so) before this node learned anything
   * of it: nothing is open.
   */
  settled (): void {
    if (this.#reading === null && this.#open.size === 0) this.#known = true
  }

  /**
   * Makes `open` complete up to `to` (what this node committed): the requests
   * the last LOST_SCAN_EVENTS events of the stored log leave open, merged
   * with what was learned while reading. A log longer than that may hold an
   * older prompt still open (output went on meanwhile, a subagent's): those
   * come from `pendingThere` (the owner), when it answers. Rejects when the
   * store does not answer.
   */
  async ensure (store: Pick<EventStore, 'read'>, sessionId: string, to: number, pendingThere?: PendingThere): Promise<void> {
    if (this.#known) return
    this.#reading ??= this.#read(store, sessionId, to, pendingThere).finally(() => { this.#reading = null })
    await this.#reading
  }

  async #read (store: Pick<EventStore, 'read'>, sessionId: string, to: number, pendingThere: PendingThere | undefined): Promise<void> {
    const generation = this.#generation
    this.#endedMeanwhile = new Set()
    try {
      let found = new Map<string, OpenRequest>()
      let after = Math.max(0, to - LOST_SCAN_EVENTS)
      /** The first seq the scan read; what came before is outside it, or trimmed from history. */
      let firstScanned = to + 1
      let ended = false
      while (after < to) {
        const events = await store.read(sessionId, after, PAGE, PAGE_BYTES)
        for (const e of events) {
          if (e.seq > to) break
          after = e.seq
          firstScanned = Math.min(firstScanned, e.seq)
          const change = changeOf(e.frame, e.seq, true)
          if (change !== null && 'final' in change) ended = true
          apply(found, change)
        }
        if (events.length === 0 || (events[events.length - 1]?.seq ?? to) > to) break
      }
      // Pending there now and asked before the scan: open at `to` too (unless ended since, learned meanwhile).
      if (!ended && firstScanned > 1 && to > 0 && pendingThere !== undefined) {
        const older = new Map<string, OpenRequest>()
        for (const p of await pendingThere()) if (p.seq < firstScanned) older.set(p.requestId, { seq: p.seq, frame: p.frame })
        if (older.size > 0) found = new Map([...older, ...found])
      }
      if (generation !== this.#generation) return
      const meanwhile = this.#endedMeanwhile as Set<string> | 'all'
      // Learned meanwhile: requests asked after `to` (kept), and ends of those found (dropped).
      for (const [id, request] of this.#open) if (request.seq <= to) this.#open.delete(id)
      if (meanwhile !== 'all') {
        for (const [id, request] of found) if (!meanwhile.has(id) && !this.#open.has(id)) this.#open.set(id, request)
      }
      this.#learnedTo = Math.max(this.#learnedTo, to)
      this.#known = true
    } finally {
      // One read at a time (#reading).
      this.#endedMeanwhile = null
    }
  }
}

function apply (open: Map<string, OpenRequest>, change: Change): void {
  if (change === null) return
  if ('open' in change) open.set(change.open, change.request)
  else if ('ended' in change) open.delete(change.ended)
  else open.clear()
}

/**
 * What the recorded frame at `seq` changes about the open requests (`status`:
 * look for the CLI's end too); parsed only when it may (most frames are not).
 */
function changeOf (frame: string, seq: number, status: boolean): Change {
  if (!frame.includes('"control_') && !frame.includes('_resolved"') && !(status && frame.includes('"status"'))) return null
  let f: unknown
  try { f = JSON.parse(frame) } catch { return null }
  if (!isRecord(f)) return null
  const id = typeof f.request_id === 'string' ? f.request_id : null
  if (f.type === 'control_request' && id !== null) return { open: id, request: { seq, frame } }
  if (f.type === 'control_cancel_request' && id !== null) return { ended: id }
  if (f.type === 'gateway' && (f.subtype === 'permission_resolved' || f.subtype === 'request_resolved') && id !== null) return { ended: id }
  if (f.type === 'gateway' && f.subtype === 'status' && typeof f.status === 'string' && isFinal(f.status as never)) return { final: true }
  return null
}
