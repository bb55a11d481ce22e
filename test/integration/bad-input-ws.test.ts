/**
 * Bad input over the WebSocket never hurts the session or anyone else:
 * malformed JSON, wrong types, unknown frame types, binary frames and
 * absurdly nested JSON each get a typed error frame and the connection stays
 * open, with nothing of them on the CLI's stdin; invalid UTF-8 is a protocol
 * error (1007) for that client alone; a half-open TCP peer is dropped by the
 * heartbeat; a client that stops reading during a burst is cut off with 4008
 * while the others get every frame.
 */
import assert from 'node:assert/strict'
import { connect } from 'node:net'
import { describe, it } from 'node:test'
import type { CliExit, CliLauncher } from '../../src/cli/cli-handle.js'
import { errorCode, isRefusal } from '../support/frames.js'
import { TOKEN_A, eventually } from '../support/gateway.js'
import { LIMITS, client, fence, gateway } from '../support/sessions.js'
import { turnsUntil } from './resume-helpers.js'

const nested = (depth: number): string => `{"type":"user","message":{"role":"user","content":[{"type":"text","text":"deep","x":${'['.repeat(depth)}${']'.repeat(depth)}}]}}`

/** Text frames and the error code each must get back. */
const BAD: Array<[string, string]> = [
  ['', 'invalid_json'],
  ['{', 'invalid_json'],
  ['not json', 'invalid_json'],
  ['{"type":"user"', 'invalid_json'],
  ['{"type":"user",}', 'invalid_json'],
  ["{'type':'user'}", 'invalid_json'],
  ['\u0000', 'invalid_json'],
  ['{"type":"user"}\n{"type":"user"}', 'invalid_json'],
  ['null', 'invalid_frame'],
  ['42', 'invalid_frame'],
  ['"user"', 'invalid_frame'],
  ['[]', 'invalid_frame'],
  ['[{"type":"keep_alive"}]', 'invalid_frame'],
  ['{}', 'invalid_frame'],
  ['{"type":""}', 'invalid_frame'],
  ['{"type":"update_environment_variables","variables":{"NODE_OPTIONS":"--require /tmp/x.js"}}', 'control_not_allowed'],
  ['{"type":"user"}', 'invalid_frame'],
  ['{"type":"user","message":{"role":"assistant","content":"x"}}', 'invalid_frame'],
  ['{"type":"user","message":{"role":"user","content":42}}', 'invalid_frame'],
  ['{"type":"user","message":{"role":"user","content":[]}}', 'invalid_frame'],
  ['{"type":"user","message":{"role":"user","content":[{"text":"no type"}]}}', 'invalid_frame'],
  ['{"type":"user","message":{"role":"user","content":"x"},"uuid":""}', 'invalid_frame'],
  ['{"type":["user"],"message":{"role":"user","content":"x"}}', 'invalid_frame'],
  ['{"type":"control_request","request_id":"","request":{"subtype":"interrupt"}}', 'invalid_frame'],
  [`{"type":"control_request","request_id":"${'r'.repeat(201)}","request":{"subtype":"interrupt"}}`, 'invalid_frame'],
  ['{"type":"control_response","response":{"subtype":"maybe","request_id":"x"}}', 'invalid_frame'],
  ['{"type":"control_response","response":{"subtype":"success"}}', 'invalid_frame'],
  ['{"type":"control_response","response":{"subtype":"success","request_id":"nobody-asked"}}', 'unknown_request'],
  [nested(100), 'invalid_frame'],
  [nested(100_000), 'invalid_frame'] // JSON.stringify of this would overflow the stack (it used to end the process)
]

/** Control requests refused at parse time: answered with a control_response error carrying their request_id. */
const BAD_REQUESTS: Array<[string, string]> = [
  ['{"type":"control_request","request_id":"b1","request":{"subtype":"set_model","model":42}}', 'b1'],
  ['{"type":"control_request","request_id":"b2","request":{"subtype":"set_max_thinking_tokens","max_thinking_tokens":-1}}', 'b2'],
  ['{"type":"control_request","request_id":"b3","request":"interrupt"}', 'b3'],
  [`{"type":"control_request","request_id":"b4","request":{"subtype":"custom","v":${'['.repeat(100)}${']'.repeat(100)}}}`, 'b4']
]

describe('bad frames', () => {
  it('answers each with a typed error frame, stays open, keeps the session working and writes nothing of them to stdin', async (t) => {
    const gw = await gateway(t)
    const id = (await gw.createSession()).id
    const holder = await client(gw, t, id)
    const observer = await client(gw, t, id, 'role=observer')
    const from = holder.frames.length
    for (const [text] of BAD) holder.send(text)
    for (const [text] of BAD_REQUESTS) holder.send(text)
    holder.ws.send(Buffer.from([0x00, 0xff, 0x7b, 0x7d]), { binary: true })
    holder.ws.send(Buffer.from('{"type":"keep_alive"}'), { binary: true })
    const expected = [...BAD.map(([, code]) => code), 'binary_not_supported', 'binary_not_supported']
    const codes = await holder.until(() => {
      const got = holder.frames.slice(from).map(errorCode).filter((c) => c !== undefined)
      return got.length >= expected.length ? got : undefined
    })
    assert.deepEqual(codes, expected)
    for (const f of holder.frames.slice(from).filter((x) => errorCode(x) !== undefined)) {
      assert.equal(typeof f.message, 'string')
      assert.ok(f.message.length < 500, 'the message does not echo the input back')
    }
    for (const [, requestId] of BAD_REQUESTS) {
      const refusal = await holder.waitFor(isRefusal('invalid_frame', requestId), 10_000, from)
      assert.ok(refusal.response.error.length < 500, 'the message does not echo the input back')
    }
    assert.equal(holder.closeCode, null)

    holder.sendUser('still working')
    const result = await holder.waitFor((f) => f.type === 'result', 10_000, from)
    assert.equal(result.is_error, false)
    await fence(holder)
    const lines = gw.stdinText(id).split('\n').filter((l) => l !== '')
    for (const line of lines) JSON.parse(line) // every line the CLI got is JSON
    assert.deepEqual(lines.map((l) => JSON.parse(l).type), ['control_request', 'user', 'control_request'])
    assert.ok(!observer.frames.some((f) => errorCode(f) !== undefined), "the observer never sees another client's errors")
    assert.equal((await fetch(`${gw.url}/healthz`)).status, 200)
  })

  it('answers an unexpected exception while handling a frame with an internal error frame, and the gateway stays up', async (t) => {
    // A CLI handle whose stdin write throws: stands in for any bug below the frame handler.
    const launch: CliLauncher = (_spec, callbacks) => {
      const exit: CliExit = { code: 0, signal: null, stderrTail: [] }
      let ended = false
      return {
        pid: undefined,
        write: (line) => {
          if (line.includes('explode')) throw new Error('stdin exploded at /srv/internal/path')
          return true
        },
        stop: async () => {
          if (!ended) { ended = true; callbacks.onExit(exit) }
          return exit
        }
      }
    }
    const gw = await gateway(t, { parts: { launch } })
    const id = (await gw.createSession()).id
    const holder = await client(gw, t, id)
    const from = holder.frames.length
    holder.sendUser('explode now')
    const err = await holder.waitFor((f) => errorCode(f) !== undefined, 10_000, from)
    assert.equal(err.code, 'internal')
    assert.ok(!JSON.stringify(err).includes('/srv/'), 'no internals in the frame')
    assert.equal(holder.closeCode, null)
    holder.send('{}')
    await holder.waitFor((f) => errorCode(f) === 'invalid_frame', 10_000, from)
    assert.equal((await fetch(`${gw.url}/healthz`)).status, 200)
  })

  it('closes a client that sends invalid UTF-8 text with 1007, and only that client', async (t) => {
    const gw = await gateway(t)
    const id = (await gw.createSession()).id
    const holder = await client(gw, t, id)
    const bad = await client(gw, t, id, 'role=observer')
    bad.ws.send(Buffer.from([0x7b, 0x22, 0xc3, 0x28, 0x22, 0x7d]), { binary: false })
    assert.equal(await bad.waitClose(), 1007)
    holder.sendUser('hello')
    await holder.waitFor((f) => f.type === 'result')
    assert.equal(holder.closeCode, null)
  })
})

describe('connections that stop cooperating', () => {
  it('drops a half-open TCP peer (upgrade sent, then silence) through the heartbeat, and keeps a live client', async (t) => {
    const gw = await gateway(t, { env: { KEEPALIVE_INTERVAL_MS: '100' } })
    const id = (await gw.createSession()).id
    const live = await client(gw, t, id, 'role=observer')

    const { port } = new URL(gw.url)
    const socket = connect(Number(port), '127.0.0.1')
    t.after(() => socket.destroy())
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject)
      socket.once('connect', () => {
        socket.write([
          `GET /v1/sessions/${id}/ws HTTP/1.1`, `Host: 127.0.0.1:${port}`, 'Connection: Upgrade', 'Upgrade: websocket',
          'Sec-WebSocket-Version: 13', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', `Authorization: Bearer ${TOKEN_A}`, '', ''
        ].join('\r\n'))
        let head = ''
        const onData = (chunk: Buffer): void => {
          head += chunk.toString('latin1')
          if (!head.includes('\r\n\r\n')) return
          socket.off('data', onData)
          socket.pause() // from now on: no reads, no pongs
          assert.match(head, /^HTTP\/1\.1 101 /)
          resolve()
        }
        socket.on('data', onData)
      })
    })
    await eventually(async () => (await gw.request('GET', `/v1/sessions/${id}`)).body.clients === 2, 5000, 'the raw client to attach')
    await eventually(async () => (await gw.request('GET', `/v1/sessions/${id}`)).body.clients === 1, 5000, 'the half-open client to be dropped')

    // The well-behaved client answered every ping meanwhile and is still there.
    const keepAlives = (): number => live.frames.filter((f) => f.type === 'keep_alive').length
    const seen = keepAlives()
    await live.until(() => keepAlives() >= seen + 3 || undefined)
    assert.equal(live.closeCode, null)
  })

  it('closes a client that stops reading during a big burst with 4008, while the others get every frame', async (t) => {
    const gw = await gateway(t, { env: { ...LIMITS, WS_MAX_BUFFERED_BYTES: '65536' } })
    const id = (await gw.createSession()).id
    const holder = await client(gw, t, id, 'after=0')
    const other = await client(gw, t, id, 'role=observer')
    const slow = await client(gw, t, id, 'role=observer')
    slow.ws.pause() // stops reading from its socket: the gateway's backlog for it grows

    // Turns of 180 KB, each read by the holder and the other observer before the next, until the
    // gateway has ended the slow client (past the loopback buffers, a few MB, and its 64 KB budget).
    // One burst of megabytes could outrun this process's own readers on a loaded machine, and the
    // gateway would rightly end them too (resume-helpers.ts, turnsUntil). The gateway terminates a
    // closed client 2 s later if it never reads the close frame, so the slow one resumes at once.
    const perTurn = 6
    let turns = 0
    // Ended: its server-side socket is closing (the 4008 close frame waits for it to read).
    const closing = (): number => [...gw.app.websocketServer.clients].filter((ws) => ws.readyState === ws.CLOSING).length
    await turnsUntil(gw, id, holder, [other], `burst ${perTurn} 30000`, (n) => {
      turns = n
      return closing() === 1
    }, 'the gateway to end the slow client')
    slow.ws.resume()
    assert.equal(await slow.waitClose(), 4008)

    for (const c of [holder, other]) {
      const texts = c.frames.filter((f) => f.type === 'assistant').map((f) => f.message.content[0].text as string)
      assert.equal(texts.filter((x) => x.startsWith('#')).length, turns * perTurn)
      const seqs = c.seqFrames.map((f) => f.seq as number)
      assert.ok(seqs.every((s, i) => i === 0 || s === (seqs[i - 1] as number) + 1), 'no gap')
      assert.equal(c.closeCode, null)
    }
    // The frame that passed its budget and every later one were dropped for it (the one that did may be any frame of a turn).
    const lastSeq = (c: typeof slow): number => (c.seqFrames.at(-1)?.seq as number | undefined) ?? 0
    assert.ok(lastSeq(slow) < lastSeq(holder), `the slow client stopped at seq ${lastSeq(slow)} of ${lastSeq(holder)}`)
    await eventually(async () => (await gw.request('GET', `/v1/sessions/${id}`)).body.clients === 2, 5000, 'the slow client to be detached')
  })
})
