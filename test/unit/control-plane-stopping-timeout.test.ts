// The control plane when a request's timeout runs out while its CLI is being
// stopped (stdin closed, exit pending): the request was withdrawn with the
// session, so it is recorded `cancelled` (docs/PROTOCOL.md) and nothing is
// written for it; while the CLI runs, the same timeout is still `timed_out`.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { loadConfig } from '../../src/config.js'
import type { CliState, ControlEffect, Timers } from '../../src/control/control-effects.js'
import { ControlPlane } from '../../src/control/control-plane.js'
import { ControlPolicy } from '../../src/control/control-policy.js'

interface Port { id: string }

/** Timers fired by hand: `fireAll()` runs every one armed so far. */
function handTimers (): Timers & { fireAll: () => void } {
  const due = new Map<number, () => void>()
  let next = 1
  return {
    set: (fn) => { due.set(next, fn); return next++ },
    clear: (handle) => { due.delete(handle as number) },
    now: () => 1_700_000_000_000,
    fireAll: () => { for (const [id, fn] of [...due]) { due.delete(id); fn() } }
  }
}

function plane (cli: () => CliState): { plane: ControlPlane<Port>, timers: ReturnType<typeof handTimers>, effects: Array<ControlEffect<Port>> } {
  const c = loadConfig({ GATEWAY_TOKENS: 'token-tenant-a-0123456789=tenant-a' })
  const timers = handTimers()
  const effects: Array<ControlEffect<Port>> = []
  const p = new ControlPlane<Port>({
    policy: new ControlPolicy({ clientControlAllow: c.clientControlAllow, mcpServerTypes: c.clientMcpServerTypes, permissionUpdateDestinations: c.permissionUpdateDestinations, broadRuleTools: c.permissionBroadRuleTools, allowBypassPermissions: c.allowBypassPermissions }),
    policyScope: () => ({ roots: ['/w'], cwd: '/w/s' }),
    permissionTimeoutMs: 1000,
    controlRequestTimeoutMs: 1000,
    clientRequestTimeoutMs: 1000,
    initializeHoldMs: 0,
    cliState: cli,
    startCli: () => null,
    effects: (e) => { effects.push(e) },
    logger: { warn: () => {} },
    timers
  })
  return { plane: p, timers, effects }
}

const ask = (p: ControlPlane<Port>, id: string, subtype: string, seq: number): void => {
  const request = subtype === 'can_use_tool' ? { subtype, tool_name: 'Bash', input: { command: 'ls' }, tool_use_id: 'toolu_1' } : { subtype, callback_id: 'cb' }
  p.cliRequest(id, request, seq, JSON.stringify({ seq, type: 'control_request', request_id: id, request }))
}

const summary = (effects: Array<ControlEffect<Port>>): Array<string> =>
  effects.map((e) => e.kind === 'record' ? `${e.subtype}:${String(e.fields.request_id)}:${String(e.fields.decision)}` : e.kind)

describe('a request whose timeout runs out', () => {
  it('while the CLI is stopping ends cancelled, with nothing written to the CLI', () => {
    let cli: CliState = 'running'
    const h = plane(() => cli)
    ask(h.plane, 'p1', 'can_use_tool', 3)
    ask(h.plane, 'h1', 'hook_callback', 4)
    cli = 'stopping'
    h.timers.fireAll()
    assert.deepEqual(summary(h.effects), ['permission_resolved:p1:cancelled', 'request_resolved:h1:cancelled'])
    assert.equal(h.plane.pendingCount, 0)
  })

  it('while the CLI runs is timed_out, with the gateway\'s answer written first', () => {
    const h = plane(() => 'running')
    ask(h.plane, 'p1', 'can_use_tool', 3)
    h.timers.fireAll()
    assert.deepEqual(summary(h.effects), ['write_cli', 'permission_resolved:p1:timed_out'])
  })
})
