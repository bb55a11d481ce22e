/**
 * Splits a byte stream into NDJSON lines. Only `\n` ends a line: the CLI
 * escapes U+2028/U+2029, and splitting on them (as readline does) would cut
 * valid JSON in two. Bytes are kept as Buffers until a line is complete, so a
 * multi-byte character split across chunks decodes intact, and a line far
 * larger than a pipe buffer is joined once, not re-concatenated per chunk.
 */

export interface NdjsonSplitterOptions {
  /** Lines longer than this (in bytes) are dropped; `onOversize` is told. */
  maxLineBytes: number
  onLine: (line: string) => void
  onOversize: (bytes: number) => void
}

const NEWLINE = 0x0a

export class NdjsonSplitter {
  readonly #options: NdjsonSplitterOptions
  #parts: Buffer[] = []
  #partBytes = 0
  /** True while skipping the rest of an oversize line up to its newline. */
  #skipping = false

  constructor (options: NdjsonSplitterOptions) {
    this.#options = options
  }

  push (chunk: Buffer): void {
    let start = 0
    let nl = chunk.indexOf(NEWLINE, start)
    while (nl !== -1) {
      // A line wholly inside this chunk (the usual case) is decoded from it directly.
      if (this.#partBytes === 0) this.#whole(chunk, start, nl)
      else this.#take(chunk.subarray(start, nl), true)
      start = nl + 1
      nl = chunk.indexOf(NEWLINE, start)
    }
    if (start < chunk.length) this.#take(chunk.subarray(start), false)
  }

  /** Flushes a final line that had no newline (the stream ended). */
  end (): void {
    if (this.#partBytes > 0 || this.#skipping) this.#finish()
  }

  /** The line `chunk[start, end)`, nothing of it held from earlier chunks. */
  #whole (chunk: Buffer, start: number, end: number): void {
    const bytes = end - start
    if (bytes > this.#options.maxLineBytes) { this.#options.onOversize(bytes); return }
    if (bytes > 0) this.#emit(chunk.toString('utf8', start, end))
  }

  #take (piece: Buffer, complete: boolean): void {
    if (!this.#skipping) {
      if (this.#partBytes + piece.length > this.#options.maxLineBytes) {
        this.#skipping = true
        this.#parts = []
      } else if (piece.length > 0) {
        // Copy: the chunk's memory belongs to the stream and may be reused.
        this.#parts.push(complete && this.#parts.length === 0 ? piece : Buffer.from(piece))
      }
    }
    this.#partBytes += piece.length
    if (complete) this.#finish()
  }

  #finish (): void {
    const bytes = this.#partBytes
    const parts = this.#parts
    const skipped = this.#skipping
    this.#parts = []
    this.#partBytes = 0
    this.#skipping = false
    if (skipped) {
      this.#options.onOversize(bytes)
      return
    }
    if (bytes === 0) return
    this.#emit(parts.length === 1 ? (parts[0] as Buffer).toString('utf8') : Buffer.concat(parts, bytes).toString('utf8'))
  }

  #emit (text: string): void {
    const line = text.charCodeAt(text.length - 1) === 13 ? text.slice(0, -1) : text
    if (line.trim() === '') return
    this.#options.onLine(line)
  }
}
