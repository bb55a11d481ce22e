/**
 * A WebSocket client as a session's `ClientPort`. Sending never waits: frames
 * the socket cannot take yet wait in the client's own queue (SendQueue), and
 * once that queue and the socket's buffer together would pass
 * `maxBufferedBytes` the client is ended with 4008, so it cannot delay anyone
 * else or grow the gateway's memory. It reconnects with `?after=<last seq>`.
 *
 * Ending drops the queue before the close frame, so the frame waits behind at
 * most about FLUSH_BYTES in the socket (and the kernel's buffers): a client
 * that reads again gets the close code, not a cut connection (1006).
 *
 * Frames sent in one tick (a committed batch) leave in one socket write: the
 * socket is corked at the first send and uncorked on the next tick, instead
 * of one writev system call per frame. Same bytes, same order.
 *
 * Without permessage-deflate (the default), frames are built here and written
 * to the socket directly: the frame string (or Buffer) sent to every client
 * of a session (one event) is framed once, not once per client, and a string
 * is encoded straight behind the header. A committed batch (sendFrames) is
 * framed once into one Buffer from the bytes the session encoded for the
 * store as well, and written to each client in one piece. ws writes its own frames
 * (pings, the close frame) to the same socket at once, with nothing held in
 * its Sender while it does not compress, so the order of calls is the order
 * on the wire; its `bufferedAmount` counts what waits in the socket either way.
 *
 * An idle client costs only this object and one 'close' listener: the queue
 * (and its 'drain' listener) is made the first time a frame has to wait.
 */
import { randomUUID } from 'node:crypto'
import type { Socket } from 'node:net'
import type { WebSocket } from 'ws'
import { closeCodes, endCloseCodes } from '../errors.js'
import { END_GRACE_MS, SHUTDOWN_END_GRACE_MS, SendQueue } from '../net/send-queue.js'
import { type RecordedFrame, utf8Bytes } from '../session/audience.js'
import type { ClientPort, EndReason } from '../session/session.js'

/**
 * The socket takes frames directly while less than this waits in it (a
 * corked socket is flushed early once it holds this much); past it frames
 * wait in the queue until the socket drains. Above the socket's 16 KiB
 * high-water mark so a busy tick still leaves in few large writes.
 */
const FLUSH_BYTES = 64 * 1024

/** Frames of a batch that wait in the queue are grouped into pieces of about this size (whole frames; one larger frame alone). */
const QUEUED_PIECE_BYTES = 16 * 1024

const SLOW_CONSUMER = 'slow consumer: reconnect with ?after=<last seq>'
/** RFC 6455 allows 123 bytes of close reason. */
const MAX_CLOSE_REASON_BYTES = 123

export class WsClient implements ClientPort {
  readonly id = randomUUID()
  readonly socket: WebSocket
  readonly maxBufferedBytes: number
  readonly #raw: Socket | null
  /** Frames built here go straight to `#raw` (no extension negotiated: nothing for ws to transform). */
  readonly #framesHere: boolean
  /** Null until a frame first has to wait (see `#queued`). */
  #queue: SendQueue<string | Buffer> | null = null
  #ended = false
  #corked = false

  /**
   * `raw` is the connection's TCP socket, the one the upgrade request came in
   * on and ws writes to (ws has no public accessor for it); with null, frames
   * go through ws.send.
   */
  constructor (socket: WebSocket, raw: Socket | null, maxBufferedBytes: number) {
    this.socket = socket
    this.maxBufferedBytes = maxBufferedBytes
    this.#raw = raw
    this.#framesHere = this.#raw !== null && socket.extensions === ''
    // Registered before the owner's own 'close' listeners: sends are dropped by the time they run.
    socket.on('close', this.#onClose.bind(this))
  }

  /** True once ended by the gateway or closed by the peer: sends are dropped. */
  get ended (): boolean { return this.#ended }

  /** Bytes sent and not yet handed to the kernel: the queue and ws's socket buffer. */
  buffered (): number { return this.#queue === null ? this.socket.bufferedAmount : this.#queue.buffered() }

  send (data: string | Buffer): void {
    if (this.#ended) return
    // Queued as the whole WebSocket frame, so what the budget counts is what the socket will hold.
    const frame = this.#framesHere ? textFrame(data) : data
    if (this.#queue === null && this.#room()) this.#write(frame)
    else this.#queued().send(frame)
  }

  /**
   * ClientPort.sendFrames: the batch framed once into one Buffer for all its
   * clients, written in as few pieces as the socket takes: whole frames while
   * less than FLUSH_BYTES waits in it, as `send` would one by one; the rest
   * waits in the queue in pieces of whole frames, so that ending the client
   * still drops all but about FLUSH_BYTES ahead of its close frame.
   */
  sendFrames (frames: readonly RecordedFrame[]): void {
    if (this.#ended) return
    if (!this.#framesHere) {
      for (const f of frames) this.send(f.frame)
      return
    }
    const batch = batchFrames(frames)
    const { buf, ends } = batch
    let from = 0
    let i = 0
    while (i < ends.length && this.#queue === null && this.#room()) {
      const raw = this.#raw as Socket
      let waiting = raw.destroyed ? 0 : raw.writableLength
      const start = from
      while (i < ends.length && waiting < FLUSH_BYTES) {
        const end = ends[i++] as number
        waiting += end - from
        from = end
      }
      this.#write(start === 0 && from === buf.length ? buf : buf.subarray(start, from))
    }
    if (i === ends.length) return
    const queue = this.#queued()
    while (i < ends.length) {
      const start = from
      do {
        from = ends[i++] as number
      } while (i < ends.length && (ends[i] as number) - start <= QUEUED_PIECE_BYTES)
      queue.send(buf.subarray(start, from))
    }
  }

  /** Null while frames go straight to the socket; else settles once the queue is out and the socket has room (or the client ended). */
  writable (): Promise<void> | null {
    if (this.#ended) return null
    if (this.#queue === null && this.#room()) return null
    return this.#queued().writable()
  }

  /** Ends the connection with the close code for `reason` (errors.ts `endCloseCodes`). No-op once ended. */
  end (reason: EndReason, message: string): void {
    this.close(endCloseCodes[reason], message)
  }

  /**
   * Closes with any code (4029 flood, 1011): drops what is still queued so the
   * close frame goes next, and cuts the socket if the handshake does not
   * complete within a grace. No-op once ended.
   */
  close (code: number, message: string): void {
    if (this.#ended) return
    this.#ended = true
    this.#queue?.close()
    this.socket.close(code, closeReason(message))
    const grace = code === closeCodes.serviceRestart ? SHUTDOWN_END_GRACE_MS : END_GRACE_MS
    const timer = setTimeout(() => this.socket.terminate(), grace)
    timer.unref()
    this.socket.once('close', () => clearTimeout(timer))
  }

  #onClose (): void {
    this.#ended = true
    this.#queue?.close()
  }

  /** True while the socket takes frames directly (always without a net.Socket: ws buffers then). */
  #room (): boolean {
    const raw = this.#raw
    return raw === null || raw.destroyed || raw.writableLength < FLUSH_BYTES
  }

  /** The queue, made on first use: from then on every frame goes through it, so none overtakes one waiting. */
  #queued (): SendQueue<string | Buffer> {
    if (this.#queue !== null) return this.#queue
    const queue = new SendQueue<string | Buffer>({
      write: (chunk) => this.#write(chunk),
      room: () => this.#room(),
      pending: () => this.socket.bufferedAmount
    }, this.maxBufferedBytes, () => this.end('slow_consumer', SLOW_CONSUMER))
    this.#queue = queue
    this.#raw?.on('drain', () => queue.flush())
    return queue
  }

  #write (data: string | Buffer): void {
    const raw = this.#cork()
    if (this.#framesHere) {
      // As ws.send: nothing goes out once the socket is closing (ws drops such sends too).
      if (raw !== null && this.socket.readyState === OPEN) raw.write(data)
    } else {
      this.socket.send(data, { binary: false })
    }
    // Large batches go out in slices, so what waits in user space stays small.
    if (raw !== null && raw.writableLength >= FLUSH_BYTES) {
      raw.uncork()
      raw.cork()
    }
  }

  /** Corks the socket until the next tick (once per tick); the corked socket, or null. */
  #cork (): Socket | null {
    const raw = this.#raw
    if (raw === null || raw.destroyed) return null
    if (this.#corked) return raw
    this.#corked = true
    raw.cork()
    process.nextTick(() => {
      this.#corked = false
      raw.uncork()
    })
    return raw
  }
}

const OPEN = 1

/**
 * The last payload framed and its frame: a broadcast sends the same frame
 * (one string, or one Buffer) to each client of the session in turn, so all
 * but the first find it here.
 */
let lastPayload: string | Buffer | null = null
let lastFrame: Buffer = Buffer.alloc(0)

/** A batch's frames back to back, and where each ends in `buf`. */
interface FramedBatch {
  buf: Buffer
  ends: number[]
}

/**
 * The last batch framed and its frames, as for single payloads above; only
 * until the microtask after it was framed. A broadcast hands the batch to
 * all its clients synchronously, so none is missed, and the batch's events
 * and framed bytes are not kept alive after it: kept until the next batch of
 * any session, they stayed for as long as the node then went quiet
 * (docs/PERFORMANCE.md §18).
 */
let lastBatch: readonly RecordedFrame[] | null = null
let lastFramed: FramedBatch = { buf: Buffer.alloc(0), ends: [] }
const NO_BATCH: FramedBatch = lastFramed
function forgetBatch (): void {
  lastBatch = null
  lastFramed = NO_BATCH
}

/** Bytes of the header of an unmasked frame of `length` payload bytes (RFC 6455 5.2). */
function headerBytes (length: number): number {
  return length < 126 ? 2 : length < 65536 ? 4 : 10
}

/** Writes the header of a FIN text frame of `length` payload bytes at `at`; returns where the payload goes. */
function writeHeader (frame: Buffer, at: number, length: number): number {
  frame[at] = 0x81
  if (length < 126) {
    frame[at + 1] = length
    return at + 2
  }
  if (length < 65536) {
    frame[at + 1] = 126
    frame[at + 2] = length >>> 8
    frame[at + 3] = length & 0xff
    return at + 4
  }
  frame[at + 1] = 127
  frame.writeUInt32BE(Math.floor(length / 2 ** 32), at + 2)
  frame.writeUInt32BE(length >>> 0, at + 6)
  return at + 10
}

/**
 * A complete server text frame in one Buffer (one entry in the send queue):
 * FIN + text opcode, a 7-bit, 16-bit or 64-bit length, unmasked, then the
 * payload, a string encoded straight into place.
 */
function textFrame (data: string | Buffer): Buffer {
  if (data === lastPayload) return lastFrame
  const length = typeof data === 'string' ? Buffer.byteLength(data) : data.length
  const frame = Buffer.allocUnsafe(headerBytes(length) + length)
  const at = writeHeader(frame, 0, length)
  if (typeof data === 'string') frame.write(data, at, 'utf8')
  else data.copy(frame, at)
  lastPayload = data
  lastFrame = frame
  return frame
}

/**
 * A batch's frames back to back in one Buffer, each from its bytes (its text
 * encoded when it has none): one allocation and one socket write per batch
 * and client, the frames copied once for all the batch's clients.
 */
function batchFrames (frames: readonly RecordedFrame[]): FramedBatch {
  if (frames === lastBatch) return lastFramed
  let total = 0
  for (const f of frames) {
    const length = utf8Bytes(f)
    total += headerBytes(length) + length
  }
  const buf = Buffer.allocUnsafe(total)
  const ends: number[] = new Array(frames.length)
  let at = 0
  for (let i = 0; i < frames.length; i++) {
    const f = frames[i] as RecordedFrame
    if (f.bytes !== undefined) {
      at = writeHeader(buf, at, f.bytes.length)
      at += f.bytes.copy(buf, at)
    } else {
      const length = Buffer.byteLength(f.frame)
      at = writeHeader(buf, at, length)
      at += buf.write(f.frame, at, 'utf8')
    }
    ends[i] = at
  }
  if (lastBatch === null) queueMicrotask(forgetBatch)
  lastBatch = frames
  lastFramed = { buf, ends }
  return lastFramed
}

/** `message` cut to what a close frame may carry, on a character boundary. */
function closeReason (message: string): string {
  if (Buffer.byteLength(message) <= MAX_CLOSE_REASON_BYTES) return message
  let cut = ''
  for (const char of message) {
    if (Buffer.byteLength(cut + char) > MAX_CLOSE_REASON_BYTES) break
    cut += char
  }
  return cut
}
