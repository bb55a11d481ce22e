/**
 * Never trust the webhook outbox either: a decorator over any WebhookOutbox
 * that signs every entry it keeps and checks every entry it takes over. What
 * a node takes over it sends, signed with WEBHOOK_SECRET, to the operator's
 * receiver: without a MAC, anyone who can write Redis could have the
 * gateway sign and post an event of their making.
 *
 * The stored text is the seal, then the webhook module's text:
 *
 *     cgwo1 <43 base64url characters>\n<text>
 *
 * The seal is HMAC-SHA256, keyed from the store secret, over the entry's id
 * and its text: an entry changed, or copied under another id (one event
 * sent again under a Webhook-Id receivers have not seen), fails. The node it is kept under is not covered:
 * entries move from node to node (takeOver) as they should.
 *
 * An entry that fails is dropped: left out of what takeOver returns, removed
 * from the store (it would fail again at every takeover), and logged at
 * error level once per entry and reason (debug after). Unsigned entries are
 * refused even with STORE_ACCEPT_UNSIGNED: that is for data an older version
 * wrote before it was signed, and no version kept an outbox unsigned.
 */
import { createHmac, timingSafeEqual } from 'node:crypto'
import type { Logger } from 'pino'
import type { OutboxEntry, WebhookOutbox } from './store.js'
import { FirstSight } from '../util/first-sight.js'

export interface SignedOutboxOptions {
  /** The store secret (STORE_SECRET); the sealing key is derived from it. */
  secret: string
  logger: Logger
  /** Each entry refused at a takeover, with why. */
  onRefused?: ((why: OutboxRefusal) => void) | undefined
}

/** Why an entry taken over was dropped. */
export type OutboxRefusal = 'unsigned' | 'mac'

const DOMAIN = 'cgw-webhook-outbox-v1'
const TAG = 'cgwo1 '
const MAC_LENGTH = 43
/** Characters of the seal before the text. */
const SEAL_LENGTH = TAG.length + MAC_LENGTH + 1
/** Refusals already logged at error level. */
const REPORTED_MAX = 10_000

export class SignedOutbox implements WebhookOutbox {
  readonly #inner: WebhookOutbox
  readonly #key: Buffer
  readonly #logger: Logger
  readonly #onRefused: (why: OutboxRefusal) => void
  readonly #reported = new FirstSight(REPORTED_MAX)

  constructor (inner: WebhookOutbox, options: SignedOutboxOptions) {
    this.#inner = inner
    this.#key = createHmac('sha256', options.secret).update(DOMAIN).digest()
    this.#logger = options.logger
    this.#onRefused = options.onRefused ?? (() => {})
  }

  /** Keeps `entry` with its text sealed to its id. */
  async keep (node: string, entry: OutboxEntry): Promise<void> {
    await this.#inner.keep(node, { id: entry.id, text: `${TAG}${this.#mac(entry.id, entry.text)}\n${entry.text}` })
  }

  remove (node: string, ids: readonly string[]): Promise<void> { return this.#inner.remove(node, ids) }
  nodes (): Promise<string[]> { return this.#inner.nodes() }

  /** The entries whose seal holds, their texts as kept; the others are dropped (removed from `to`, logged). */
  async takeOver (from: string, to: string): Promise<OutboxEntry[]> {
    const good: OutboxEntry[] = []
    const refused: string[] = []
    for (const entry of await this.#inner.takeOver(from, to)) {
      const opened = this.#open(entry)
      if (typeof opened === 'string') good.push({ id: entry.id, text: opened })
      else {
        refused.push(entry.id)
        this.#refuse(entry, from, opened.why)
      }
    }
    if (refused.length > 0) {
      // The good entries are taken already: failing here would leave them kept but unsent.
      await this.#inner.remove(to, refused).catch((err: unknown) => {
        this.#logger.warn({ err: (err as Error).message, deliveries: refused.length }, 'webhook outbox entries refused could not be removed; they are refused again at the next takeover')
      })
    }
    return good
  }

  /** The text as it was kept, or why it cannot be trusted. */
  #open (entry: OutboxEntry): string | { why: OutboxRefusal } {
    const stored = entry.text
    if (stored.length < SEAL_LENGTH || !stored.startsWith(TAG) || stored[SEAL_LENGTH - 1] !== '\n') return { why: 'unsigned' }
    const text = stored.slice(SEAL_LENGTH)
    const given = Buffer.from(stored.slice(TAG.length, TAG.length + MAC_LENGTH))
    const expected = Buffer.from(this.#mac(entry.id, text))
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { why: 'mac' }
    return text
  }

  /** Logs a refusal at error level once per entry and reason, at debug after. No text: it may hold a session's content. */
  #refuse (entry: OutboxEntry, from: string, why: OutboxRefusal): void {
    this.#onRefused(why)
    this.#logger[this.#reported.first(`${entry.id}\0${why}`) ? 'error' : 'debug']({ delivery: entry.id, from, reason: why, bytes: Buffer.byteLength(entry.text) },
      'webhook outbox entry refused: not sealed by a node sharing STORE_SECRET, altered, or kept under another id; dropped unsent')
  }

  /** The id goes in JSON-quoted, so no id and text can be read as another split of the same bytes. */
  #mac (id: string, text: string): string {
    return createHmac('sha256', this.#key).update(`${JSON.stringify(id)}\n`).update(text).digest('base64url')
  }
}
