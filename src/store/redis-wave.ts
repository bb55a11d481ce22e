/**
 * A wave of the append gate (append-gate.ts: one session's append, or many
 * merged) as one ready-made EVALSHA of APPEND_SCRIPT, its RESP bytes written
 * here instead of by ioredis.
 *
 * Why: a wave carries 14 arguments per session appending one event (its 5
 * keys, 7 arguments, an id and a frame), so 100 sessions appending a line
 * each make a command of 1,400 arguments, and ioredis frames each one
 * (length scans, string concatenations, a part per piece, then a join):
 * about 5 µs per session, a tenth of the gateway's CPU at 100 sessions ×
 * 100 lines/s. Here the keys of a session are framed once, when the node
 * first appends to it (`respKeys`), and a wave is measured and written into
 * one buffer: a copy per session of its keys and frames, a few bytes for
 * the rest (docs/PERFORMANCE.md §18).
 *
 * On a Cluster a session's chunk goes the same way, routed by one of its
 * keys (its keys share a slot; sessions are not merged there).
 *
 * The command is EVALSHA only. On a Redis that does not hold the script
 * (new, restarted, flushed) it is refused with NOSCRIPT, and the caller
 * sends the wave again through the defined command, which loads it (EVAL).
 */
import { Command } from 'ioredis'

const CRLF = '\r\n'

/** An argument framed once as a RESP bulk string (`respArg`), written as it is: a session's feed channel. */
export class Framed {
  constructor (readonly resp: Buffer) {}
}

/**
 * `texts` framed as RESP bulk strings, back to back: a session's keys, framed
 * once. In a buffer of its own, not a slice of Buffer's shared 8 KiB pool:
 * kept for as long as the node remembers the session, a pooled slice would
 * keep the whole slab alive (about 8 KiB per idle session).
 */
export function respKeys (texts: readonly string[]): Buffer {
  const resp = texts.map((t) => `$${Buffer.byteLength(t)}${CRLF}${t}${CRLF}`).join('')
  const out = Buffer.allocUnsafeSlow(Buffer.byteLength(resp))
  out.write(resp, 0, 'utf8')
  return out
}

/** One argument framed once. */
export function respArg (text: string): Framed {
  return new Framed(respKeys([text]))
}

export type WaveArg = string | number | Buffer | Framed

/**
 * EVALSHA `sha` with the keys given framed (`respKeys`, `numKeys` in all)
 * and then `args`, as one RESP command. `slotKey`: one of its keys as text,
 * by which a Cluster routes it (all its keys lie in that key's slot).
 */
export class WaveCommand extends Command {
  readonly #resp: Buffer
  readonly #slotKey: string | undefined

  constructor (sha: string, numKeys: number, keys: readonly Buffer[], args: readonly WaveArg[], slotKey?: string) {
    super('evalsha', [])
    this.#resp = frame(sha, numKeys, keys, args)
    this.#slotKey = slotKey
  }

  /** What a Cluster computes the command's slot from (the arguments ioredis would scan are framed already). */
  override getKeys (): string[] {
    return this.#slotKey === undefined ? [] : [this.#slotKey]
  }

  /** What ioredis writes to the socket (each time it sends the command, resends after a reconnect included). */
  override toWritable (): Buffer {
    return this.#resp
  }
}

/** Strings shorter than this are measured and copied a character at a time (cheaper than a call into Buffer for a few bytes). */
const SHORT = 32

function frame (sha: string, numKeys: number, keys: readonly Buffer[], args: readonly WaveArg[]): Buffer {
  const head = `*${3 + numKeys + args.length}${CRLF}$7${CRLF}evalsha${CRLF}$${sha.length}${CRLF}${sha}${CRLF}$${String(numKeys).length}${CRLF}${numKeys}${CRLF}`
  let size = head.length
  for (const k of keys) size += k.length
  // Each argument's byte length (-1 for those framed already).
  const lengths: number[] = new Array(args.length)
  for (let i = 0; i < args.length; i++) {
    const a = plain(args[i] as WaveArg)
    let length: number
    if (a instanceof Framed) {
      size += a.resp.length
      lengths[i] = -1
      continue
    }
    if (typeof a === 'number') length = digits(a)
    else if (typeof a !== 'string') length = a.length
    else length = a.length < SHORT && ascii(a) ? a.length : Buffer.byteLength(a)
    lengths[i] = length
    size += 1 + digits(length) + 2 + length + 2
  }
  const out = Buffer.allocUnsafe(size)
  let at = out.write(head, 0, 'latin1')
  for (const k of keys) at += k.copy(out, at)
  for (let i = 0; i < args.length; i++) {
    const a = plain(args[i] as WaveArg)
    const length = lengths[i] as number
    if (length < 0) {
      at += (a as Framed).resp.copy(out, at)
      continue
    }
    out[at++] = 0x24 // $
    at = decimal(out, at, length)
    out[at++] = 0x0d
    out[at++] = 0x0a
    if (typeof a === 'number') at = decimal(out, at, a)
    else if (typeof a !== 'string') at += (a as Buffer).copy(out, at)
    else if (length === a.length && length < SHORT) at = latin1(out, at, a)
    else at += out.write(a, at, 'utf8')
    out[at++] = 0x0d
    out[at++] = 0x0a
  }
  return out
}

/** Numbers other than non-negative safe integers (written digit by digit here) as their text, as ioredis writes them (integers past 2^53 in full). */
function plain (a: WaveArg): WaveArg {
  if (typeof a !== 'number' || (Number.isSafeInteger(a) && a >= 0)) return a
  return Number.isInteger(a) && !Number.isSafeInteger(a) ? BigInt(a).toString() : String(a)
}

/** True when every character of `s` is ASCII (then its UTF-8 is its characters). */
function ascii (s: string): boolean {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0x7f) return false
  return true
}

function digits (n: number): number {
  let d = 1
  while (n >= 10) { n = Math.floor(n / 10); d++ }
  return d
}

/** Writes the decimal digits of `n` (a non-negative integer) at `at`; returns where they end. */
function decimal (out: Buffer, at: number, n: number): number {
  const end = at + digits(n)
  let i = end
  do {
    out[--i] = 0x30 + (n % 10)
    n = Math.floor(n / 10)
  } while (n > 0)
  return end
}

/** Writes the ASCII string `s` at `at` a byte a character (cheaper than a Buffer.write call for a few bytes); returns where it ends. */
function latin1 (out: Buffer, at: number, s: string): number {
  for (let i = 0; i < s.length; i++) out[at++] = s.charCodeAt(i)
  return at
}
