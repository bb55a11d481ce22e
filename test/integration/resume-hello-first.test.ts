/**
 * A resuming client's first frame is `hello`, even when something is
 * announced to every client while its attach still waits for the store
 * (here: the holder leaves, and the store goes degraded). The store's
 * `firstSeq` is held back by a gate so that window is wide open.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { MemoryStore } from '../../src/store/memory.js'
import type { EventStore } from '../../src/store/store.js'
import { isHello } from '../support/frames.js'
import { type TestGateway, eventually, startGateway } from '../support/gateway.js'
import { turn } from './resume-helpers.js'

describe('resume: hello comes first', () => {
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
    gw = await startGateway({ parts: { store } })
  })
  after(async () => {
    await gw?.close()
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
})
