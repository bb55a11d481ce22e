/**
 * A session is stopped once however often it is asked: a second stop while
 * its CLI is still ending (a DELETE repeated, the idle timer and a DELETE)
 * waits for the same end and records nothing of its own, so history shows
 * one `stopping` and one `stopped`.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { gateway } from '../support/gateway.js'

describe('session core: a stop asked twice', () => {
  it('two DELETEs of a CLI that is slow to end record one stopping, then one stopped', async (t) => {
    const gw = await gateway(t, { cliArgs: ['--fake-mode', 'ignore-sigterm'], env: { CLI_STOP_TIMEOUT_MS: '300' } })
    const s = await gw.createSession()
    const c = await gw.connect(s.id)
    t.after(() => c.terminate())
    // A long turn: closing stdin alone does not end it, so the first stop is still under way when the second comes.
    c.sendUser('slow 1000 50')
    await c.waitFor((f) => f.type === 'assistant' && f.message.content[0].text === 'slow #0')
    const [first, second] = await Promise.all([
      gw.request('DELETE', `/v1/sessions/${s.id}`),
      gw.request('DELETE', `/v1/sessions/${s.id}`)
    ])
    assert.equal(first.body.status, 'stopped')
    assert.equal(second.body.status, 'stopped')
    const events = (await gw.request('GET', `/v1/sessions/${s.id}/events?limit=1000`)).body.events
    const statuses = events.filter((f: any) => f.type === 'gateway' && f.subtype === 'status').map((f: any) => f.status)
    assert.deepEqual(statuses.slice(-2), ['stopping', 'stopped'])
    assert.equal(statuses.filter((x: string) => x === 'stopping').length, 1, `one stopping recorded: ${statuses.join(' ')}`)
  })
})
