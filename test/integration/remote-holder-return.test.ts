/**
 * Another controller (the web console) takes the session from claude-remote
 * for a while: claude-remote is an observer meanwhile and a prompt the CLI
 * prints then reaches it only as a `request_pending` notice. When that
 * controller leaves, claude-remote holds the session again and the gateway
 * sends it the waiting prompt in full, at the notice's seq. The host (the
 * SDK) must get it: nobody else is left to answer it, and the turn waits.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { gateway } from '../support/gateway.js'
import { onlySession, sdkInitialize, spawnRemote } from '../support/remote.js'

test('a prompt printed while another controller held the session reaches the host once claude-remote holds it again', async (t) => {
  const gw = await gateway(t)
  const remote = spawnRemote(gw)
  t.after(() => remote.child.kill('SIGKILL'))
  remote.write(sdkInitialize())
  await remote.waitLine((f) => f.type === 'control_response')
  const session = await onlySession(gw)

  const web = await gw.connect(session.id, 'role=controller')
  t.after(() => web.terminate())
  await web.waitFor((f) => f.type === 'gateway' && f.subtype === 'hello' && f.role === 'controller')
  web.sendUser('ask Bash touch holder-return.txt')
  const prompt = await web.waitFor((f) => f.type === 'control_request' && f.request?.subtype === 'can_use_tool')
  // The console leaves without answering: claude-remote is the session's only controller again.
  web.ws.close(1000)

  const shown = await remote.waitLine((f) => f.type === 'control_request' && f.request_id === prompt.request_id)
  assert.equal(shown.request.subtype, 'can_use_tool')
  remote.write(JSON.stringify({ type: 'control_response', response: { subtype: 'success', request_id: prompt.request_id, response: { behavior: 'allow', updatedInput: prompt.request.input } } }))
  await remote.waitLine((f) => f.type === 'result')
  remote.child.stdin.end()
  assert.equal(await remote.exited, 0, remote.stderr())
  assert.equal(remote.lines.filter((l) => JSON.parse(l).request_id === prompt.request_id).length, 1, 'the prompt shown once')
})
