/**
 * What has been sent to one client and its connection cannot take yet, held
 * in user space, in order, against one byte budget. Frames go straight to the
 * sink while it has room and nothing waits ahead of them; otherwise they wait
 * here and go out when the owner calls `flush()` on the sink's 'drain'.
 *
 * Kept here rather than in the socket's own buffer so that ending a client can
 * drop them: its close frame or final event is then next in line, behind at
 * most about a high-water mark of bytes, and a client that reads again gets
 * it instead of a cut connection.
 */

export interface Sink<T> {
  /** Writes a chunk now. */
  write: (chunk: T) => void
  /** True while the sink takes more without going past its own mark; false ones end in a 'drain'. */
  room: () => boolean
  /** Bytes given to the sink and not yet handed to the kernel. */
  pending: () => number
}

/**
 * A client holding this little is keeping up: its next frame is queued
 * whatever its size. A CLI line may be larger than the whole budget
 * (MAX_LINE_BYTES above WS_MAX_BUFFERED_BYTES), and such a line must still
 * reach a client that reads.
 */
const KEEPING_UP_BYTES = 64 * 1024

/**
 * How long an ended client's connection may take to deliver its last word
 * (a close frame, an event stream's `end` event) before it is cut. Long enough
 * for a client that stalled (a paused tab, a laptop lid, a debugger) and reads
 * again to get it: only about a high-water mark of bytes waits ahead of it,
 * since ending drops the queue. A peer that never reads again costs only those
 * bytes until then.
 */
export const END_GRACE_MS = 10_000
/** At shutdown the process waits on every connection: a peer not reading then may not hold it long. */
export const SHUTDOWN_END_GRACE_MS = 2000

/** Below this many already-sent entries the array is not compacted (shifting each time is quadratic). */
const COMPACT_AFTER = 1024

export class SendQueue<T extends string | Buffer> {
  readonly maxBytes: number
  readonly #sink: Sink<T>
  readonly #overflow: () => void
  // Allocated when a chunk first has to wait (and dropped once all is out):
  // most clients never fill their socket, and an idle one holds thousands of these.
  #items: Array<T | undefined> | null = null
  #sizes: number[] | null = null
  #head = 0
  #bytes = 0
  #closed = false
  #waiters: Array<() => void> | null = null

  /** `onOverflow` runs (instead of queueing) when a frame would take the client past `maxBytes`. */
  constructor (sink: Sink<T>, maxBytes: number, onOverflow: () => void) {
    this.#sink = sink
    this.maxBytes = maxBytes
    this.#overflow = onOverflow
  }

  /** Bytes waiting here. */
  get queuedBytes (): number { return this.#bytes }

  get closed (): boolean { return this.#closed }

  /** Bytes waiting here and in the sink: what the budget counts. */
  buffered (): number { return this.#bytes + this.#sink.pending() }

  send (chunk: T): void {
    if (this.#closed) return
    if (this.#items === null && this.#sink.room()) {
      this.#sink.write(chunk)
      return
    }
    const size = typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length
    const held = this.buffered()
    if (held > Math.min(KEEPING_UP_BYTES, this.maxBytes) && held + size > this.maxBytes) {
      this.#overflow()
      return
    }
    this.#items ??= []
    this.#sizes ??= []
    this.#items.push(chunk)
    this.#sizes.push(size)
    this.#bytes += size
  }

  /** Writes what waits, in order, while the sink has room; call it on the sink's 'drain'. */
  flush (): void {
    const items = this.#items
    const sizes = this.#sizes
    if (items !== null && sizes !== null) {
      while (!this.#closed && this.#head < items.length && this.#sink.room()) {
        const chunk = items[this.#head] as T
        items[this.#head] = undefined
        this.#bytes -= sizes[this.#head] as number
        this.#head++
        this.#sink.write(chunk)
      }
      this.#compact(items, sizes)
    }
    if (this.#idle()) this.#wake()
  }

  /**
   * Null when nothing waits here and the sink has room; else a promise
   * settled once that holds, or once the queue is closed.
   */
  writable (): Promise<void> | null {
    if (this.#closed || this.#idle()) return null
    return new Promise((resolve) => { (this.#waiters ??= []).push(resolve) })
  }

  /** Drops whatever waits and settles every `writable()`; later sends are dropped. */
  close (): void {
    if (this.#closed) return
    this.#closed = true
    this.#items = null
    this.#sizes = null
    this.#head = 0
    this.#bytes = 0
    this.#wake()
  }

  #idle (): boolean {
    return this.#items === null && this.#sink.room()
  }

  #wake (): void {
    const waiters = this.#waiters
    if (waiters === null) return
    this.#waiters = null
    for (const resolve of waiters) resolve()
  }

  /** Drops the arrays once all is out (an idle client holds none); else trims what was sent once that is most of them. */
  #compact (items: Array<T | undefined>, sizes: number[]): void {
    if (this.#closed) return
    if (this.#head === items.length) {
      this.#items = null
      this.#sizes = null
      this.#head = 0
    } else if (this.#head >= COMPACT_AFTER && this.#head * 2 >= items.length) {
      this.#items = items.slice(this.#head)
      this.#sizes = sizes.slice(this.#head)
      this.#head = 0
    }
  }
}
