/**
 * claude-remote counts the turns the host started to know when stdin EOF may
 * end the session (after the running turn and the queued ones). A queued
 * turn the host cancels (`interrupt` with `cancel_queued`, 2.1.332) prints
 * no `result`: once the CLI says it is idle, nothing is left to wait for.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { gateway } from '../support/gateway.js'
import { WAIT_MS, sdkInitialize, spawnRemote, userLine } from '../support/remote.js'
import { within } from '../support/waiters.js'

test('stdin EOF after an interrupt cancelled the queued turns (no result for them): the session ends, with the last result\'s code', async (t) => {
  const gw = await gateway(t)
  const remote = spawnRemote(gw)
  t.after(() => remote.child.kill('SIGKILL'))
  remote.write(sdkInitialize())
  remote.write(userLine('slow 20 200'))
  remote.write(JSON.stringify({ ...JSON.parse(userLine('echo queued')), uuid: '44444444-4444-4444-8444-444444444444' }))
  await remote.waitLine((f) => f.type === 'assistant')
  remote.write(JSON.stringify({ type: 'control_request', request_id: 'stop-all', request: { subtype: 'interrupt', cancel_queued: true } }))
  const receipt = await remote.waitLine((f) => f.type === 'control_response' && f.response.request_id === 'stop-all')
  assert.deepEqual(receipt.response.response.cancelled, ['44444444-4444-4444-8444-444444444444'])
  await remote.waitLine((f) => f.type === 'system' && f.subtype === 'session_state_changed' && f.state === 'idle')
  remote.child.stdin.end()
  const code = await within(remote.exited, WAIT_MS, 'claude-remote to exit')
  const results = remote.lines.map((l) => JSON.parse(l)).filter((f) => f.type === 'result')
  assert.equal(results.length, 1)
  // The interrupted turn's result decides, as after any last turn (exit 1 if it was an error).
  assert.equal(code, results[0].is_error === true ? 1 : 0, remote.stderr())
})
