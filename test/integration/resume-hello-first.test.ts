/**
 * A resuming client's first frame is `hello`, even when something is
 * announced to every client while its attach still waits for the store
 * (here: the holder leaves, and the store goes degraded); and what a client
 * sends in that window is handled after its hello, not refused. The store's
 * `firstSeq` is held back by a gate so that window is wide open.
 */
import assert from 'node:assert/strict'
import { before, describe, it } from 'node:test'
import { MemoryStore } from '../../src/store/memory.js'
import type { EventStore } from '../../src/store/store.js'
import { isHello } from '../support/frames.js'
import { type TestClient, type TestGateway, eventually, gateway, suiteScope } from '../support/gateway.js'
import { turn } from './resume-helpers.js'

describe('resume: hello comes first', () => {
  const scope = suiteScope()
  let gw: TestGateway
  let gate: Promise<void> | null = null
  let waiting = 0
  let failAppends = false

  before(async () => {
    const memory = new MemoryStore({ retention: { maxEventsPerSession: 100_000, ttlSecondsAfterEnd: 0 } })
    const store: EventStore = new Proxy(memory, {
      get (target, key) {
        if (key === 'firstSeq') {
          return async (id: string) => {
            if (gate !== null) { waiting++; await gate; waiting-- }
            return await target.firstSeq(id)
          }
        }
        if (key === 'append') {
          return async (id: string, events: { seq: number, frame: string }[]) => {
            if (failAppends) throw new Error('store down (test)')
            return await target.append(id, events)
          }
        }
        const value = Reflect.get(target, key, target)
        return typeof value === 'function' ? value.bind(target) : value
      }
    })
    // A frame rate high enough for a client to pass the 256 frames held before hello.
    gw = await gateway(scope, { parts: { store }, env: { WS_MAX_FRAMES_PER_SEC: '1000' } })
  })

  it('holder and store notices sent while a client attaches do not overtake its hello', async () => {
    const { id } = await gw.createSession()
    const holder = await gw.connect(id)
    const end = await turn(gw, id, holder, 'echo one')

    let open!: () => void
    gate = new Promise((resolve) => { open = resolve })
    const resuming = await gw.connect(id, 'after=2&role=controller')
    const watcher = await gw.connect(id, `after=${end}&role=observer`)
    await eventually(() => waiting === 2, 5000, 'both attaches waiting on the store')

    // Announced to every client meanwhile: the holder leaves; the store fails.
    holder.terminate()
    await holder.waitClose()
    failAppends = true
    await gw.request('DELETE', `/v1/sessions/${id}`) // status frames: an append that fails → degraded
    await eventually(async () => (await gw.request('GET', `/v1/sessions/${id}`)).body.store === 'degraded', 5000, 'store degraded')

    gate = null
    open()
    for (const client of [resuming, watcher]) {
      const hello = await client.waitFor(isHello)
      assert.deepEqual(client.frames[0], hello, `first frame: ${JSON.stringify(client.frames[0])}`)
      assert.equal(hello.store, 'degraded', 'hello tells the state of the store as it is when sent')
    }
    assert.equal((await resuming.waitFor(isHello)).role, 'controller')
    failAppends = false
  })

  /**
   * A controller of a new session whose attach is held at the store while `write` sends
   * frames; resolves once the gateway has them all (it answers a ping only after every
   * frame sent before it), then lets the attach go on.
   */
  async function writeBeforeHello (write: (client: TestClient) => void): Promise<{ id: string, client: TestClient }> {
    const { id } = await gw.createSession()
    let open!: () => void
    gate = new Promise((resolve) => { open = resolve })
    const client = await gw.connect(id, 'after=0&role=controller')
    await eventually(() => waiting === 1, 5000, 'the attach waiting on the store')
    write(client)
    await new Promise<void>((resolve) => { client.ws.once('pong', () => resolve()); client.ws.ping() })
    assert.equal(client.frames.length, 0, `nothing is sent before hello: ${JSON.stringify(client.frames)}`)
    gate = null
    open()
    return { id, client }
  }

  const prompts = (id: string): string[] => gw.stdinLines(id).filter((l) => l.type === 'user').map((l) => l.message.content)
  const errorCodes = (client: TestClient): string[] => client.frames.filter((f) => f.type === 'gateway' && f.subtype === 'error').map((f) => f.code)

  it('frames sent before hello are handled after it, in order, as the holder\'s', async () => {
    const { id, client } = await writeBeforeHello((c) => {
      c.sendUser('echo first')
      c.send({ type: 'keep_alive' })
      c.ws.send('{not json')
      c.sendUser('echo second')
    })
    await client.waitFor((f) => f.type === 'result' && String(f.result).endsWith('second'))
    assert.equal(client.frames[0]?.subtype, 'hello')
    assert.equal(client.frames[0]?.role, 'controller')
    assert.deepEqual(errorCodes(client), ['invalid_json'], 'only the malformed frame is refused')
    assert.deepEqual(prompts(id), ['echo first', 'echo second'], 'both prompts reached the CLI, in order')
  })

  it('past 256 frames before hello, each further one is refused with rate_limited once hello is out', async () => {
    const { id, client } = await writeBeforeHello((c) => {
      c.sendUser('echo kept')
      for (let i = 0; i < 255; i++) c.send({ type: 'keep_alive' })
      c.sendUser('echo over one')
      c.sendUser('echo over two')
    })
    await client.waitFor((f) => f.type === 'result' && String(f.result).endsWith('kept'))
    assert.equal(client.frames[0]?.subtype, 'hello')
    assert.deepEqual(errorCodes(client), ['rate_limited', 'rate_limited'])
    assert.match(String(client.frames.find((f) => f.code === 'rate_limited')?.message), /256 frames before hello/)
    assert.deepEqual(prompts(id), ['echo kept'], 'only the prompt within the bound reached the CLI')
  })
})
