// NdjsonSplitter (src/cli/ndjson.ts): how the gateway cuts the CLI's stdout into lines.
// Every test feeds bytes the way a pipe delivers them (arbitrary chunking) and checks
// the lines (and oversize reports) that come out.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { NdjsonSplitter } from '../../src/cli/ndjson.js'

const MiB = 1024 * 1024

interface Run {
  lines: string[]
  oversize: number[]
  /** Order of everything reported: `line:<text>` or `oversize:<bytes>`. */
  log: string[]
}

/** Feeds `chunks` (then end()) through a fresh splitter and collects what it reports. */
function split (chunks: Array<Buffer | string>, maxLineBytes = 16 * MiB, callEnd = true): Run {
  const run: Run = { lines: [], oversize: [], log: [] }
  const splitter = new NdjsonSplitter({
    maxLineBytes,
    onLine: (line) => { run.lines.push(line); run.log.push(`line:${line}`) },
    onOversize: (bytes) => { run.oversize.push(bytes); run.log.push(`oversize:${bytes}`) }
  })
  for (const chunk of chunks) splitter.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk)
  if (callEnd) splitter.end()
  return run
}

/** Cuts `buf` at the given byte offsets (any order, duplicates allowed). */
function cutAt (buf: Buffer, offsets: number[]): Buffer[] {
  const points = [...new Set(offsets.filter((o) => o > 0 && o < buf.length))].sort((a, b) => a - b)
  const out: Buffer[] = []
  let from = 0
  for (const p of [...points, buf.length]) {
    out.push(buf.subarray(from, p))
    from = p
  }
  return out
}

function chunksOf (buf: Buffer, size: number): Buffer[] {
  const out: Buffer[] = []
  for (let i = 0; i < buf.length; i += size) out.push(buf.subarray(i, i + size))
  return out
}

describe('NdjsonSplitter', () => {
  it('joins a line delivered in several chunks', () => {
    const line = JSON.stringify({ type: 'assistant', text: 'split across chunks' })
    const bytes = Buffer.from(line + '\n')
    const run = split(cutAt(bytes, [1, 5, 17, bytes.length - 1]))
    assert.deepEqual(run.lines, [line])
  })

  it('emits nothing for a partial line until its newline arrives', () => {
    const seen: string[] = []
    const splitter = new NdjsonSplitter({ maxLineBytes: 1024, onLine: (l) => seen.push(l), onOversize: () => assert.fail('no oversize expected') })
    splitter.push(Buffer.from('{"a":'))
    splitter.push(Buffer.from('1}'))
    assert.deepEqual(seen, [])
    splitter.push(Buffer.from('\n{"b"'))
    assert.deepEqual(seen, ['{"a":1}'])
  })

  it('emits every line of a chunk holding many, in order', () => {
    const lines = Array.from({ length: 500 }, (_, i) => JSON.stringify({ i, text: `line ${i}` }))
    const run = split([lines.join('\n') + '\n'])
    assert.deepEqual(run.lines, lines)
  })

  it('flushes a final line without newline on end(), and only then', () => {
    const seen: string[] = []
    const splitter = new NdjsonSplitter({ maxLineBytes: 1024, onLine: (l) => seen.push(l), onOversize: () => assert.fail('no oversize expected') })
    splitter.push(Buffer.from('{"first":1}\n{"last":2}'))
    assert.deepEqual(seen, ['{"first":1}'])
    splitter.end()
    assert.deepEqual(seen, ['{"first":1}', '{"last":2}'])
  })

  it('passes a 5 MiB line fed in 64 KiB chunks intact', () => {
    const text = 'abcdefghijklmnopqrstuvwxyz0123456789é✓日本'.repeat(Math.ceil(5 * MiB / 40))
    const line = JSON.stringify({ type: 'assistant', text })
    assert.ok(Buffer.byteLength(line) > 5 * MiB)
    const next = JSON.stringify({ type: 'result' })
    const run = split(chunksOf(Buffer.from(`${line}\n${next}\n`), 64 * 1024))
    assert.equal(run.lines.length, 2)
    assert.equal(run.lines[0], line)
    assert.equal(run.lines[1], next)
    assert.deepEqual(run.oversize, [])
  })

  it('decodes a multi-byte UTF-8 character split across chunks', () => {
    const line = JSON.stringify({ text: 'é ✓ 日本 😀' })
    const bytes = Buffer.from(line + '\n')
    // Cut inside every multi-byte sequence: after each lead byte and each continuation byte.
    const inside: number[] = []
    for (let i = 0; i < bytes.length; i++) if ((bytes[i] as number) >= 0x80) inside.push(i + 1)
    assert.ok(inside.length > 0)
    const run = split(cutAt(bytes, inside))
    assert.deepEqual(run.lines, [line])
    // One byte at a time, too.
    assert.deepEqual(split(chunksOf(bytes, 1)).lines, [line])
  })

  it('does not split a line on raw U+2028 / U+2029', () => {
    const line = '{"text":"before\u2028middle\u2029after"}'
    const run = split([line + '\n'])
    assert.deepEqual(run.lines, [line])
    assert.deepEqual(JSON.parse(run.lines[0] as string), { text: 'before\u2028middle\u2029after' })
  })

  it('drops an over-limit line, reports its byte count, and keeps the following lines', () => {
    const max = 1024
    const before = JSON.stringify({ n: 'before' })
    const big = JSON.stringify({ text: 'x'.repeat(3000) })
    const after = JSON.stringify({ n: 'after' })
    const bytes = Buffer.from(`${before}\n${big}\n${after}\n`)
    const run = split(chunksOf(bytes, 100), max)
    assert.deepEqual(run.log, [`line:${before}`, `oversize:${Buffer.byteLength(big)}`, `line:${after}`])
  })

  it('reports an over-limit line that arrives in one chunk, and one cut off by end()', () => {
    const max = 1024
    const big = 'y'.repeat(max + 1)
    assert.deepEqual(split([`${big}\n{"ok":1}\n`], max).log, [`oversize:${max + 1}`, 'line:{"ok":1}'])
    assert.deepEqual(split([`{"ok":1}\n`, big], max).log, ['line:{"ok":1}', `oversize:${max + 1}`])
  })

  it('accepts a line of exactly the limit and refuses one byte more', () => {
    const max = 2048
    const exact = '"' + 'z'.repeat(max - 2) + '"'
    assert.equal(Buffer.byteLength(exact), max)
    const over = '"' + 'z'.repeat(max - 1) + '"'
    const run = split(chunksOf(Buffer.from(`${exact}\n${over}\n`), 300), max)
    assert.deepEqual(run.log, [`line:${exact}`, `oversize:${max + 1}`])
  })

  it('keeps its own copy of a pending partial line (the caller may reuse its chunk buffer)', () => {
    const seen: string[] = []
    const splitter = new NdjsonSplitter({ maxLineBytes: 1024, onLine: (l) => seen.push(l), onOversize: () => assert.fail('no oversize expected') })
    const buffer = Buffer.alloc(8)
    buffer.write('{"a":"xy')
    splitter.push(buffer)
    buffer.fill('Z') // reused by its owner for the next read
    splitter.push(Buffer.from('z"}\n'))
    assert.deepEqual(seen, ['{"a":"xyz"}'])
  })

  it('tolerates CRLF line endings', () => {
    const run = split(cutAt(Buffer.from('{"a":1}\r\n{"b":2}\r\n{"c":3}\r'), [8, 9, 17]))
    assert.deepEqual(run.lines, ['{"a":1}', '{"b":2}', '{"c":3}'])
  })

  it('skips blank and whitespace-only lines', () => {
    const run = split(['\n\n{"a":1}\n   \n\r\n\t\n{"b":2}\n\n'])
    assert.deepEqual(run.lines, ['{"a":1}', '{"b":2}'])
    assert.deepEqual(run.oversize, [])
  })

  it('property: any JSON lines, joined with \\n and cut anywhere, come out unchanged', () => {
    const jsonLine = fc.oneof(
      fc.string({ unit: 'binary' }).map((s) => JSON.stringify(s)),
      fc.jsonValue().map((v) => JSON.stringify(v)),
      fc.string({ unit: 'grapheme', maxLength: 50 }).map((s) => JSON.stringify({ text: s, sep: '\u2028\u2029' }))
    )
    fc.assert(fc.property(
      fc.array(jsonLine, { maxLength: 30 }),
      fc.boolean(),
      fc.array(fc.nat(), { maxLength: 40 }),
      (lines, trailingNewline, cuts) => {
        const bytes = Buffer.from(lines.join('\n') + (trailingNewline ? '\n' : ''))
        const chunks = cutAt(bytes, cuts.map((c) => bytes.length === 0 ? 0 : c % bytes.length))
        const run = split(chunks)
        assert.deepEqual(run.lines, lines)
        assert.deepEqual(run.oversize, [])
      }
    ), { numRuns: 300 })
  })
})
