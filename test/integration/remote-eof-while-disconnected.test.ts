/**
 * Lines the host writes while claude-remote has no connection wait for the
 * next one. If stdin then ends with no turn running, those lines are still
 * the host's: the CLI reads every line before its EOF and answers each
 * control request before it exits, and an SDK waiting on `setModel()` or
 * `setPermissionMode()` waits for that answer. The end must come after
 * them, not instead of them.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { WAIT_MS } from '../support/remote.js'
import { cutOffAfterOneTurn } from '../support/remote-bridge.js'
import { within } from '../support/waiters.js'

test('stdin EOF while disconnected, no turn running: the control requests written meanwhile reach the CLI and are answered before the end, exit 0', async (t) => {
  const { gw, gate, bridge, done, frames, lastSeen, sessionId } = await cutOffAfterOneTurn(t)
  bridge.hostLine(JSON.stringify({ type: 'control_request', request_id: 'model-1', request: { subtype: 'set_model', model: 'claude-later' } }))
  bridge.hostLine(JSON.stringify({ type: 'control_request', request_id: 'mode-1', request: { subtype: 'set_permission_mode', mode: 'plan' } }))
  bridge.hostEnd()
  gate.release()

  assert.equal(await within(done, WAIT_MS, 'the end'), 0, lastSeen())
  const answers = frames().filter((f) => f.type === 'control_response' && ['model-1', 'mode-1'].includes(f.response.request_id))
  assert.deepEqual(answers.map((f) => [f.response.request_id, f.response.subtype]), [['model-1', 'success'], ['mode-1', 'success']], lastSeen())
  const atCli = gw.stdinLines(sessionId).filter((l) => l.type === 'control_request' && ['model-1', 'mode-1'].includes(l.request_id))
  assert.equal(atCli.length, 2)
})
