/**
 * Answers claude-remote writes on the host's behalf (a prompt refused at
 * stdin EOF, as the CLI refuses it) are as exposed to a dying connection as
 * the host's own: lost in flight, the prompt stays pending on the gateway
 * and the turn never ends. They must be sent again after the reconnect.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { WAIT_MS, forwardedRemote, onlySession, userLine } from '../support/remote.js'
import { within } from '../support/waiters.js'

test('stdin EOF while a prompt waits, the refusal lost with the connection: sent again after the reconnect, the turn ends, exit 0', async (t) => {
  const { gw, fwd, remote } = await forwardedRemote(t)
  remote.write(userLine('ask Bash touch lost-refusal.txt'))
  const prompt = await remote.waitLine((f) => f.type === 'control_request' && f.request.subtype === 'can_use_tool')
  const session = await onlySession(gw)

  // EOF: claude-remote refuses the prompt for the host; that line never reaches the gateway.
  fwd.cutNext('drop')
  remote.child.stdin.end()
  assert.equal(await within(remote.exited, WAIT_MS, 'claude-remote to exit'), 0, remote.stderr())
  assert.ok(fwd.dropped() > 0)
  const answers = gw.stdinLines(session.id).filter((l) => l.type === 'control_response' && l.response.request_id === prompt.request_id)
  assert.equal(answers.length, 1)
  assert.match(answers[0].response.error, /stream closed/)
  assert.ok(remote.lines.some((l) => JSON.parse(l).type === 'result'))
})
