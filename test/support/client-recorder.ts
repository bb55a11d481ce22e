/**
 * What a typed-client connection (src/client) emits, kept for assertions:
 * its frames, its messages and its errors, with waiting on them (re-checked
 * on every event, including state and role changes). A failed wait says
 * where the connection stood, so a hang reads as more than a timeout.
 */
import type { ConnectionEvents, RecordedFrame, SessionConnection } from '../../src/client/index.js'
import type { Frame } from './frames.js'
import { Waiters } from './waiters.js'

export class ClientRecorder {
  readonly frames: RecordedFrame[] = []
  readonly messages: Frame[] = []
  readonly errors: Array<ConnectionEvents['error']> = []
  readonly #waiters = new Waiters()

  /** `name` prefixes what a failed wait was waiting for (which of several devices). */
  constructor (readonly conn: SessionConnection, readonly name = '') {
    conn.on('frame', (f) => { this.frames.push(f); this.#waiters.wake() })
    conn.on('message', (m) => { this.messages.push(m as Frame); this.#waiters.wake() })
    conn.on('error', (e) => { this.errors.push(e); this.#waiters.wake() })
    conn.on('state', () => this.#waiters.wake())
    conn.on('role', () => this.#waiters.wake())
  }

  /** The gateway's hellos: one per (re)connect. */
  get hellos (): Frame[] { return this.messages.filter((m) => m.type === 'gateway' && m.subtype === 'hello') }

  until<T> (check: () => T | undefined | false, what: string): Promise<T> {
    const c = this.conn
    return this.#waiters.until(check, 15_000, this.name === '' ? what : `${this.name}: ${what}`, () =>
      `state ${c.state}, role ${c.role}, holder ${c.holder}, me ${c.clientId}, lastSeq ${c.lastSeq}, hellos ${JSON.stringify(this.hellos.map((h) => [h.role, h.holder]))}, errors ${JSON.stringify(this.errors.map((e) => e instanceof Error ? String(e) : e))}`)
  }
}
