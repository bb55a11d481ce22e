// Relaying the CLI's stdout to WebSocket clients: order and completeness across several
// clients, byte-faithful frames (the CLI's object plus seq), very large and broken lines,
// lines cut mid-character, and a client that stops reading.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Socket } from 'node:net'
import { describe, it } from 'node:test'
import { isIdle, isResult } from '../support/frames.js'
import type { TestClient } from '../support/gateway.js'
import { LIMITS, gateway } from '../support/sessions.js'
import { turnsUntil } from './resume-helpers.js'

function seqs (c: TestClient): number[] {
  return c.seqFrames.map((f) => f.seq as number)
}

/** Raw text of every frame carrying a seq, in arrival order. */
function seqTexts (c: TestClient): string[] {
  return c.raw.filter((_r, i) => typeof c.frames[i].seq === 'number')
}

function range (from: number, to: number): number[] {
  return Array.from({ length: Math.max(0, to - from + 1) }, (_, i) => from + i)
}

function underlyingSocket (c: TestClient): Socket {
  return (c.ws as unknown as { _socket: Socket })._socket
}

describe('relay to clients', () => {
  it('gives three clients the same frames in the same order, seq 1..n, each CLI line as the CLI\'s object plus seq', async (t) => {
    const gw = await gateway(t, { cliArgs: ['--fake-log-stdout'] })
    const s = await gw.createSession()
    const a = await gw.connect(s.id, 'after=0')
    const b = await gw.connect(s.id, 'role=observer&after=0')
    const c = await gw.connect(s.id, 'role=observer&after=0')
    a.sendUser('burst 2000')
    // After the result the CLI reports idle; nothing else is printed until the next prompt.
    for (const client of [a, b, c]) await client.waitFor(isIdle, 30_000, client.frames.findIndex(isResult) + 1 || 0)
    for (const client of [a, b, c]) await client.until(() => client.frames.some(isResult) && client.frames.slice(client.frames.findIndex(isResult)).some(isIdle), 30_000)

    const n = a.seqFrames.length
    assert.ok(n > 2000)
    assert.deepEqual(seqs(a), range(1, n), 'seq 1..n without gap or duplicate')
    assert.deepEqual(seqs(b), seqs(a))
    assert.deepEqual(seqs(c), seqs(a))
    assert.deepEqual(seqTexts(b), seqTexts(a), 'observer b saw byte-identical frames')
    assert.deepEqual(seqTexts(c), seqTexts(a), 'observer c saw byte-identical frames')

    const texts = a.seqFrames.filter((f) => f.type === 'assistant').map((f) => f.message.content[0].text as string)
    assert.equal(texts.length, 2000)
    texts.forEach((text, i) => assert.ok(text.startsWith(`#${i} `), `assistant frame ${i} is in order: ${text.slice(0, 10)}`))

    // Every line the CLI printed, in order, is one frame: the same object plus its seq.
    const printed = readFileSync(join(gw.fakeLogDir, `${s.id}.stdout.ndjson`), 'utf8').split('\n').filter((l) => l !== '')
    const relayed = a.seqFrames.filter((f) => f.type !== 'gateway')
    assert.equal(relayed.length, printed.length)
    printed.forEach((line, i) => {
      const frame = relayed[i]
      assert.equal(typeof frame.seq, 'number')
      assert.deepEqual(frame, { ...JSON.parse(line), seq: frame.seq }, `frame for CLI line ${i}`)
    })
  })

  it('relays a 5 MiB line intact as one frame', async (t) => {
    const gw = await gateway(t)
    const s = await gw.createSession()
    const c = await gw.connect(s.id)
    const bytes = 5 * 1024 * 1024
    c.sendUser(`huge ${bytes}`)
    await c.waitFor(isResult, 30_000)
    const assistant = c.frames.filter((f) => f.type === 'assistant')
    assert.equal(assistant.length, 1)
    const text = assistant[0].message.content[0].text as string
    // The fake's documented pattern, repeated up to `bytes` characters.
    const pattern = 'abcdefghijklmnopqrstuvwxyz0123456789'
    assert.equal(text.length, bytes)
    assert.equal(text, pattern.repeat(Math.ceil(bytes / pattern.length)).slice(0, bytes))
    assert.deepEqual(c.frames.filter((f) => f.subtype === 'cli_output_rejected'), [])
  })

  it('reports lines that are not JSON objects as recorded cli_output_rejected frames, and the turn completes', async (t) => {
    const gw = await gateway(t)
    const s = await gw.createSession()
    const c = await gw.connect(s.id)
    c.sendUser('garbage')
    const result = await c.waitFor(isResult)
    assert.equal(result.result, 'after garbage')

    const rejected = c.frames.filter((f) => f.type === 'gateway' && f.subtype === 'cli_output_rejected')
    assert.equal(rejected.length, 2)
    assert.equal(rejected[0].reason, 'invalid_json')
    assert.equal(rejected[0].bytes, Buffer.byteLength('this is not json {'))
    assert.equal(rejected[0].preview, 'this is not json {')
    assert.equal(rejected[1].reason, 'not_an_object')
    assert.equal(rejected[1].bytes, Buffer.byteLength('[1,2,3]'))
    for (const r of rejected) assert.equal(typeof r.seq, 'number')
    const answer = c.frames.findIndex((f) => f.type === 'assistant' && f.message.content[0].text === 'after garbage')
    assert.ok(c.frames.indexOf(rejected[1]) < answer)

    // Recorded: a client joining later replays them with the same seq.
    const late = await gw.connect(s.id, 'role=observer&after=0')
    await late.waitFor(isResult)
    assert.deepEqual(late.frames.filter((f) => f.subtype === 'cli_output_rejected'), rejected)
  })

  it('rejects lines shaped like assistant, user and stream_event lines that are not JSON, which it relays without parsing', async (t) => {
    const gw = await gateway(t)
    const s = await gw.createSession()
    const c = await gw.connect(s.id, 'after=0')
    c.sendUser('bulk-garbage')
    const result = await c.waitFor(isResult)
    assert.equal(result.result, 'after bulk garbage')
    const rejected = c.frames.filter((f) => f.type === 'gateway' && f.subtype === 'cli_output_rejected')
    assert.deepEqual(rejected.map((f) => [f.reason, f.preview]), [
      ['invalid_json', '{"type":"assistant","message":{"role":"assistant","content":['],
      ['invalid_json', '{"type":"stream_event","event":{"delta":{"text":"raw\ttab"}}}'],
      ['invalid_json', '{"type":"user","message":{"content":"x"},}'],
      ['invalid_json', '{"type":"assistant","message":{"content":"bad \\x escape"}}']
    ])
    // Nothing else of the turn but its answer: no garbage line reached the client as a frame of its own type.
    assert.deepEqual(c.seqFrames.filter((f) => ['assistant', 'user', 'stream_event'].includes(f.type)).map((f) => f.message.content[0].text), ['after bulk garbage'])
    assert.deepEqual(seqs(c), range(1, c.seqFrames.length))
  })

  it('reassembles a line the CLI wrote in pieces cut inside multi-byte characters', async (t) => {
    const gw = await gateway(t)
    const s = await gw.createSession()
    const c = await gw.connect(s.id)
    c.sendUser('partial-line')
    await c.waitFor(isResult)
    const texts = c.frames.filter((f) => f.type === 'assistant').map((f) => f.message.content[0].text)
    assert.deepEqual(texts, ['partial line: héllo ✓ 日本'])
    assert.deepEqual(c.frames.filter((f) => f.subtype === 'cli_output_rejected'), [])
  })

  it('relays odd but valid lines as valid UTF-8 JSON: a raw 0xff byte, whitespace around the object, a seq of its own', async (t) => {
    const gw = await gateway(t)
    const s = await gw.createSession()
    const c = await gw.connect(s.id, 'after=0')
    c.sendUser('odd-lines')
    await c.waitFor(isResult)
    const assistant = c.seqFrames.filter((f) => f.type === 'assistant')
    // The client's ws would have closed with 1007 on invalid UTF-8 instead of reaching the result.
    assert.deepEqual(assistant.map((f) => f.message.content[0].text), ['bad byte: \uFFFD', 'spaced', 'own seq', 'after odd lines'])
    const ownSeq = assistant[2]
    assert.notEqual(ownSeq.seq, 999, "the gateway's seq wins over the line's own")
    assert.deepEqual(seqs(c), range(1, c.seqFrames.length))
    const history = await gw.request('GET', `/v1/sessions/${s.id}/events?limit=1000`)
    assert.deepEqual(history.body.events.filter((e: any) => e.type === 'assistant'), assistant, 'history holds the same frames')
  })

  it('closes a client that stops reading with 4008 while another client receives everything', async (t) => {
    const gw = await gateway(t, { env: { ...LIMITS, WS_MAX_BUFFERED_BYTES: String(128 * 1024) } })
    const s = await gw.createSession()
    const fast = await gw.connect(s.id, 'after=0')
    const slow = await gw.connect(s.id, 'role=observer&after=0')
    await slow.waitFor((f) => f.subtype === 'hello')
    underlyingSocket(slow).pause()

    // Turns of about 100 KB (below the budget) until the gateway gives up on the paused client (its
    // side of the socket is closing); the fast client reads each turn whole before the next.
    const closingSlow = (): boolean => [...gw.app.websocketServer.clients].some((ws) => ws.readyState === ws.CLOSING)
    let turns = 0
    await turnsUntil(gw, s.id, fast, [], 'burst 25 4000', (n) => { turns = n; return closingSlow() }, 'the gateway closing the slow client')
    // Then let the client read again so it gets to the close frame behind the backlog.
    underlyingSocket(slow).resume()
    assert.equal(await slow.waitClose(10_000), 4008)

    const result = fast.frames.filter(isResult).at(-1)
    const n = fast.seqFrames.length
    assert.deepEqual(seqs(fast), range(1, n))
    assert.equal(fast.frames.filter((f) => f.type === 'assistant').length, 25 * turns)
    assert.equal(fast.closeCode, null)

    // The slow client got a gap-free prefix, and resumes from its last seq with nothing lost.
    const got = seqs(slow)
    assert.deepEqual(got, range(1, got.length))
    assert.ok(got.length < result.seq, 'the slow client was cut off before the last turn ended')
    const again = await gw.connect(s.id, `role=observer&after=${got.length}`)
    await again.until(() => again.closeCode !== null || again.seqFrames.some((f) => f.seq === result.seq), 30_000, 'the replay up to the result')
    assert.equal(again.closeCode, null, 'the resumed client reads its replay and is not cut off')
    const k = again.seqFrames.length
    assert.deepEqual([...got, ...seqs(again)], range(1, got.length + k))
    assert.deepEqual(seqTexts(again), seqTexts(fast).slice(got.length, got.length + k))
  })

  it('replays a history larger than WS_MAX_BUFFERED_BYTES to a reading client without cutting it off', async (t) => {
    const gw = await gateway(t, { env: { ...LIMITS, WS_MAX_BUFFERED_BYTES: String(64 * 1024) } })
    const s = await gw.createSession()
    const c = await gw.connect(s.id)
    // About 6 MB of history, nearly a hundred times the limit, in turns below it so that c, reading
    // them live in this process, is never a slow consumer itself.
    await turnsUntil(gw, s.id, c, [], 'burst 12 4000', (n) => n === 125, 'history')
    const result = c.frames.filter(isResult).at(-1)
    const late = await gw.connect(s.id, 'role=observer&after=0')
    await late.until(() => late.closeCode !== null || late.seqFrames.some((f) => f.seq === result.seq), 30_000, 'the replay up to the result')
    assert.equal(late.closeCode, null, 'a client reading its replay is not a slow consumer')
    assert.deepEqual(seqs(late), range(1, late.seqFrames.length))
    assert.equal(late.frames.filter((f) => f.type === 'assistant').length, 12 * 125)
    // The live client joined after the first frames; every frame it has, the replay has byte for byte.
    const replayed = new Map(late.seqFrames.map((f, i) => [f.seq as number, seqTexts(late)[i]]))
    const live = seqTexts(c)
    c.seqFrames.forEach((f, i) => { if (f.seq <= result.seq) assert.equal(replayed.get(f.seq), live[i], `seq ${f.seq}`) })
  })
})
