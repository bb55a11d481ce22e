/**
 * The webhook outbox of the memory store. One process is one node here, so
 * nothing kept in it outlives the process that would send it: it exists so
 * the webhook module has one code path, and so the store contract suite can
 * hold it to the same rules as the Redis one (redis-outbox.ts).
 *
 * A node whose entries are all removed leaves the list at once; the Redis
 * outbox keeps it listed until it is taken over, which the contract allows.
 */
import type { OutboxEntry, WebhookOutbox } from './store.js'

export class MemoryOutbox implements WebhookOutbox {
  /** node → id → text, each node's map in the order its entries were kept. */
  readonly #kept = new Map<string, Map<string, string>>()

  async keep (node: string, entry: OutboxEntry): Promise<void> {
    let entries = this.#kept.get(node)
    if (entries === undefined) this.#kept.set(node, entries = new Map())
    entries.set(entry.id, entry.text)
  }

  async remove (node: string, ids: readonly string[]): Promise<void> {
    const entries = this.#kept.get(node)
    if (entries === undefined) return
    for (const id of ids) entries.delete(id)
    if (entries.size === 0) this.#kept.delete(node)
  }

  async nodes (): Promise<string[]> {
    return [...this.#kept.keys()]
  }

  /**
   * All at once, synchronous inside: nothing can run between the read and
   * the move, so of two takeOvers of one node one gets everything. The
   * contract also allows a split (the Redis outbox moves in chunks); a map
   * in memory never holds anything else up for long enough to need one.
   */
  async takeOver (from: string, to: string): Promise<OutboxEntry[]> {
    const entries = this.#kept.get(from)
    if (entries === undefined) return []
    const taken = [...entries].map(([id, text]) => ({ id, text }))
    if (from === to) return taken
    this.#kept.delete(from)
    let into = this.#kept.get(to)
    if (into === undefined) this.#kept.set(to, into = new Map())
    for (const [id, text] of entries) into.set(id, text)
    return taken
  }
}
