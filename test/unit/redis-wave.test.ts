/**
 * A merged append wave framed by the gateway (src/store/redis-wave.ts) must
 * be, byte for byte, the command ioredis would have written for the same
 * EVALSHA: whatever the keys and arguments (non-ASCII text, empty strings,
 * numbers of any size, frames' bytes, arguments framed once beforehand).
 * Checked against ioredis's own framing of the same command.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import fc from 'fast-check'
import { Command } from 'ioredis'
import { respArg, respKeys, type WaveArg, WaveCommand } from '../../src/store/redis-wave.js'

const SHA = 'e0e1f9fabfc9d4800c877a703b823ac0578ff831'

/** What ioredis writes for the command (a string when no argument is a Buffer). */
function ioredisBytes (args: Array<string | number | Buffer>): Buffer {
  const written = new Command('evalsha', args).toWritable(undefined as never)
  return typeof written === 'string' ? Buffer.from(written, 'utf8') : written
}

const text = fc.oneof(fc.string({ maxLength: 40 }), fc.string({ unit: 'binary', maxLength: 40 }), fc.string({ minLength: 30, maxLength: 300 }))
const arg: fc.Arbitrary<{ framed: boolean, value: string | number | Buffer }> = fc.oneof(
  text.map((value) => ({ framed: false, value })),
  text.map((value) => ({ framed: true, value })),
  fc.oneof(fc.nat(), fc.integer({ min: -1000, max: -1 }), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.constant(Number.MAX_SAFE_INTEGER)).map((value) => ({ framed: false, value })),
  fc.uint8Array({ maxLength: 200 }).map((bytes) => ({ framed: false, value: Buffer.from(bytes) }))
)

test('frames a wave exactly as ioredis frames the same EVALSHA', () => {
  fc.assert(fc.property(
    fc.array(fc.tuple(fc.array(text, { minLength: 1, maxLength: 5 }), fc.array(arg, { maxLength: 7 })), { minLength: 1, maxLength: 8 }),
    (sessions) => {
      const keys = sessions.flatMap(([k]) => k)
      const plain: Array<string | number | Buffer> = []
      const wave: WaveArg[] = []
      for (const [, args] of sessions) {
        for (const { framed, value } of args) {
          plain.push(value)
          wave.push(framed ? respArg(value as string) : value)
        }
      }
      const ours = new WaveCommand(SHA, keys.length, sessions.map(([k]) => respKeys(k)), wave).toWritable()
      assert.deepEqual(ours, ioredisBytes([SHA, keys.length, ...keys, ...plain]))
    }
  ), { numRuns: 2000 })
})

test('a session\'s framed keys own their memory: no slice of Buffer\'s shared pool, which a kept slice would keep whole', () => {
  for (const keys of [['a'], ['cgw:{s}:events', 'cgw:{s}:meta', 'cgw:{s}:lease', 'cgw:{s}:followed', 'cgw:{s}:largest']]) {
    const framed = respKeys(keys)
    assert.equal(framed.buffer.byteLength, framed.length)
    assert.equal(respArg(keys[0] as string).resp.buffer.byteLength, respArg(keys[0] as string).resp.length)
  }
})

test('a wave given a key is routed by a Cluster to that key\'s slot, as ioredis routes the same EVALSHA', () => {
  for (const key of ['cgw:{abc}:events', 'cgw:{9f1c2e}:events', 'plain-key']) {
    const wave = new WaveCommand('0'.repeat(40), 5, [respKeys([key, 'cgw:{abc}:meta'])], [1], key)
    assert.equal(wave.getSlot(), new Command('evalsha', ['0'.repeat(40), 1, key, 1]).getSlot(), key)
  }
  // Without one (merged waves, single Redis only): no key to route by.
  assert.equal(new WaveCommand('0'.repeat(40), 0, [], [1]).getSlot(), null)
})
