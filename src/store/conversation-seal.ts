/**
 * The seal on a stored conversation copy (the CLI's own file, carried to the
 * node that resumes a session): what a resumed CLI reads as its past turns
 * steers the agent, so a copy changed outside the gateway must never reach
 * one. The stored copy is the seal, then the file's bytes:
 *
 *     cgws1 <43 base64url characters>\n<the file>
 *
 * The seal is HMAC-SHA256, keyed from the store secret, over the session id,
 * the file's length and its SHA-256. Saves mid-turn only append, so the
 * SHA-256 of what was stored is kept running per session (`Hash.copy()`):
 * sealing an append costs the new bytes, not the whole file again.
 */
import { type Hash, createHash, createHmac, timingSafeEqual } from 'node:crypto'

const DOMAIN = 'cgw-conversation-v1'
const TAG = 'cgws1 '
/** The seal's size in bytes, before the file's bytes. */
export const SEAL_BYTES = TAG.length + 43 + 1
/** Sessions whose running hash is kept; past it the oldest is forgotten (its next save is whole). */
const KEPT_MAX = 10_000

/** What a stored copy is, once its seal is checked. */
export type Unsealed =
  | { ok: true, data: Buffer }
  | { ok: false, why: 'no seal' | 'seal does not match', data: Buffer }

export class ConversationSeals {
  readonly #key: Buffer
  /** SHA-256 of each session's stored file so far, and its length, as this node last wrote or read it. */
  readonly #running = new Map<string, { hash: Hash, length: number }>()

  constructor (secret: string) {
    this.#key = createHmac('sha256', secret).update(DOMAIN).digest()
  }

  /** The copy to store for a whole save of `data` (seal, then the file), and the file's running hash. */
  whole (sessionId: string, data: Buffer): { copy: Buffer, hash: Hash } {
    const hash = createHash('sha256').update(data)
    this.#running.delete(sessionId)
    return { copy: Buffer.concat([this.#seal(sessionId, data.length, hash), data]), hash }
  }

  /**
   * For an append of `data` at `at` bytes of the file: the new seal, or null
   * when this node does not know the stored file to be `at` bytes long (the
   * caller saves whole).
   */
  appended (sessionId: string, at: number, data: Buffer): { seal: Buffer, hash: Hash } | null {
    const known = this.#running.get(sessionId)
    if (known === undefined || known.length !== at) return null
    const hash = known.hash.copy().update(data)
    return { seal: this.#seal(sessionId, at + data.length, hash), hash }
  }

  /** The store now holds the file of `length` bytes whose running hash is `hash`. */
  stored (sessionId: string, length: number, hash: Hash): void {
    this.#running.delete(sessionId)
    if (this.#running.size >= KEPT_MAX) this.#running.delete(this.#running.keys().next().value as string)
    this.#running.set(sessionId, { hash, length })
  }

  /** Stored copy failed or unknown: the next save of the session is whole. */
  forget (sessionId: string): void { this.#running.delete(sessionId) }

  /** Checks a stored copy; a good one's running hash is kept for the appends that follow. */
  open (sessionId: string, stored: Buffer): Unsealed {
    if (stored.length < SEAL_BYTES || stored.toString('latin1', 0, TAG.length) !== TAG) return { ok: false, why: 'no seal', data: stored }
    const data = stored.subarray(SEAL_BYTES)
    const hash = createHash('sha256').update(data)
    const expected = this.#seal(sessionId, data.length, hash)
    if (!timingSafeEqual(stored.subarray(0, SEAL_BYTES), expected)) return { ok: false, why: 'seal does not match', data }
    this.stored(sessionId, data.length, hash)
    return { ok: true, data }
  }

  #seal (sessionId: string, length: number, hash: Hash): Buffer {
    const mac = createHmac('sha256', this.#key).update(`${sessionId}\n${length}\n`).update(hash.copy().digest()).digest('base64url')
    return Buffer.from(`${TAG}${mac}\n`, 'latin1')
  }
}
