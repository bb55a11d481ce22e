/**
 * SIGTERM is the CLI's hard stop (exit 143, nothing more printed), also
 * after stdin closed: the Agent SDK closes stdin, then sends SIGTERM 2 s
 * later if the process is still there. claude-remote may still be ending
 * then (its DELETE waits for the gateway's CLI to stop); the signal must not
 * be swallowed by that end.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { test } from 'node:test'
import { eventually, gateway } from '../support/gateway.js'
import { WAIT_MS, onlySession, sdkInitialize, spawnRemote } from '../support/remote.js'
import { within } from '../support/waiters.js'

test('SIGTERM while claude-remote ends after stdin EOF (the CLI slow to stop): exit 143 at once, not 0 once the stop is done', async (t) => {
  // Runs before the gateway's close (hooks run in the order given): the stop under way would hold that
  // close for the rest of CLI_STOP_TIMEOUT_MS, long on purpose, once the check is done.
  let endCli = (): void => {}
  t.after(() => { endCli() })
  // The CLI ignores its stdin's end: the gateway's stop waits CLI_STOP_TIMEOUT_MS before its SIGTERM.
  const gw = await gateway(t, { cliArgs: ['--fake-mode', 'hang'], env: { CLI_STOP_TIMEOUT_MS: '15000' } })
  const remote = spawnRemote(gw)
  t.after(() => remote.child.kill('SIGKILL'))
  remote.write(sdkInitialize())
  const session = await eventually(async () => (await gw.request('GET', '/v1/sessions')).body.sessions[0], WAIT_MS, 'the session')
  await eventually(() => gw.stdinLines(session.id).some((l) => l.type === 'control_request'), WAIT_MS, 'the initialize at the CLI')
  const cliPid = (await onlySession(gw)).pid as number
  endCli = () => {
    // Only while that pid is still this gateway's fake CLI (its own --fake-log-dir), never a reused one.
    try {
      if (readFileSync(`/proc/${cliPid}/cmdline`, 'utf8').includes(gw.fakeLogDir)) process.kill(cliPid, 'SIGKILL')
    } catch { /* gone already */ }
  }
  remote.child.stdin.end()
  // claude-remote's DELETE is under way: the session is stopping.
  await eventually(async () => (await onlySession(gw)).status === 'stopping', WAIT_MS, 'the session stopping')
  remote.child.kill('SIGTERM')
  assert.equal(await within(remote.exited, WAIT_MS, 'claude-remote to exit'), 143, remote.stderr())
})
