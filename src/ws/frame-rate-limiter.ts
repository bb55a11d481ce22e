/**
 * Token bucket for frames from one WebSocket client: `perSecond` sustained,
 * bursts of twice that. A frame over the limit is dropped (the client is
 * told); a client that keeps going after many drops is a flood and is closed.
 */
export type Verdict = 'ok' | 'dropped' | 'flood'

export class FrameRateLimiter {
  readonly #rate: number
  readonly #capacity: number
  readonly #now: () => number
  #tokens: number
  #last: number
  #drops = 0

  constructor (perSecond: number, now: () => number = Date.now) {
    this.#rate = perSecond
    this.#capacity = perSecond * 2
    this.#tokens = this.#capacity
    this.#now = now
    this.#last = now()
  }

  take (): Verdict {
    const now = this.#now()
    this.#tokens = Math.min(this.#capacity, this.#tokens + ((now - this.#last) / 1000) * this.#rate)
    this.#last = now
    if (this.#tokens >= 1) {
      this.#tokens -= 1
      this.#drops = Math.max(0, this.#drops - 1)
      return 'ok'
    }
    this.#drops++
    return this.#drops > this.#capacity * 5 ? 'flood' : 'dropped'
  }
}
