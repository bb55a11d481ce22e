/**
 * Fuzzing over a real WebSocket: two sessions; the holder of one sends a few
 * thousand random frames (random JSON, random text, random bytes, valid-ish
 * frames including control_responses with random ids, and cut-up valid
 * frames) in batches, each sent once the CLI has read the one before (the
 * frame rate limit is out of the way: it has its own tests). Afterwards the gateway is up, the other
 * session's client saw no error at all and completes a turn, the fuzzed
 * connection was never dropped, and the fuzzed session's CLI never received
 * a line that is not JSON (the fake CLI would have exited 1) and was never
 * restarted. FC_SEED replays a run; FUZZ_FRAMES changes its size.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { errorTable } from '../../src/errors.js'
import { permissionModes } from '../../src/protocol/client-frames.js'
import { type TestClient, gateway } from '../support/gateway.js'
import { fence } from '../support/sessions.js'

const FRAMES = Number(process.env.FUZZ_FRAMES ?? 3000)
const SEED = Number(process.env.FC_SEED ?? Date.now() % 2_147_483_647)
const BATCH = 50

type Outgoing = { text: string } | { bytes: Uint8Array }

// Prompts start with "fuzz" so the fake CLI never picks a scripted scenario (crash, exit, huge...).
const prompt = fc.string({ unit: 'binary', maxLength: 30 }).map((s) => `fuzz ${s}`)
const anyText = fc.oneof(fc.string({ unit: 'binary', maxLength: 30 }), fc.constantFrom('', '\n', '\r\n', '\u2028', '\u0000', '}\n{'))
const id = fc.oneof(fc.uuid(), anyText, fc.constantFrom('x', 'gw_init_1', 'fence'), fc.integer())
const extra = fc.dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 2 })
const withExtra = <T extends object>(a: fc.Arbitrary<T>): fc.Arbitrary<T> => fc.tuple(a, extra).map(([b, e]) => ({ ...e, ...b }))

const user = withExtra(fc.record({
  type: fc.constant('user'),
  message: fc.record({
    role: fc.constantFrom('user', 'user', 'user', 'assistant'),
    content: fc.oneof(prompt, fc.array(withExtra(fc.record({ type: fc.constantFrom('text', 'image', ''), text: prompt })), { maxLength: 2 }))
  }),
  uuid: id
}, { requiredKeys: ['type', 'message'] }))
const controlRequest = withExtra(fc.record({
  type: fc.constant('control_request'),
  request_id: id,
  request: fc.oneof(
    fc.constant({ subtype: 'interrupt' }),
    fc.record({ subtype: fc.constant('set_model'), model: fc.oneof(anyText, fc.constant(null)) }),
    fc.record({ subtype: fc.constant('set_permission_mode'), mode: fc.oneof(fc.constantFrom(...permissionModes), anyText) }),
    fc.record({ subtype: fc.constant('set_max_thinking_tokens'), max_thinking_tokens: fc.oneof(fc.nat(), fc.constant(null), fc.integer()) }),
    withExtra(fc.record({ subtype: fc.oneof(fc.constantFrom('mcp_status', 'initialize', 'fuzz_unknown'), anyText) })),
    fc.jsonValue({ maxDepth: 2 })
  )
}, { requiredKeys: ['type'] }))
const controlResponse = withExtra(fc.record({
  type: fc.constant('control_response'),
  response: fc.record({
    subtype: fc.oneof(fc.constantFrom('success', 'error'), anyText),
    request_id: id,
    response: fc.oneof(fc.record({ behavior: fc.constantFrom('allow', 'deny') }), fc.jsonValue({ maxDepth: 2 })),
    error: anyText
  }, { requiredKeys: [] })
}, { requiredKeys: ['type'] }))
const validish = fc.oneof(user, controlRequest, controlResponse, fc.constant({ type: 'keep_alive' }))

const outgoing: fc.Arbitrary<Outgoing> = fc.oneof(
  { weight: 4, arbitrary: validish.map((f) => ({ text: JSON.stringify(f) })) },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((v) => ({ text: JSON.stringify(v) })) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 80 }).map((text) => ({ text })) },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 80 }).map((bytes) => ({ bytes })) },
  {
    weight: 1,
    arbitrary: fc.tuple(validish, fc.nat(), fc.nat({ max: 10 })).map(([f, at, cut]) => {
      const s = JSON.stringify(f)
      const i = at % (s.length + 1)
      return { text: s.slice(0, i) + s.slice(i + cut) }
    })
  }
)

function errorFrames (c: TestClient): any[] {
  return c.frames.filter((f) => f.type === 'gateway' && f.subtype === 'error')
}

describe('WebSocket fuzz', () => {
  it(`survives ${FRAMES} random frames on one session without touching another (seed ${SEED})`, async (t) => {
    const gw = await gateway(t, { env: { WS_MAX_FRAMES_PER_SEC: '1000000' } })
    const fuzzed = (await gw.createSession()).id as string
    const calm = (await gw.createSession()).id as string
    const attacker = await gw.connect(fuzzed, 'after=0')
    const bystander = await gw.connect(calm, 'after=0')
    await attacker.waitFor((f) => f.subtype === 'hello')
    bystander.sendUser('hello before')
    await bystander.waitFor((f) => f.type === 'result')

    const frames = fc.sample(outgoing, { numRuns: FRAMES, seed: SEED })
    for (let i = 0; i < frames.length; i += BATCH) {
      for (const f of frames.slice(i, i + BATCH)) {
        if ('bytes' in f) attacker.ws.send(f.bytes, { binary: true })
        else attacker.ws.send(f.text)
      }
      // Paced by the gateway itself: the next batch goes once the CLI has read this one.
      await fence(attacker, { unique: true, timeoutMs: 20_000 })
      assert.equal(attacker.closeCode, null, `the fuzzed connection was closed after ${i + BATCH} frames (seed ${SEED})`)
    }
    await fence(attacker, { unique: true, timeoutMs: 20_000 }) // the CLI has read everything sent before this

    // The fuzzed connection got only typed errors, and was never dropped.
    const known = new Set([...Object.keys(errorTable), 'rate_limited'])
    for (const e of errorFrames(attacker)) assert.ok(known.has(e.code), `untyped error ${JSON.stringify(e)}`)
    assert.ok(errorFrames(attacker).length > FRAMES / 10, 'the fuzz did produce errors')
    assert.ok(!errorFrames(attacker).some((e) => e.code === 'internal'), `an internal error (seed ${SEED})`)
    assert.equal(attacker.closeCode, null)

    // Every line the fuzzed CLI read is JSON, and it never had to be restarted.
    const lines = gw.stdinText(fuzzed).split('\n').filter((l) => l !== '')
    assert.ok(lines.length > 10, `only ${lines.length} lines reached the CLI`)
    for (const line of lines) assert.doesNotThrow(() => JSON.parse(line), `invalid line on stdin: ${line.slice(0, 200)} (seed ${SEED})`)
    assert.equal(gw.argvDumps(fuzzed).length, 1, 'the CLI was started once')
    assert.ok(!attacker.frames.some((f) => f.subtype === 'status' && f.status === 'exited'), 'the CLI never exited')
    // (Unknown subtypes pass through as opaque requests, whatever their fields: the CLI refuses those itself.)
    const toBypass = lines.map((l) => JSON.parse(l).request).filter((r) => r?.subtype === 'set_permission_mode' && r.mode === 'bypassPermissions')
    assert.deepEqual(toBypass, [], `set_permission_mode bypassPermissions reached the CLI (seed ${SEED})`)

    // The other session: no error frame ever, and a normal turn.
    const from = bystander.frames.length
    bystander.sendUser('hello after')
    const result = await bystander.waitFor((f) => f.type === 'result', 10_000, from)
    assert.equal(result.is_error, false)
    assert.ok(bystander.frames.slice(from).some((f) => f.type === 'assistant' && f.message.content[0].text === 'Echo: hello after'))
    assert.deepEqual(errorFrames(bystander), [])
    assert.equal(bystander.closeCode, null)

    const health = await fetch(`${gw.url}/healthz`)
    assert.equal(health.status, 200)
    assert.equal((await gw.request('GET', `/v1/sessions/${calm}`)).body.status, 'running')
  })
})
