/**
 * The control policy end to end (fake CLI, real WebSockets): what a client may
 * ask of the CLI (CLIENT_CONTROL_ALLOW, no stdio MCP server), what its
 * permission answers may grant (no whole-shell-tool allow rule, no directory
 * outside the tenant's workspace), the same rule on `allowed_tools`, and the
 * bypass gate that looks at mode fields only. Refused control requests come
 * back as control_response errors with their request_id; refused answers leave
 * the prompt pending. What reached the CLI is read from the fake CLI's stdin log.
 */
import assert from 'node:assert/strict'
import { existsSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { before, describe, it } from 'node:test'
import { isError, isRefusal, resolved } from '../support/frames.js'
import { type TestGateway, eventually, gateway, suiteScope } from '../support/gateway.js'
import { answer, answersTo, ask, fence, holderOf } from '../support/sessions.js'

const stdinSubtypes = (gw: TestGateway, id: string): string[] =>
  gw.stdinLines(id).filter((l) => l.type === 'control_request').map((l) => l.request?.subtype)

describe('client control requests (default CLIENT_CONTROL_ALLOW)', () => {
  let gw: TestGateway
  const scope = suiteScope()
  before(async () => { gw = await gateway(scope) })

  it('refuses mcp_set_servers with a stdio server as a control_response error with its request_id; nothing reaches the CLI', async (t) => {
    const { id, holder } = await holderOf(gw, t)
    const servers = [
      { pwn: { command: 'sh', args: ['-c', 'touch /tmp/cgw-pwned'] } },
      { pwn: { type: 'stdio', command: 'sh', args: ['-c', 'id'] } },
      { ok: { type: 'sdk', name: 'ok' }, pwn: { type: 'sdk', name: 'pwn', command: 'sh' } }
    ]
    servers.forEach((s, i) => holder.send({ type: 'control_request', request_id: `mcp-${i}`, request: { subtype: 'mcp_set_servers', servers: s } }))
    for (let i = 0; i < servers.length; i++) {
      const refusal = await holder.waitFor(isRefusal('control_not_allowed', `mcp-${i}`))
      assert.deepEqual(Object.keys(refusal), ['type', 'response'], 'no seq: the refusal is not recorded')
      assert.deepEqual(Object.keys(refusal.response).sort(), ['code', 'error', 'error_code', 'request_id', 'subtype'])
      assert.equal(refusal.response.error_code, 'control_not_allowed')
      assert.match(refusal.response.error, /"pwn".*stdio/)
    }
    await fence(holder)
    assert.ok(!stdinSubtypes(gw, id).includes('mcp_set_servers'), 'mcp_set_servers never reached the CLI')
    assert.ok(!gw.stdinText(id).includes('cgw-pwned'))
    const history = (await gw.request('GET', `/v1/sessions/${id}/events?after=0&limit=1000`)).body.events as any[]
    assert.ok(!history.some((e) => String(e.response?.request_id).startsWith('mcp-')), 'refusals are not in history')
    assert.equal(holder.closeCode, null)
  })

  it('forwards mcp_set_servers naming only SDK servers (they run in the client)', async (t) => {
    const { id, holder } = await holderOf(gw, t)
    const sent = { type: 'control_request', request_id: 'mcp-sdk', request: { subtype: 'mcp_set_servers', servers: { mine: { type: 'sdk', name: 'mine' } } } }
    holder.send(sent)
    const res = await holder.waitFor((f) => f.type === 'control_response' && f.response?.request_id === 'mcp-sdk')
    assert.equal(typeof res.seq, 'number', "the CLI's own answer, recorded")
    assert.deepEqual(gw.stdinLines(id).filter((l) => l.request_id === 'mcp-sdk'), [sent])
  })

  it('refuses unlisted subtypes (read_file, apply_flag_settings, made-up ones) and forwards a listed one byte for byte', async (t) => {
    const { id, holder } = await holderOf(gw, t)
    const refused = [
      { subtype: 'read_file', path: '/etc/passwd' },
      { subtype: 'apply_flag_settings', settings: { permissions: { allow: ['Bash'] } } },
      { subtype: 'register_repo_root', directory: '/' },
      { subtype: 'no_such_subtype' }
    ]
    refused.forEach((request, i) => holder.send({ type: 'control_request', request_id: `no-${i}`, request }))
    const setModel = { type: 'control_request', request_id: 'model-1', request: { subtype: 'set_model', model: 'claude-opus-4-1-20250805' } }
    holder.send(setModel)
    for (let i = 0; i < refused.length; i++) await holder.waitFor(isRefusal('control_not_allowed', `no-${i}`))
    const ok = await holder.waitFor((f) => f.type === 'control_response' && f.response?.request_id === 'model-1')
    assert.equal(ok.response.subtype, 'success')
    await fence(holder)
    assert.deepEqual(stdinSubtypes(gw, id).filter((s) => s !== 'initialize' && s !== 'mcp_status'), ['set_model'])
    const raw = gw.stdinText(id).split('\n').filter((l) => l.includes('"model-1"'))
    assert.deepEqual(raw, [JSON.stringify(setModel)])
  })

  it('answers control requests it cannot forward (not holder, duplicate id, no CLI) as control_response errors too', async (t) => {
    const { id, holder } = await holderOf(gw, t)
    const observer = await gw.connect(id, 'role=observer')
    t.after(() => observer.terminate())
    await observer.waitFor((f) => f.subtype === 'hello')
    observer.send({ type: 'control_request', request_id: 'obs-1', request: { subtype: 'interrupt' } })
    await observer.waitFor(isRefusal('not_holder', 'obs-1'))
    await gw.request('DELETE', `/v1/sessions/${id}`)
    await holder.waitFor((f) => f.subtype === 'status' && f.status === 'stopped')
    holder.send({ type: 'control_request', request_id: 'stopped-1', request: { subtype: 'mcp_status' } })
    await holder.waitFor(isRefusal('session_not_running', 'stopped-1'))
  })
})

describe('control requests the CLI does not answer', () => {
  it('a second request with an id in flight gets duplicate_request_id, and the first request_timeout, both as control_response errors', async (t) => {
    const gw = await gateway(t, { cliArgs: ['--fake-mode', 'hang'], env: { CLIENT_REQUEST_TIMEOUT_MS: '300' } })
    const { holder } = await holderOf(gw, t)
    holder.send({ type: 'control_request', request_id: 'slow-1', request: { subtype: 'mcp_status' } })
    holder.send({ type: 'control_request', request_id: 'slow-1', request: { subtype: 'mcp_status' } })
    await holder.waitFor(isRefusal('duplicate_request_id', 'slow-1'))
    await holder.waitFor(isRefusal('request_timeout', 'slow-1'))
    assert.equal(holder.frames.filter((f) => f.type === 'gateway' && f.subtype === 'error').length, 0, 'no gateway error frames for control requests')
  })
})

describe('CLIENT_CONTROL_ALLOW set by the operator', () => {
  it('replaces the default list: a listed subtype is forwarded, an unlisted default one is refused', async (t) => {
    const gw = await gateway(t, { env: { CLIENT_CONTROL_ALLOW: 'mcp_status,read_file' } })
    const { id, holder } = await holderOf(gw, t)
    holder.send({ type: 'control_request', request_id: 'rf', request: { subtype: 'read_file', path: 'README.md' } })
    holder.send({ type: 'control_request', request_id: 'sm', request: { subtype: 'set_model', model: 'opus' } })
    const forwarded = await holder.waitFor((f) => f.type === 'control_response' && f.response?.request_id === 'rf')
    assert.equal(typeof forwarded.seq, 'number', "the CLI's answer (the fake does not know read_file)")
    assert.equal(forwarded.response.code, undefined)
    await holder.waitFor(isRefusal('control_not_allowed', 'sm'))
    await fence(holder)
    assert.deepEqual(stdinSubtypes(gw, id).filter((s) => s !== 'initialize' && s !== 'mcp_status'), ['read_file'])
  })
})

describe('what a permission answer may grant', () => {
  let gw: TestGateway
  const scope = suiteScope()
  before(async () => { gw = await gateway(scope) })

  it('refuses an allow adding a rule for all of Bash or the directory /, over WebSocket and HTTP; the prompt stays pending and takes what the CLI suggested', async (t) => {
    const { id, holder } = await holderOf(gw, t)
    const prompt = await ask(holder, 'ask Bash touch policy-ok.txt')
    const wholeBash = { behavior: 'allow', updatedPermissions: [{ type: 'addRules', rules: [{ toolName: 'Bash' }], behavior: 'allow', destination: 'session' }] }
    const starBash = { behavior: 'allow', updatedPermissions: [{ type: 'addRules', rules: [{ toolName: 'Bash', ruleContent: '*' }], behavior: 'allow', destination: 'localSettings' }] }
    const root = { behavior: 'allow', updatedPermissions: [{ type: 'addDirectories', directories: ['/'], destination: 'session' }] }
    const escape = { behavior: 'allow', updatedPermissions: [{ type: 'addDirectories', directories: ['../../..'], destination: 'session' }] }
    const userWide = { behavior: 'allow', updatedPermissions: [{ type: 'setMode', mode: 'acceptEdits', destination: 'userSettings' }] }
    for (const [i, sneaky] of [wholeBash, starBash, root, escape, userWide].entries()) {
      const before = holder.frames.length
      answer(holder, prompt.request_id, sneaky)
      const err = await holder.waitFor(isError('permission_update_not_allowed'), 10_000, before)
      assert.equal(err.request_id, prompt.request_id, `answer ${i}`)
      const viaHttp = await gw.request('POST', `/v1/sessions/${id}/permissions/${prompt.request_id}`, sneaky)
      assert.equal(viaHttp.status, 403)
      assert.deepEqual(Object.keys(viaHttp.body).sort(), ['code', 'message', 'statusCode'])
      assert.equal(viaHttp.body.code, 'permission_update_not_allowed')
    }
    // Still pending, for every client and over HTTP.
    const pending = (await gw.request('GET', `/v1/sessions/${id}/permissions`)).body.requests as any[]
    assert.deepEqual(pending.map((p) => p.request_id), [prompt.request_id])
    assert.equal(holder.frames.filter(resolved(prompt.request_id)).length, 0)

    // Exactly what the CLI suggested (the command's own rule to localSettings, its cwd for the session) passes.
    const [rule, dirs] = prompt.request.permission_suggestions as any[]
    assert.equal(rule.destination, 'localSettings')
    const good = { behavior: 'allow', updatedInput: prompt.request.input, updatedPermissions: [rule, dirs] }
    answer(holder, prompt.request_id, good)
    assert.equal((await holder.waitFor(resolved(prompt.request_id))).decision, 'allowed')
    await holder.waitFor((f) => f.type === 'result')
    const written = answersTo(gw, id, prompt.request_id)
    assert.equal(written.length, 1, 'one answer reached the CLI')
    assert.deepEqual(written[0]?.response.response.updatedPermissions, [rule, dirs])
    const cwd = gw.argvDumps(id)[0]?.cwd as string
    assert.ok(existsSync(join(cwd, 'policy-ok.txt')), 'the allowed tool ran')
  })

  it('lets an allow whose command merely mentions bypassPermissions through (free text is not a mode)', async (t) => {
    const { id, holder } = await holderOf(gw, t)
    const prompt = await ask(holder, 'ask Bash touch notes-on-bypassPermissions.txt')
    // What the Agent SDK sends: the input back as updatedInput, plus the CLI's rule suggestion.
    answer(holder, prompt.request_id, { behavior: 'allow', updatedInput: prompt.request.input, updatedPermissions: [prompt.request.permission_suggestions[0]] })
    assert.equal((await holder.waitFor(resolved(prompt.request_id))).decision, 'allowed')
    await holder.waitFor((f) => f.type === 'result')
    assert.equal(answersTo(gw, id, prompt.request_id)[0]?.response.response.updatedInput.command, 'touch notes-on-bypassPermissions.txt')
    const cwd = gw.argvDumps(id)[0]?.cwd as string
    assert.ok(existsSync(join(cwd, 'notes-on-bypassPermissions.txt')))
  })

  it('still refuses setMode bypassPermissions in an answer (bypass_not_allowed), leaving the prompt answerable', async (t) => {
    const { id, holder } = await holderOf(gw, t)
    const prompt = await ask(holder, 'ask')
    answer(holder, prompt.request_id, { behavior: 'allow', updatedInput: prompt.request.input, updatedPermissions: [{ type: 'setMode', mode: 'bypassPermissions', destination: 'session' }] })
    await holder.waitFor((f) => isError('bypass_not_allowed')(f) && f.request_id === prompt.request_id)
    answer(holder, prompt.request_id, { behavior: 'deny', message: 'no' })
    assert.equal((await holder.waitFor(resolved(prompt.request_id))).decision, 'denied')
    await fence(holder)
    assert.ok(!gw.stdinText(id).includes('bypassPermissions'))
  })
})

describe('allowed_tools at POST /v1/sessions', () => {
  it('refuses a rule allowing all of Bash with 400 broad_rule_not_allowed while bypass is off, starting nothing; a specific rule is fine', async (t) => {
    const gw = await gateway(t)
    for (const rule of ['Bash', 'Bash(*)', 'Bash(:*)', 'Bash()']) {
      const res = await gw.request('POST', '/v1/sessions', { allowed_tools: ['Read', rule] })
      assert.equal(res.status, 400, rule)
      assert.equal(res.body.code, 'broad_rule_not_allowed', rule)
      assert.equal(res.body.statusCode, 400)
    }
    assert.equal(existsSync(gw.fakeLogDir) ? readdirSync(gw.fakeLogDir).filter((f) => f.endsWith('.argv.json')).length : 0, 0, 'no CLI was started')
    assert.deepEqual((await gw.request('GET', '/v1/sessions')).body.sessions, [])
    const ok = await gw.request('POST', '/v1/sessions', { allowed_tools: ['Read', 'Bash(git log:*)'] })
    assert.equal(ok.status, 201)
    const dump = await eventually(() => gw.argvDumps(ok.body.id)[0], 5000, 'argv dump')
    assert.ok(dump.argv.includes('--allowedTools=Read,Bash(git log:*)'))
  })

  it('accepts allowed_tools ["Bash"] when the operator allows bypass', async (t) => {
    const gw = await gateway(t, { env: { ALLOW_BYPASS_PERMISSIONS: 'true' } })
    assert.equal((await gw.request('POST', '/v1/sessions', { allowed_tools: ['Bash'] })).status, 201)
  })
})
