/**
 * A `POST /v1/sessions` whose answer does not reach claude-remote within its
 * bound (a slow gateway, a proxy that sat on the answer, a connection cut
 * after the request went out): the gateway may well have made the session and
 * started its CLI. claude-remote exits 1 all the same, but must not leave
 * that session running, listed and counted against the tenant's
 * MAX_SESSIONS_PER_TENANT, with nobody knowing its id.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { gateway, processAlive } from '../support/gateway.js'
import { WAIT_MS, onlySession, startGate } from '../support/remote.js'
import { startBridge } from '../support/remote-bridge.js'
import { eventually, within } from '../support/waiters.js'

test('a create answered after claude-remote gave up on it: the session it made is stopped, its CLI gone, the tenant\'s slot free; exit 1', async (t) => {
  const gw = await gateway(t, { env: { MAX_SESSIONS_PER_TENANT: '1' } })
  const gate = await startGate(gw.url)
  t.after(() => gate.close())
  // The create reaches the gateway; its answer is held past claude-remote's bound (never released).
  gate.holdCreate()
  // Bound well past a create's own time on a busy machine: the session is stored when claude-remote looks.
  const remote = startBridge(t, gate.url, { createTimeoutMs: 5_000 })
  await within(gate.createAnswered(), WAIT_MS, 'the create at the gateway')
  const made = await onlySession(gw)
  assert.equal(typeof made.pid, 'number')
  assert.equal(await within(remote.done, WAIT_MS, 'claude-remote to exit'), 1, remote.lastSeen())
  assert.ok(remote.warned.some((m) => /POST \/v1\/sessions/.test(m)), remote.lastSeen())
  // What the user sees in the listing: that session is not left running (unfixed: `running` until the idle timeout).
  const after = await onlySession(gw)
  assert.equal(after.id, made.id)
  assert.equal(after.status, 'stopped', `session ${String(after.id)} left ${String(after.status)}`)
  assert.ok(remote.warned.some((m) => m.includes(String(made.id)) && /stopped/.test(m)), remote.lastSeen())
  await eventually(() => !processAlive(made.pid), WAIT_MS, `the CLI (pid ${String(made.pid)}) to be gone`)
  // The tenant's one slot is free again: the next create is not refused 429 tenant_session_limit.
  const next = await gw.request('POST', '/v1/sessions', {})
  assert.equal(next.status, 201, JSON.stringify(next.body))
  await gw.request('DELETE', `/v1/sessions/${String(next.body.id)}`)
})

test('a create the gateway refused in time is not looked for: exit with its code, nothing deleted', async (t) => {
  const gw = await gateway(t, { env: { MAX_SESSIONS_PER_TENANT: '1' } })
  const other = await gw.request('POST', '/v1/sessions', {})
  assert.equal(other.status, 201)
  const remote = startBridge(t, gw.url, { createTimeoutMs: 5_000 })
  assert.equal(await within(remote.done, WAIT_MS, 'claude-remote to exit'), 1, remote.lastSeen())
  assert.ok(remote.warned.some((m) => /tenant_session_limit/.test(m)), remote.lastSeen())
  // The session that held the slot (not claude-remote's) was left alone.
  assert.notEqual((await onlySession(gw)).status, 'stopped')
})

test('a proxy answers the create 504 after the gateway made the session: that session is stopped; exit 1', async (t) => {
  const gw = await gateway(t)
  const gate = await startGate(gw.url)
  t.after(() => gate.close())
  gate.proxyCreate(504)
  const remote = startBridge(t, gate.url)
  assert.equal(await within(remote.done, WAIT_MS, 'claude-remote to exit'), 1, remote.lastSeen())
  assert.ok(remote.warned.some((m) => /504/.test(m)), remote.lastSeen())
  const made = await onlySession(gw)
  assert.equal(made.status, 'stopped', `session ${String(made.id)} left ${String(made.status)}`)
})
