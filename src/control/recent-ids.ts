/**
 * A bounded memory of ids already seen: enough to tell a retry or a late
 * duplicate from something new, without growing for ever in a long session.
 * The oldest id is forgotten first.
 */
export class RecentIds {
  readonly #max: number
  readonly #ids = new Set<string>()

  constructor (max: number) {
    this.#max = max
  }

  has (id: string): boolean { return this.#ids.has(id) }

  /** Remembers `id`; true when it was already remembered. */
  seen (id: string): boolean {
    if (this.#ids.has(id)) return true
    this.#ids.add(id)
    if (this.#ids.size > this.#max) this.#ids.delete(this.#ids.values().next().value as string)
    return false
  }
}
