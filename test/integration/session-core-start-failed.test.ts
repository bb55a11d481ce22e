/**
 * A user message to a session whose CLI cannot be started (the spawn helper
 * reports E2BIG after the message was taken): the session says it ended, and
 * no turn is shown running behind a CLI that never ran.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { MemoryStore } from '../../src/store/memory.js'
import { isHello, isStatus } from '../support/frames.js'
import { gateway } from '../support/gateway.js'

describe('session core: a CLI start that fails after a message', () => {
  it('turn_running is false once the spawn helper says the CLI could not start', async (t) => {
    const store = new MemoryStore({ retention: { maxEventsPerSession: 1000, ttlSecondsAfterEnd: 60 } })
    // One environment string over Linux's 128 KiB per-string limit: execve fails with E2BIG.
    const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ANTHROPIC_CUSTOM_HEADERS: `x-big: ${'h'.repeat(200_000)}` }
    const gw = await gateway(t, { parts: { store, env }, env: { CLI_SPAWN: 'helper' } })
    t.after(() => store.close())
    assert.equal((await gw.request('POST', '/v1/sessions', {})).status, 502)
    const [listed] = (await gw.request('GET', '/v1/sessions')).body.sessions
    const c = await gw.connect(listed.id, 'after=0')
    t.after(() => c.terminate())
    await c.waitFor(isHello)
    const from = c.frames.length
    c.sendUser('hello')
    await c.waitFor(isStatus('exited'), 10_000, from)
    const one = await gw.request('GET', `/v1/sessions/${listed.id}`)
    assert.equal(one.body.status, 'exited')
    assert.equal(one.body.exit.reason, 'spawn_failed')
    assert.equal(one.body.turn_running, false, 'no turn runs: the CLI never started')
  })
})
