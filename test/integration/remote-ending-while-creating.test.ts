/**
 * The host may stop claude-remote before the gateway has answered its
 * `POST /v1/sessions` (the Agent SDK's SIGTERM, a Ctrl-C, a script whose
 * stdin was empty). The gateway has made the session by then and started
 * its CLI: once the answer names it, claude-remote must stop it, or that CLI
 * runs on with nobody to end it.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { gateway } from '../support/gateway.js'
import { SDK_ARGS, WAIT_MS, onlySession, spawnRemote, startGate } from '../support/remote.js'
import { within } from '../support/waiters.js'

const endings: Array<{ how: string, end: (remote: ReturnType<typeof spawnRemote>) => void, code: number }> = [
  { how: 'SIGTERM', end: (remote) => remote.child.kill('SIGTERM'), code: 143 },
  { how: 'SIGINT', end: (remote) => remote.child.kill('SIGINT'), code: 0 },
  { how: 'stdin EOF', end: (remote) => remote.child.stdin.end(), code: 0 }
]

for (const { how, end, code } of endings) {
  test(`${how} while the session is being created: the session is stopped once its create answers, exit ${code}`, async (t) => {
    const gw = await gateway(t)
    const gate = await startGate(gw.url)
    t.after(() => gate.close())
    gate.holdCreate()
    const remote = spawnRemote(gw, [...SDK_ARGS, '--debug'], { CLAUDE_REMOTE_URL: gate.url })
    t.after(() => remote.child.kill('SIGKILL'))
    // The gateway made the session (its CLI runs); claude-remote has not heard back yet.
    await within(gate.createAnswered(), WAIT_MS, 'the create at the gateway')
    const session = await onlySession(gw)
    assert.notEqual(session.status, 'stopped')
    const observer = await gw.connect(String(session.id), 'role=observer')
    end(remote)
    // The signal (or EOF) is taken before the answer arrives.
    await remote.until(() => /ending the session/.test(remote.stderr()), 'claude-remote ending')
    gate.release()
    assert.equal(await within(remote.exited, WAIT_MS, 'claude-remote to exit'), code, remote.stderr())
    // Its CLI stopped (unfixed: it ran on, with nobody to end it).
    await observer.waitFor((f) => f.type === 'gateway' && f.subtype === 'status' && f.status === 'stopped', WAIT_MS)
  })
}

// The create fails (the operator forbids bypassPermissions: 403) after the SIGTERM was taken: the host
// asked for the stop, so the exit is the signal's, not the create's failure; no session is left behind.
test('SIGTERM while a create that fails is under way: exit 143, not the create\'s 1; no session left', async (t) => {
  const gw = await gateway(t)
  const gate = await startGate(gw.url)
  t.after(() => gate.close())
  gate.holdCreate()
  const remote = spawnRemote(gw, [...SDK_ARGS, '--permission-mode', 'bypassPermissions', '--debug'], { CLAUDE_REMOTE_URL: gate.url })
  t.after(() => remote.child.kill('SIGKILL'))
  await within(gate.createAnswered(), WAIT_MS, 'the create\'s refusal at the gate')
  remote.child.kill('SIGTERM')
  await remote.until(() => /ending the session/.test(remote.stderr()), 'claude-remote ending')
  gate.release()
  assert.equal(await within(remote.exited, WAIT_MS, 'claude-remote to exit'), 143, remote.stderr())
  assert.match(remote.stderr(), /bypass_not_allowed/)
  assert.deepEqual((await gw.request('GET', '/v1/sessions')).body.sessions, [])
})
