/**
 * MAX_SESSIONS holds for CLIs started again by a message, too. A stopped
 * session's CLI starts when its holder sends a message; with the spawn
 * helper (CLI_SPAWN=helper, the default) the helper answers a moment later,
 * and a second stopped session's message arriving in that moment must see
 * the first one's slot taken, as a create's reservation makes it taken.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { LIMITS, client, gateway } from '../support/sessions.js'
import { eventually, processAlive } from '../support/gateway.js'

describe('restarting stopped sessions at MAX_SESSIONS', () => {
  it('starts one CLI and refuses the other when two stopped sessions are sent a message at once', { timeout: 30_000 }, async (t) => {
    const gw = await gateway(t, { env: { ...LIMITS, MAX_SESSIONS: '1' } })
    const ids: string[] = []
    for (let i = 0; i < 2; i++) {
      const created = await gw.createSession()
      ids.push(created.id as string)
      const stopped = await gw.request('DELETE', `/v1/sessions/${created.id as string}`)
      assert.equal(stopped.status, 200)
      await eventually(() => !processAlive(created.pid as number), 10_000, 'the stopped CLI to be gone')
    }
    const holders = await Promise.all(ids.map(async (id) => await client(gw, t, id)))
    const from = holders.map((h) => h.frames.length)
    for (const h of holders) h.sendUser('echo hello')

    // Each either runs its turn or is refused.
    const outcomes = await Promise.all(holders.map(async (h, i) => await h.waitFor((f) => f.type === 'result' || (f.type === 'gateway' && f.subtype === 'error'), 10_000, from[i])))
    const refused = outcomes.filter((f) => f.subtype === 'error')
    const pids = await Promise.all(ids.map(async (id) => (await gw.request('GET', `/v1/sessions/${id}`)).body.pid as number | null))
    assert.equal(pids.filter((pid) => pid !== null && processAlive(pid)).length, 1, `one CLI runs at MAX_SESSIONS=1, not ${JSON.stringify(pids)}`)
    assert.deepEqual(refused.map((f) => f.code), ['too_many_sessions'])
    for (const id of ids) await gw.request('DELETE', `/v1/sessions/${id}`)
  })
})
