/**
 * Never trust a node inbox either: a decorator over any NodeBus that signs
 * every message it sends and checks every message it receives. The inboxes
 * live in the store, and what they carry acts on sessions: a routed client
 * frame (a prompt, a permission answer, with the client's role), a call
 * (answer, stop, create a session for a tenant). Without a MAC, anyone who
 * can write Redis could post them as if a node had.
 *
 * A message is a JSON object (the router's). The signature rides in it as a
 * first member, `"$": "<sender>.<seq>.<time>.<mac>"`, so a node of an older
 * version still reads a signed message (it ignores the member) and a rolling
 * upgrade keeps routing; the receiver strips the member and hands on the
 * exact text that was signed.
 *
 * The MAC (HMAC-SHA256 with a key derived from the store secret) covers the
 * inbox it was sent to, the sender, seq and time, and the text: a message is
 * refused in another inbox, changed, or out of its time (more than
 * `maxAgeMs` from the receiver's clock either way). `sender` is random per
 * bus instance and `seq` counts its messages, so a copy of a message the
 * receiver already had (replayed within its time, or sent twice by a
 * reconnecting client) is dropped as well. A receiver that restarts forgets
 * which seqs it had: a copy of a message to its earlier self, taken within
 * `maxAgeMs`, is delivered once more.
 *
 * Messages without a signature (a node of an older version) are refused
 * unless `acceptUnsigned` (STORE_ACCEPT_UNSIGNED, for the rolling
 * upgrade); every refusal is logged (once per sender and reason at error
 * level) and reported to `onRefused`.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import type { Logger } from 'pino'
import type { NodeBus } from './store.js'
import { FirstSight } from '../util/first-sight.js'

/** Why a received message was not delivered (the label of `cgw_node_bus_refused_total`). */
export type BusRefusal = 'unsigned' | 'mac' | 'stale' | 'replay'
export const BUS_REFUSALS: readonly BusRefusal[] = ['unsigned', 'mac', 'stale', 'replay']

export interface SignedBusOptions {
  /** The store secret (STORE_SECRET); the signing key is derived from it. */
  secret: string
  logger: Logger
  /** Deliver messages that carry no signature (a node of an older version): the first logged at warn, the rest at debug. Default false. */
  acceptUnsigned?: boolean | undefined
  /** How far a message's time may be from the receiver's clock (either way). Default 120000. */
  maxAgeMs?: number | undefined
  /** Each message not delivered, with why. */
  onRefused?: ((why: BusRefusal) => void) | undefined
  /** The clock (tests). */
  now?: (() => number) | undefined
}

const DOMAIN = 'cgw-node-bus-v1'
const PREFIX = '{"$":"'
const DEFAULT_MAX_AGE_MS = 120_000
/** Seqs below a sender's highest by more than this are refused as replays (copies arrive close to their original). */
const WINDOW = 4096
/** Refusals already logged at error level. */
const REPORTED_MAX = 1000
const HEADER = /^([A-Za-z0-9_-]{16})\.([1-9][0-9]{0,15})\.([0-9]{1,16})\.([A-Za-z0-9_-]{43})$/

/** What a receiver remembers of one sender: the seqs it delivered within the window. */
interface SenderState { highest: number, seen: Set<number>, lastHeard: number }

export class SignedBus implements NodeBus {
  readonly #inner: NodeBus
  readonly #key: Buffer
  readonly #o: SignedBusOptions
  readonly #maxAgeMs: number
  readonly #now: () => number
  readonly #sender = randomBytes(12).toString('base64url')
  #seq = 0
  readonly #senders = new Map<string, SenderState>()
  #lastPrune = 0
  readonly #reported = new FirstSight(REPORTED_MAX)

  constructor (inner: NodeBus, options: SignedBusOptions) {
    this.#inner = inner
    this.#o = options
    this.#key = createHmac('sha256', options.secret).update(DOMAIN).digest()
    this.#maxAgeMs = options.maxAgeMs ?? DEFAULT_MAX_AGE_MS
    this.#now = options.now ?? Date.now
  }

  async start (node: string, onMessage: (message: string) => void): Promise<void> {
    await this.#inner.start(node, (text) => {
      const message = this.#open(node, text)
      if (message !== null) onMessage(message)
    })
  }

  /** Sends `message`, a JSON object's text, signed for `node`'s inbox. */
  async send (node: string, message: string): Promise<void> {
    if (!message.startsWith('{')) throw new TypeError('a node bus message must be a JSON object')
    const header = `${this.#sender}.${++this.#seq}.${Math.round(this.#now())}`
    const mac = this.#mac(node, header, message)
    const rest = message.slice(1)
    await this.#inner.send(node, `${PREFIX}${header}.${mac}"${rest.startsWith('}') ? '' : ','}${rest}`)
  }

  close (): Promise<void> { return this.#inner.close() }

  /** The message as it was signed, or null (refused, logged and counted). */
  #open (node: string, text: string): string | null {
    if (!text.startsWith(PREFIX)) {
      if (this.#o.acceptUnsigned === true) {
        // Once at warn, then at debug: an upgrade's old nodes send several a second (heartbeats).
        this.#o.logger[this.#reported.first('\0accepted unsigned') ? 'warn' : 'debug']({ preview: text.slice(0, 80) }, 'unsigned node bus message delivered (STORE_ACCEPT_UNSIGNED): turn it off once every node signs')
        return text
      }
      return this.#refuse('unsigned', 'unknown', text)
    }
    const end = text.indexOf('"', PREFIX.length)
    const match = end < 0 ? null : HEADER.exec(text.slice(PREFIX.length, end))
    const after = text[end + 1]
    if (match === null || (after !== ',' && after !== '}')) return this.#refuse('mac', 'unknown', text)
    const [, sender = '', seqText = '', timeText = '', mac = ''] = match
    const message = `{${text.slice(after === ',' ? end + 2 : end + 1)}`
    const expected = Buffer.from(this.#mac(node, `${sender}.${seqText}.${timeText}`, message))
    const given = Buffer.from(mac)
    if (!timingSafeEqual(given, expected)) return this.#refuse('mac', sender, text)
    const now = this.#now()
    if (Math.abs(now - Number(timeText)) > this.#maxAgeMs) return this.#refuse('stale', sender, text)
    if (!this.#fresh(sender, Number(seqText), now)) return this.#refuse('replay', sender, text)
    return message
  }

  /** True the first time `seq` of `sender` is seen (and notes it); false for a copy or one too far behind. */
  #fresh (sender: string, seq: number, now: number): boolean {
    this.#prune(now)
    let state = this.#senders.get(sender)
    if (state === undefined) this.#senders.set(sender, state = { highest: 0, seen: new Set(), lastHeard: now })
    state.lastHeard = now
    if (seq <= state.highest - WINDOW || state.seen.has(seq)) return false
    state.seen.add(seq)
    if (seq > state.highest) state.highest = seq
    if (state.seen.size > 2 * WINDOW) {
      for (const s of state.seen) if (s <= state.highest - WINDOW) state.seen.delete(s)
    }
    return true
  }

  /**
   * Forgets senders not heard from for twice the time window: any copy of
   * their messages is out of its time by then, so nothing it would catch is
   * left to catch.
   */
  #prune (now: number): void {
    if (now - this.#lastPrune < this.#maxAgeMs) return
    this.#lastPrune = now
    for (const [sender, state] of this.#senders) {
      if (now - state.lastHeard > 2 * this.#maxAgeMs) this.#senders.delete(sender)
    }
  }

  #refuse (why: BusRefusal, sender: string, text: string): null {
    this.#o.logger[this.#reported.first(`${sender}\0${why}`) ? 'error' : 'debug']({ reason: why, sender, preview: text.slice(0, 80) }, 'node bus message refused: not signed by a node sharing STORE_SECRET, altered, out of its time, or a copy')
    this.#o.onRefused?.(why)
    return null
  }

  #mac (node: string, header: string, message: string): string {
    return createHmac('sha256', this.#key).update(`${node}\n${header}\n`).update(message).digest('base64url')
  }
}
