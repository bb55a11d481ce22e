/**
 * Encodes a batch of frames to UTF-8 once, for every consumer of the batch
 * (issue 14: "each frame is encoded to bytes once and those bytes serve the
 * store and every client"). The Redis store sends these bytes as the
 * stream's values and WebSocket clients copy them behind their frame headers,
 * instead of each encoding the string again (and first measuring its UTF-8
 * length, a scan of its own).
 *
 * A batch is written into one buffer, each frame's bytes a view of it: one
 * allocation per batch rather than one per frame, and no length scan either.
 * The buffer is sized for the frames' characters plus an eighth; a frame that
 * may not have fit (an encode that stopped within 3 bytes of the end, where a
 * character that did not fit would leave it) is measured and, if need be,
 * written to a fresh buffer for the rest of the batch.
 *
 * A frame spliced from a CLI line (`{"seq":n,` + the line after its `{`,
 * frames.ts) is written from the line itself, the seq prefix then written
 * over the line's `{`: the spliced string is never flattened, which cost
 * more than encoding it.
 */

import { seqPrefix } from './frames.js'

/** A frame and, once encoded, its UTF-8 bytes. */
export interface EncodableFrame {
  readonly seq: number
  readonly frame: string
  /** When set, `frame` is `{"seq":<seq>,` + this line after its first character (`{`). */
  readonly line?: string | undefined
  bytes?: Buffer | undefined
}

/** Sets `bytes` on each frame that has none: views of one shared buffer (or a few, for text far from ASCII). */
export function encodeFrames (frames: readonly EncodableFrame[]): void {
  let chars = 0
  let todo = 0
  for (const f of frames) {
    if (f.bytes !== undefined) continue
    chars += f.frame.length
    todo++
  }
  if (todo === 0) return
  let slab = Buffer.allocUnsafe(chars + (chars >>> 3) + 8)
  let at = 0
  for (const f of frames) {
    if (f.bytes !== undefined) continue
    chars -= f.frame.length
    let n = encodeInto(slab, at, f)
    if (n < 0) {
      slab = Buffer.allocUnsafe(byteLength(f) + chars + (chars >>> 3) + 8)
      at = 0
      n = encodeInto(slab, 0, f)
    }
    f.bytes = slab.subarray(at, at + n)
    at += n
  }
}

/** Writes the frame's UTF-8 at `at`; its length, or -1 when it may not have fit. */
function encodeInto (slab: Buffer, at: number, f: EncodableFrame): number {
  if (f.line === undefined) {
    const room = slab.length - at
    const n = slab.write(f.frame, at, room, 'utf8')
    // Fewer than 4 bytes left unwritten: a character may have been cut off at the end.
    return n > room - 4 && Buffer.byteLength(f.frame) > n ? -1 : n
  }
  const prefix = seqPrefix(f.seq)
  // The line's `{` lands under the prefix's last character, which overwrites it.
  const skip = prefix.length - 1
  const room = slab.length - at - skip
  if (room <= 0) return -1
  const n = slab.write(f.line, at + skip, room, 'utf8')
  if (n > room - 4 && Buffer.byteLength(f.line) > n) return -1
  slab.write(prefix, at, 'latin1')
  return skip + n
}

function byteLength (f: EncodableFrame): number {
  return f.line === undefined ? Buffer.byteLength(f.frame) : Buffer.byteLength(f.line) + seqPrefix(f.seq).length - 1
}
