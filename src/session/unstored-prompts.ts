/**
 * The CLI control requests asked or ended at seqs not yet committed (recorded,
 * waiting for the store's append). A hello states the prompts pending as of
 * the seq committed when its client attached (its `last_seq`), the point its
 * replay stops at; the control plane knows only those pending now, which
 * differ by exactly these changes: a prompt answered a moment ago is still
 * open in that replay, and one asked a moment ago reaches the client live.
 */

/** A pending request as the control plane lists it: its id and the seq it was recorded at. */
export interface AskedAt {
  requestId: string
  seq: number
}

interface Change { requestId: string, seq: number, asked: boolean }

export class UnstoredPrompts {
  /** In seq order; null while empty: most sessions never have a prompt (issue 14: memory per idle session). */
  #changes: Change[] | null = null

  /** A request was recorded at `seq`. */
  asked (requestId: string, seq: number): void {
    (this.#changes ??= []).push({ requestId, seq, asked: true })
  }

  /** A request's end (its `permission_resolved` or `request_resolved` record) was recorded at `seq`. */
  ended (requestId: string, seq: number): void {
    (this.#changes ??= []).push({ requestId, seq, asked: false })
  }

  /** Seqs up to `seq` are committed: their changes are in what a replay reads. */
  committed (seq: number): void {
    const changes = this.#changes
    if (changes === null) return
    let i = 0
    while (i < changes.length && (changes[i] as Change).seq <= seq) i++
    if (i === changes.length) this.#changes = null
    else if (i > 0) changes.splice(0, i)
  }

  /**
   * The request ids open as of `upTo` (the seq committed now), given those
   * `pendingNow`: the pending ones asked by then, and those asked by then
   * whose end is recorded after it.
   */
  openAsOf (upTo: number, pendingNow: readonly AskedAt[]): string[] {
    const ids = pendingNow.filter((p) => p.seq <= upTo).map((p) => p.requestId)
    const changes = this.#changes
    if (changes === null) return ids
    const askedLater = new Set(changes.filter((c) => c.asked && c.seq > upTo).map((c) => c.requestId))
    for (const c of changes) {
      if (!c.asked && c.seq > upTo && !askedLater.has(c.requestId) && !ids.includes(c.requestId)) ids.push(c.requestId)
    }
    return ids
  }
}
