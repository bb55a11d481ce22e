/**
 * The bytes a batch's frames are encoded to once (src/session/frame-bytes.ts)
 * are what Redis stores and every WebSocket client receives, so they must be
 * exactly each frame's UTF-8 whatever the text: ASCII, Latin-1, three-byte
 * and four-byte characters, a batch that outgrows its first buffer, a frame
 * that ends right at a buffer's end.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import fc from 'fast-check'
import { type EncodableFrame, encodeFrames } from '../../src/session/frame-bytes.js'
import { spliceSeq, spliceSource } from '../../src/session/frames.js'

/** Characters of every UTF-8 length, weighted towards the plain text CLIs print. */
const char = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('a', '"', '{', '}', ':', ',', ' ', '\\') },
  { weight: 2, arbitrary: fc.integer({ min: 0x80, max: 0xff }).map((c) => String.fromCharCode(c)) },
  { weight: 2, arbitrary: fc.integer({ min: 0x800, max: 0xd7ff }).map((c) => String.fromCharCode(c)) },
  { weight: 1, arbitrary: fc.integer({ min: 0x10000, max: 0x10ffff }).map((c) => String.fromCodePoint(c)) }
)
const text = fc.array(char, { maxLength: 300 }).map((cs) => cs.join(''))

function check (frames: EncodableFrame[]): void {
  encodeFrames(frames)
  for (const f of frames) assert.deepEqual(f.bytes, Buffer.from(f.frame, 'utf8'), `bytes of ${JSON.stringify(f.frame.slice(0, 40))}`)
}

test('each frame of a batch gets exactly its UTF-8 bytes, for any mix of character widths', () => {
  fc.assert(fc.property(fc.array(text, { minLength: 1, maxLength: 40 }), (texts) => {
    check(texts.map((frame, i) => ({ seq: i + 1, frame })))
  }), { numRuns: 2000 })
})

test('frames spliced from CLI lines are written from the line, with the same bytes as the spliced text', () => {
  // Lines as the CLI prints them, any seq size, mixed with frames that have no line.
  const line = text.map((t) => `{"type":"assistant","text":${JSON.stringify(t)}}`)
  fc.assert(fc.property(fc.array(fc.tuple(line, fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }), fc.boolean()), { minLength: 1, maxLength: 40 }), (rows) => {
    check(rows.map(([l, seq, fromLine]) => {
      const source = spliceSource(l)
      assert.equal(source, l, 'a tight line with a key after its brace is a splice source')
      return { seq, frame: spliceSeq(l, seq), line: fromLine ? source : undefined }
    }))
  }), { numRuns: 2000 })
  // Lines a splice would trim or change are not sources.
  for (const l of [' {"a":1}', '{ "a":1}', '{}', '{"a":1} ']) assert.equal(spliceSource(l), undefined, l)
})

test('a batch far from ASCII outgrows its first buffer and stays exact', () => {
  // Three bytes a character against a buffer sized for one and an eighth.
  const frames = Array.from({ length: 50 }, (_v, i) => ({ seq: i + 1, frame: '\u4e2d'.repeat(100 + i) }))
  check(frames)
  const astral = Array.from({ length: 20 }, (_v, i) => ({ seq: i + 1, frame: '\u{1F600}'.repeat(64) }))
  check(astral)
  const lines = Array.from({ length: 50 }, (_v, i) => `{"t":"${'\u4e2d'.repeat(100 + i)}"}`)
  check(lines.map((l, i) => ({ seq: i + 1, frame: spliceSeq(l, i + 1), line: l })))
})

test('frames that end within the last bytes of a buffer are measured, not cut', () => {
  // One ASCII frame fills all but k bytes of the first buffer; the next brings a wide character there.
  for (let k = 0; k <= 8; k++) {
    for (const wide of ['\u00e9', '\u4e2d', '\u{1F600}']) {
      const first = 'x'.repeat(200)
      const second = wide + 'y'.repeat(3)
      // Buffer sized chars + chars/8 + 8: pad the first so the second starts k bytes before its end.
      const chars = first.length + second.length
      const size = chars + (chars >>> 3) + 8
      const frames = [{ seq: 1, frame: first + 'z'.repeat(size - k - first.length) }, { seq: 2, frame: second }]
      check(frames)
      // The same with the second spliced from a line: its prefix, then the line's bytes from there.
      const l = `{"${wide}":1}`
      const spliced = spliceSeq(l, 7)
      const total = first.length + spliced.length
      const size2 = total + (total >>> 3) + 8
      check([{ seq: 1, frame: first + 'z'.repeat(size2 - k - first.length) }, { seq: 7, frame: spliced, line: l }])
    }
  }
})

test('frames that have bytes keep them; an empty batch is a no-op', () => {
  const own = Buffer.from('{"seq":1}')
  const frames: EncodableFrame[] = [{ seq: 1, frame: '{"seq":1}', bytes: own }, { seq: 2, frame: '{"seq":2,"t":"\u00e9"}' }]
  encodeFrames(frames)
  assert.equal(frames[0]?.bytes, own)
  assert.deepEqual(frames[1]?.bytes, Buffer.from('{"seq":2,"t":"\u00e9"}'))
  encodeFrames([])
})
