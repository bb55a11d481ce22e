/**
 * A bounded memory of ids already seen: enough to tell a retry or a late
 * duplicate from something new, without growing for ever in a long session.
 * The oldest id is forgotten first.
 */
export class RecentIds {
  readonly #max: number
  /** Made on first use: most sessions never see an id of some kinds (issue 14: memory per idle session). */
  #ids: Set<string> | null = null

  constructor (max: number) {
    this.#max = max
  }

  has (id: string): boolean { return this.#ids?.has(id) ?? false }

  /** Remembers `id`; true when it was already remembered. */
  seen (id: string): boolean {
    const ids = this.#ids ??= new Set()
    if (ids.has(id)) return true
    ids.add(id)
    if (ids.size > this.#max) ids.delete(ids.values().next().value as string)
    return false
  }
}
