// The control-request plane (src/control/control-plane.ts) in-process: no CLI,
// no socket, no store. Ports are plain objects, timers are driven by hand, and
// every assertion is on the effects the plane asks its session to carry out:
// what reaches the CLI's stdin, what is recorded in history, what one client is sent.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { loadConfig } from '../../src/config.js'
import { DEFAULT_DENY_MESSAGE } from '../../src/control/answers.js'
import type { CliState, ControlEffect, Timers } from '../../src/control/control-effects.js'
import { ControlPlane, type ControlPlaneOptions } from '../../src/control/control-plane.js'
import { ControlPolicy, type PolicyScope, type Refusal } from '../../src/control/control-policy.js'
import type { ControlRequestFrame } from '../../src/protocol/client-frames.js'

interface Port { id: string }
type Effect = ControlEffect<Port>

/** Timers that fire only when the test moves the clock. */
class FakeTimers implements Timers {
  #now = 1_700_000_000_000
  #next = 1
  readonly #due = new Map<number, { at: number, fn: () => void }>()
  now = (): number => this.#now
  set = (fn: () => void, ms: number): unknown => {
    const id = this.#next++
    this.#due.set(id, { at: this.#now + ms, fn })
    return id
  }

  clear = (handle: unknown): void => { this.#due.delete(handle as number) }
  get armed (): number { return this.#due.size }

  /** Moves the clock by `ms`, firing due timers in time order. */
  advance (ms: number): void {
    const until = this.#now + ms
    while (true) {
      let first: [number, { at: number, fn: () => void }] | undefined
      for (const entry of this.#due) if (entry[1].at <= until && (first === undefined || entry[1].at < first[1].at)) first = entry
      if (first === undefined) break
      this.#due.delete(first[0])
      this.#now = first[1].at
      first[1].fn()
    }
    this.#now = until
  }
}

const scope: PolicyScope = { roots: ['/data/workspaces/tenant-a'], cwd: '/data/workspaces/tenant-a/s1' }

function defaultPolicy (): ControlPolicy {
  const c = loadConfig({ GATEWAY_TOKENS: 'token-tenant-a-0123456789=tenant-a' })
  return new ControlPolicy({
    clientControlAllow: c.clientControlAllow,
    mcpServerTypes: c.clientMcpServerTypes,
    permissionUpdateDestinations: c.permissionUpdateDestinations,
    broadRuleTools: c.permissionBroadRuleTools,
    allowBypassPermissions: c.allowBypassPermissions
  })
}

interface Harness {
  plane: ControlPlane<Port>
  timers: FakeTimers
  cli: CliState
  startRefusal: Refusal | null
  started: ControlRequestFrame[]
  warnings: string[]
  /** Effects emitted since the last call, oldest first. */
  take: () => Effect[]
}

function harness (options: Partial<ControlPlaneOptions<Port>> = {}): Harness {
  const effects: Effect[] = []
  const timers = new FakeTimers()
  const h: Harness = {
    plane: null as unknown as ControlPlane<Port>,
    timers,
    cli: 'running',
    startRefusal: null,
    started: [],
    warnings: [],
    take: () => effects.splice(0)
  }
  h.plane = new ControlPlane<Port>({
    policy: defaultPolicy(),
    policyScope: () => scope,
    permissionTimeoutMs: 60_000,
    controlRequestTimeoutMs: 30_000,
    clientRequestTimeoutMs: 10_000,
    initializeHoldMs: 0,
    cliState: () => h.cli,
    startCli: (opening) => {
      if (h.startRefusal !== null) return h.startRefusal
      h.started.push(opening)
      h.cli = 'running'
      h.plane.cliStarted(opening)
      return null
    },
    effects: (e) => { effects.push(e) },
    logger: { warn: (_fields, message) => { h.warnings.push(message) } },
    timers,
    ...options
  })
  return h
}

const holder: Port = { id: 'client-a' }
const other: Port = { id: 'client-b' }

/** A CLI control_request as recorded at `seq`. */
function cliAsk (h: Harness, requestId: string, request: Record<string, unknown>, seq: number): string {
  const frame = JSON.stringify({ seq, type: 'control_request', request_id: requestId, request })
  h.plane.cliRequest(requestId, request, seq, frame)
  return frame
}

const bashPrompt = { subtype: 'can_use_tool', tool_name: 'Bash', input: { command: 'ls' }, tool_use_id: 'toolu_1' }

function writes (effects: Effect[]): Array<Record<string, unknown>> {
  return effects.flatMap((e) => e.kind === 'write_cli' ? [e.message] : [])
}

function sent (effects: Effect[], to?: Port): Array<Record<string, any>> {
  return effects.flatMap((e) => e.kind === 'send' && (to === undefined || e.to === to) ? [JSON.parse(e.frame)] : [])
}

function records (effects: Effect[]): Array<{ subtype: string, fields: Record<string, unknown> }> {
  return effects.flatMap((e) => e.kind === 'record' ? [{ subtype: e.subtype, fields: e.fields }] : [])
}

function clientAsk (requestId: string, request: Record<string, unknown>): ControlRequestFrame {
  return { type: 'control_request', request_id: requestId, request: request as ControlRequestFrame['request'] }
}

describe('answers to CLI requests', () => {
  it('the first valid answer wins; later ones are already_resolved, unknown ids unknown_request', () => {
    const h = harness()
    cliAsk(h, 'r1', bashPrompt, 3)
    assert.deepEqual(h.plane.answer('r1', { subtype: 'success', response: { behavior: 'allow' } }, 'client-a'), { ok: true, decision: 'allowed' })
    const effects = h.take()
    assert.deepEqual(effects.map((e) => e.kind), ['write_cli', 'record'], 'written to the CLI, then recorded')
    assert.deepEqual(writes(effects), [{
      type: 'control_response',
      response: { subtype: 'success', request_id: 'r1', response: { behavior: 'allow', updatedInput: { command: 'ls' }, toolUseID: 'toolu_1' } }
    }])
    assert.deepEqual(records(effects), [{ subtype: 'permission_resolved', fields: { request_id: 'r1', request_subtype: 'can_use_tool', decision: 'allowed', by: 'client-a' } }])

    assert.deepEqual(h.plane.answer('r1', { subtype: 'success', response: { behavior: 'deny' } }, 'http:tenant-a'), { ok: false, code: 'already_resolved' })
    assert.deepEqual(h.plane.answer('nope', { subtype: 'success', response: { behavior: 'deny' } }, 'client-a'), { ok: false, code: 'unknown_request' })
    assert.deepEqual(h.take(), [], 'nothing more reaches the CLI or the log')
    assert.equal(h.plane.pendingCount, 0)
    assert.equal(h.timers.armed, 0, 'its timeout is gone')
  })

  it('completes can_use_tool answers: updatedInput as sent, toolUseID, the default deny message', () => {
    const h = harness()
    for (const id of ['a', 'b', 'c', 'd']) cliAsk(h, id, bashPrompt, 1)
    h.plane.answer('a', { subtype: 'success', response: { behavior: 'allow', updatedInput: { command: 'pwd' }, extra: 1 } }, 'x')
    h.plane.answer('b', { subtype: 'success', response: { behavior: 'deny' } }, 'x')
    h.plane.answer('c', { subtype: 'success', response: { behavior: 'deny', message: '', interrupt: true } }, 'x')
    h.plane.answer('d', { subtype: 'success', response: { behavior: 'deny', message: 'not that' } }, 'x')
    const answers = writes(h.take()).map((m) => (m.response as any).response)
    assert.deepEqual(answers, [
      { behavior: 'allow', updatedInput: { command: 'pwd' }, extra: 1, toolUseID: 'toolu_1' },
      { behavior: 'deny', message: DEFAULT_DENY_MESSAGE, toolUseID: 'toolu_1' },
      { behavior: 'deny', message: DEFAULT_DENY_MESSAGE, interrupt: true, toolUseID: 'toolu_1' },
      { behavior: 'deny', message: 'not that', toolUseID: 'toolu_1' }
    ])
  })

  it('an answer that is not a decision is refused and the prompt stays pending', () => {
    const h = harness()
    cliAsk(h, 'r1', bashPrompt, 1)
    const bad = h.plane.answer('r1', { subtype: 'success', response: { ok: true } }, 'x')
    assert.equal(bad.ok, false)
    assert.equal(!bad.ok && bad.code, 'invalid_frame')
    assert.deepEqual(h.take(), [])
    assert.equal(h.plane.pendingCount, 1)
    assert.deepEqual(h.plane.answer('r1', { subtype: 'error', error: 'no UI' }, 'x'), { ok: true, decision: 'denied' })
    assert.deepEqual(writes(h.take()), [{ type: 'control_response', response: { subtype: 'error', request_id: 'r1', error: 'no UI' } }])
  })

  it('other requests get the answer as sent (hook outputs, MCP payloads) and are recorded as request_resolved', () => {
    const h = harness()
    cliAsk(h, 'h1', { subtype: 'hook_callback', callback_id: 'cb' }, 4)
    const response = { continue: true, hookSpecificOutput: { hookEventName: 'PreToolUse' } }
    assert.deepEqual(h.plane.answer('h1', { subtype: 'success', response }, 'client-a'), { ok: true, decision: 'answered' })
    const effects = h.take()
    assert.deepEqual(writes(effects), [{ type: 'control_response', response: { subtype: 'success', request_id: 'h1', response } }])
    assert.deepEqual(records(effects)[0]?.subtype, 'request_resolved')
  })

  it('a grant the policy refuses leaves the prompt pending for a better answer', () => {
    const h = harness()
    cliAsk(h, 'r1', bashPrompt, 1)
    const updatedPermissions = [{ type: 'addRules', rules: [{ toolName: 'Read' }], behavior: 'allow', destination: 'userSettings' }]
    const refused = h.plane.answer('r1', { subtype: 'success', response: { behavior: 'allow', updatedPermissions } }, 'x')
    assert.equal(!refused.ok && refused.code, 'permission_update_not_allowed')
    assert.deepEqual(h.take(), [])
    assert.equal(h.plane.answer('r1', { subtype: 'success', response: { behavior: 'allow' } }, 'x').ok, true)
  })

  it('a plain allow or deny reads nothing of the session\'s scope (its real paths cost file-system calls); a grant of directories does', () => {
    let reads = 0
    const counted: PolicyScope = { get roots () { reads++; return scope.roots }, get cwd () { reads++; return scope.cwd } }
    const h = harness({ policyScope: () => counted })
    cliAsk(h, 'r1', bashPrompt, 1)
    assert.equal(h.plane.answer('r1', { subtype: 'success', response: { behavior: 'allow' } }, 'x').ok, true)
    cliAsk(h, 'r2', bashPrompt, 2)
    assert.equal(h.plane.answer('r2', { subtype: 'success', response: { behavior: 'deny', message: 'no' } }, 'x').ok, true)
    assert.equal(reads, 0)
    cliAsk(h, 'r3', bashPrompt, 3)
    const grant = (dir: string): Record<string, unknown> => ({ behavior: 'allow', updatedPermissions: [{ type: 'addDirectories', directories: [dir], destination: 'session' }] })
    const outside = h.plane.answer('r3', { subtype: 'success', response: grant('/etc') }, 'x')
    assert.equal(!outside.ok && outside.code, 'permission_update_not_allowed')
    assert.ok(reads > 0, 'the directory was checked against the scope')
    assert.equal(h.plane.answer('r3', { subtype: 'success', response: grant('sub/dir') }, 'x').ok, true)
  })
})

describe('timeouts and cancellation', () => {
  it('an unanswered prompt is denied with an interrupt after PERMISSION_TIMEOUT_MS', () => {
    const h = harness()
    cliAsk(h, 'r1', bashPrompt, 1)
    h.timers.advance(59_999)
    assert.deepEqual(h.take(), [])
    h.timers.advance(1)
    const effects = h.take()
    const answer = writes(effects)[0] as any
    assert.equal(answer.response.subtype, 'success')
    assert.equal(answer.response.request_id, 'r1')
    assert.deepEqual({ ...answer.response.response, message: undefined }, { behavior: 'deny', message: undefined, interrupt: true, toolUseID: 'toolu_1' })
    assert.match(answer.response.response.message, /within 60000 ms \(PERMISSION_TIMEOUT_MS\).*did not deny it/)
    assert.deepEqual(records(effects), [{ subtype: 'permission_resolved', fields: { request_id: 'r1', request_subtype: 'can_use_tool', decision: 'timed_out', by: null } }])
    assert.deepEqual(h.plane.answer('r1', { subtype: 'success', response: { behavior: 'allow' } }, 'x'), { ok: false, code: 'already_resolved' })
  })

  it('PERMISSION_TIMEOUT_MS=0 lets a prompt wait for ever, but other requests still time out with an error', () => {
    const h = harness({ permissionTimeoutMs: 0 })
    cliAsk(h, 'p', bashPrompt, 1)
    cliAsk(h, 'm', { subtype: 'mcp_message', server_name: 's', message: {} }, 2)
    assert.equal(h.timers.armed, 1)
    h.timers.advance(30_000)
    const effects = h.take()
    assert.deepEqual(writes(effects), [{ type: 'control_response', response: { subtype: 'error', request_id: 'm', error: 'No client answered within 30000 ms' } }])
    assert.deepEqual(records(effects).map((r) => [r.subtype, r.fields.decision]), [['request_resolved', 'timed_out']])
    assert.deepEqual(h.plane.list().map((p) => p.requestId), ['p'])
  })

  it("the CLI's control_cancel_request ends a prompt as cancelled, with nothing written back", () => {
    const h = harness()
    cliAsk(h, 'r1', bashPrompt, 1)
    h.plane.cliCancel('r1')
    h.plane.cliCancel('never-asked')
    const effects = h.take()
    assert.deepEqual(writes(effects), [])
    assert.deepEqual(records(effects), [{ subtype: 'permission_resolved', fields: { request_id: 'r1', request_subtype: 'can_use_tool', decision: 'cancelled', by: null } }])
    assert.equal(h.timers.armed, 0)
    assert.deepEqual(h.plane.answer('r1', { subtype: 'success', response: { behavior: 'allow' } }, 'x'), { ok: false, code: 'already_resolved' })
  })

  it('CLI exit cancels every pending request and answers every client request waiting on the CLI', () => {
    const h = harness()
    cliAsk(h, 'r1', bashPrompt, 1)
    cliAsk(h, 'h1', { subtype: 'hook_callback' }, 2)
    h.plane.clientRequest(holder, clientAsk('c1', { subtype: 'interrupt' }), true)
    h.take()
    h.cli = 'stopped'
    h.plane.cliExited()
    const effects = h.take()
    assert.deepEqual(records(effects).map((r) => [r.fields.request_id, r.fields.decision]), [['r1', 'cancelled'], ['h1', 'cancelled']])
    assert.deepEqual(sent(effects, holder), [{
      type: 'control_response',
      response: { subtype: 'error', request_id: 'c1', error: 'The CLI exited before answering', code: 'session_not_running', error_code: 'session_not_running' }
    }])
    assert.equal(h.plane.pendingCount, 0)
    assert.equal(h.timers.armed, 0, 'no timer left to fire')
    h.timers.advance(120_000)
    assert.deepEqual(h.take(), [])
  })
})

describe('client requests', () => {
  it("the holder's request reaches the CLI as sent; the CLI's answer stops its timeout", () => {
    const h = harness()
    const frame = clientAsk('c1', { subtype: 'set_model', model: 'opus', newer_sdk_field: 1 })
    h.plane.clientRequest(holder, frame, true)
    assert.deepEqual(writes(h.take()), [frame])
    h.plane.cliResponse('c1')
    h.timers.advance(60_000)
    assert.deepEqual(h.take(), [])
  })

  it('a request the CLI never answers gets request_timeout; its id is free again afterwards', () => {
    const h = harness()
    h.plane.clientRequest(holder, clientAsk('c1', { subtype: 'interrupt' }), true)
    h.take()
    h.timers.advance(10_000)
    assert.deepEqual(sent(h.take(), holder).map((f) => [f.response.request_id, f.response.code]), [['c1', 'request_timeout']])
    h.plane.clientRequest(holder, clientAsk('c1', { subtype: 'interrupt' }), true)
    assert.equal(writes(h.take()).length, 1)
  })

  it('a duplicate id (of a waiting client request or a pending CLI request) is refused, not forwarded', () => {
    const h = harness()
    cliAsk(h, 'shared', bashPrompt, 1)
    h.plane.clientRequest(holder, clientAsk('c1', { subtype: 'interrupt' }), true)
    h.take()
    h.plane.clientRequest(holder, clientAsk('c1', { subtype: 'interrupt' }), true)
    h.plane.clientRequest(holder, clientAsk('shared', { subtype: 'interrupt' }), true)
    const effects = h.take()
    assert.deepEqual(writes(effects), [])
    assert.deepEqual(sent(effects, holder).map((f) => [f.response.request_id, f.response.code]), [['c1', 'duplicate_request_id'], ['shared', 'duplicate_request_id']])
  })

  it('refusals are control_response errors with the request_id and the code', () => {
    const h = harness()
    const ask = (port: Port, id: string, request: Record<string, unknown>, isHolder = true): void => h.plane.clientRequest(port, clientAsk(id, request), isHolder)
    ask(other, 'n1', { subtype: 'interrupt' }, false)
    ask(holder, 'p1', { subtype: 'apply_flag_settings', settings: {} })
    ask(holder, 'p2', { subtype: 'set_permission_mode', mode: 'bypassPermissions' })
    ask(holder, 'p3', { subtype: 'mcp_set_servers', servers: { s: { type: 'stdio', command: 'sh' } } })
    h.cli = 'stopping'
    ask(holder, 's1', { subtype: 'interrupt' })
    h.cli = 'stopped'
    ask(holder, 's2', { subtype: 'interrupt' })
    const effects = h.take()
    assert.deepEqual(writes(effects), [], 'nothing reached the CLI')
    const answers = sent(effects)
    for (const a of answers) {
      assert.equal(a.type, 'control_response')
      assert.equal(a.response.subtype, 'error')
      assert.equal(a.response.error_code, a.response.code)
      assert.ok(typeof a.response.error === 'string' && a.response.error.length > 0)
    }
    assert.deepEqual(answers.map((a) => [a.response.request_id, a.response.code]), [
      ['n1', 'not_holder'],
      ['p1', 'control_not_allowed'],
      ['p2', 'bypass_not_allowed'],
      ['p3', 'control_not_allowed'],
      ['s1', 'session_not_running'],
      ['s2', 'session_not_running']
    ])
    assert.deepEqual(sent(effects, other).length, 1, 'the refusal goes to the client that asked')
    assert.equal(h.timers.armed, 0, 'nothing waits on a refused request')
  })

  it('unknown frame types pass, but update_environment_variables is refused by default', () => {
    const h = harness()
    assert.equal(h.plane.checkOtherType({ type: 'brand_new_type' }), null)
    assert.equal(h.plane.checkOtherType({ type: 'update_environment_variables', variables: { A: '1' } })?.code, 'control_not_allowed')
  })
})

describe('redelivery on holder change', () => {
  it('a new holder gets in full the pending requests it only saw as notices, oldest first', () => {
    const h = harness()
    const first = cliAsk(h, 'r1', bashPrompt, 5)
    const second = cliAsk(h, 'h1', { subtype: 'hook_callback' }, 9)
    h.plane.holderChanged(other, 7)
    // With their seqs: an event stream names each event by it.
    assert.deepEqual(h.take(), [{ kind: 'send', to: other, frame: first, seq: 5 }])
    h.plane.holderChanged(holder, 9)
    assert.deepEqual(h.take(), [{ kind: 'send', to: holder, frame: first, seq: 5 }, { kind: 'send', to: holder, frame: second, seq: 9 }])
    h.plane.answer('r1', { subtype: 'success', response: { behavior: 'allow' } }, 'client-a')
    h.take()
    h.plane.holderChanged(other, 100)
    assert.deepEqual(h.take(), [{ kind: 'send', to: other, frame: second, seq: 9 }], 'an answered request is not offered again')
  })
})

describe("the CLI's initialize", () => {
  const isGatewayInit = (m: Record<string, unknown> | undefined): boolean =>
    m?.type === 'control_request' && String(m.request_id).startsWith('gw_init_') && (m.request as any)?.subtype === 'initialize'

  it("with no hold, a new CLI gets the gateway's initialize at once", () => {
    const h = harness()
    h.plane.cliStarted()
    const sentToCli = writes(h.take())
    assert.equal(sentToCli.length, 1)
    assert.ok(isGatewayInit(sentToCli[0]))
    assert.deepEqual(sentToCli[0]?.request, { subtype: 'initialize' })
  })

  it("during the hold, the holder's own initialize is the CLI's one; it is kept for the next CLI", () => {
    const h = harness({ initializeHoldMs: 500 })
    h.plane.cliStarted()
    assert.deepEqual(h.take(), [])
    const init = clientAsk('sdk-1', { subtype: 'initialize', hooks: { PreToolUse: [] }, systemPrompt: 'be brief' })
    h.plane.clientRequest(holder, init, true)
    assert.deepEqual(h.take(), [{ kind: 'keep_initialize', request: init.request }, { kind: 'write_cli', message: init }])
    h.timers.advance(500)
    assert.deepEqual(writes(h.take()), [], 'the hold ended with it')
    // The next CLI gets the kept one, under the gateway's own id.
    h.plane.cliStarted()
    const next = writes(h.take())
    assert.equal(next.length, 1)
    assert.ok(String(next[0]?.request_id).startsWith('gw_init_'))
    assert.deepEqual(next[0]?.request, init.request)
  })

  it('the hold ends with the first other line for the CLI, or after INITIALIZE_HOLD_MS', () => {
    const h = harness({ initializeHoldMs: 500 })
    h.plane.cliStarted()
    h.plane.toCli({ type: 'user', message: { role: 'user', content: 'hi' } })
    const lines = writes(h.take())
    assert.ok(isGatewayInit(lines[0]))
    assert.equal(lines[1]?.type, 'user')
    h.plane.cliStarted()
    h.timers.advance(499)
    assert.deepEqual(h.take(), [])
    h.timers.advance(1)
    assert.ok(isGatewayInit(writes(h.take())[0]))
  })

  it('a kept initialize the policy now refuses is not sent; the gateway sends its own', () => {
    const h = harness({ initialize: { subtype: 'initialize', permissionMode: 'bypassPermissions' } })
    h.plane.cliStarted()
    const lines = writes(h.take())
    assert.deepEqual(lines.map((m) => m.request), [{ subtype: 'initialize' }])
    assert.equal(h.warnings.length, 1)
  })

  it("an initialize starts a stopped CLI and is its first line; a start refused is the request's answer", () => {
    const h = harness()
    h.cli = 'stopped'
    const init = clientAsk('sdk-1', { subtype: 'initialize' })
    h.plane.clientRequest(holder, init, true)
    assert.deepEqual(h.started, [init])
    assert.deepEqual(h.take(), [{ kind: 'keep_initialize', request: init.request }, { kind: 'write_cli', message: init }])
    assert.equal(h.timers.armed, 1, 'it waits for the CLI to answer')

    const g = harness()
    g.cli = 'stopped'
    g.startRefusal = { code: 'too_many_sessions', message: 'full' }
    g.plane.clientRequest(holder, clientAsk('sdk-2', { subtype: 'initialize' }), true)
    const effects = g.take()
    assert.deepEqual(sent(effects, holder).map((f) => [f.response.request_id, f.response.code, f.response.error]), [['sdk-2', 'too_many_sessions', 'full']])
    assert.equal(g.timers.armed, 0)
  })
})
