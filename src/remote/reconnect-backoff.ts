/**
 * How long claude-remote waits before reopening a dropped connection. One
 * gateway restart cuts off every claude-remote at once: with a fixed
 * doubling they would all come back in the same instant, again and again.
 * So each wait is drawn at random up to its step (full jitter, the typed
 * client's backoffDelay with jitter 1): 0.1 s doubling to 5 s.
 */
import { backoffDelay, backoffSettings } from '../client/backoff.js'

const SETTINGS = backoffSettings({ initialMs: 100, maxMs: 5_000, factor: 2, jitter: 1 })

export class ReconnectBackoff {
  readonly #random: () => number
  #attempt = 0
  /** A wait the gateway asked for (hello `retry_after_ms`), added to the next draw. */
  #floor = 0

  /** @param random a source of [0, 1) like Math.random (injected by tests). */
  constructor (random: () => number = Math.random) {
    this.#random = random
  }

  /** The wait before the next attempt, ms; each call is one more attempt. */
  next (): number {
    const wait = this.#floor + backoffDelay(this.#attempt++, SETTINGS, this.#random)
    this.#floor = 0
    return wait
  }

  /** The gateway said when to come back (`retry_after_ms`): at least that long, capped at the largest step. */
  atLeast (ms: number): void {
    this.#floor = Math.min(SETTINGS.maxMs, Math.max(0, ms))
  }

  /** A hello arrived: the next drop starts again from the first step. */
  reset (): void {
    this.#attempt = 0
    this.#floor = 0
  }
}
