/**
 * Which keys were seen before, bounded: a refusal logged at error level once
 * per key (a record, a sender and a reason) and at debug after, so a store
 * read in a loop cannot flood the log. Past `max` keys it forgets them all
 * (one more error line each, never unbounded memory).
 */
export class FirstSight {
  readonly #seen = new Set<string>()
  readonly #max: number

  constructor (max: number) {
    this.#max = max
  }

  /** True the first time `key` is given (since the last forgetting), false after. */
  first (key: string): boolean {
    if (this.#seen.has(key)) return false
    if (this.#seen.size >= this.#max) this.#seen.clear()
    this.#seen.add(key)
    return true
  }
}
