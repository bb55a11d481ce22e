/**
 * What a client may make the CLI do, checked on the fake CLI's own records
 * (argv/env dump and raw stdin log): bypassPermissions only when the operator
 * allows it (session options and set_permission_mode alike); the working
 * folder stays inside the tenant's workspace whatever `..`, absolute paths or
 * symlinks say; option values never become flags; the CLI's environment is an
 * allowlist that never carries the gateway's secrets.
 */
import assert from 'node:assert/strict'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, realpathSync, rmSync, statSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { baseArgs, promptToolArgs } from '../../src/cli/cli-args.js'
import { isError, isRefusal } from '../support/frames.js'
import { type ArgvDump, TOKEN_B, type TestGateway, eventually, gateway, suiteScope } from '../support/gateway.js'
import { fence, holderOf } from '../support/sessions.js'

/** The fake CLI's argv/env dump of a session's first spawn (written by the CLI as it starts). */
function dumpOf (gw: TestGateway, id: string): Promise<ArgvDump> {
  return eventually(() => gw.argvDumps(id)[0], 5000, `argv dump of ${id}`)
}

function argvFiles (gw: TestGateway): string[] {
  return existsSync(gw.fakeLogDir) ? readdirSync(gw.fakeLogDir).filter((f) => f.endsWith('.argv.json')) : []
}

describe('bypassPermissions is off unless the operator allows it', () => {
  let gw: TestGateway
  const scope = suiteScope()
  before(async () => { gw = await gateway(scope) })

  it('refuses permission_mode bypassPermissions in POST /v1/sessions with 403 bypass_not_allowed, starting nothing', async () => {
    const res = await gw.request('POST', '/v1/sessions', { permission_mode: 'bypassPermissions' })
    assert.equal(res.status, 403)
    assert.deepEqual(Object.keys(res.body).sort(), ['code', 'message', 'statusCode'])
    assert.equal(res.body.statusCode, 403)
    assert.equal(res.body.code, 'bypass_not_allowed')
    assert.deepEqual(argvFiles(gw), [])
    assert.deepEqual((await gw.request('GET', '/v1/sessions')).body.sessions, [])
  })

  it('answers set_permission_mode bypassPermissions from the holder with a bypass_not_allowed control_response error, writing nothing to stdin', async (t) => {
    const { id, holder } = await holderOf(gw, t)
    const attempts = [
      { subtype: 'set_permission_mode', mode: 'bypassPermissions' },
      { subtype: 'set_permission_mode', mode: 'bypassPermissions', destination: 'session', extra: true }
    ]
    attempts.forEach((request, i) => holder.send({ type: 'control_request', request_id: `bypass-${i}`, request }))
    for (let i = 0; i < attempts.length; i++) {
      const err = await holder.waitFor(isRefusal('bypass_not_allowed', `bypass-${i}`))
      assert.equal(typeof err.response.error, 'string')
    }
    // Near misses are not the mode at all: invalid frames (answered as control_response errors), not forwarded either.
    for (const mode of ['BypassPermissions', 'bypassPermissions ', 'bypass']) {
      holder.send({ type: 'control_request', request_id: `near-${mode}`, request: { subtype: 'set_permission_mode', mode } })
      await holder.waitFor(isRefusal('invalid_frame', `near-${mode}`))
    }
    // A permitted mode still goes through (so the refusal above is specific).
    holder.send({ type: 'control_request', request_id: 'accept-edits', request: { subtype: 'set_permission_mode', mode: 'acceptEdits' } })
    const ok = await holder.waitFor((f) => f.type === 'control_response' && f.response?.request_id === 'accept-edits')
    assert.equal(ok.response.subtype, 'success')
    await fence(holder)
    const modes = gw.stdinLines(id).filter((l) => l.request?.subtype === 'set_permission_mode').map((l) => l.request.mode)
    assert.deepEqual(modes, ['acceptEdits'])
    assert.ok(!gw.stdinText(id).includes('bypassPermissions'), 'bypassPermissions never reached the CLI')
    assert.equal(holder.closeCode, null)
  })
})

describe('bypassPermissions cannot come in through other control payloads', () => {
  let gw: TestGateway
  const scope = suiteScope()
  before(async () => { gw = await gateway(scope) })

  it('refuses apply_flag_settings (not in CLIENT_CONTROL_ALLOW by default), writing nothing', async (t) => {
    const { id, holder } = await holderOf(gw, t)
    holder.send({
      type: 'control_request',
      request_id: 'flags',
      request: { subtype: 'apply_flag_settings', settings: { permissions: { defaultMode: 'bypassPermissions' } } }
    })
    await holder.waitFor(isRefusal('control_not_allowed', 'flags'))
    await fence(holder)
    assert.ok(!gw.stdinText(id).includes('bypassPermissions'), 'bypassPermissions never reached the CLI')
  })

  it('once the operator lets apply_flag_settings through, a defaultMode of bypassPermissions in it is still refused', async (t) => {
    const wide = await gateway(t, { env: { CLIENT_CONTROL_ALLOW: 'mcp_status,apply_flag_settings' } })
    const { id, holder } = await holderOf(wide, t)
    holder.send({ type: 'control_request', request_id: 'flags', request: { subtype: 'apply_flag_settings', settings: { permissions: { defaultMode: 'bypassPermissions' } } } })
    await holder.waitFor(isRefusal('bypass_not_allowed', 'flags'))
    await fence(holder)
    assert.ok(!wide.stdinText(id).includes('bypassPermissions'), 'bypassPermissions never reached the CLI')
  })

  it('refuses a permission answer whose updatedPermissions switch to bypassPermissions, over WebSocket and HTTP; the prompt stays answerable', async (t) => {
    const { id, holder } = await holderOf(gw, t)
    holder.sendUser('ask')
    const prompt = await holder.waitFor((f) => f.type === 'control_request' && f.request?.subtype === 'can_use_tool')
    const sneaky = { behavior: 'allow', updatedPermissions: [{ type: 'setMode', mode: 'bypassPermissions', destination: 'session' }] }
    holder.send({ type: 'control_response', response: { subtype: 'success', request_id: prompt.request_id, response: sneaky } })
    await holder.waitFor((f) => isError('bypass_not_allowed')(f) && f.request_id === prompt.request_id)
    const viaHttp = await gw.request('POST', `/v1/sessions/${id}/permissions/${prompt.request_id}`, sneaky)
    assert.equal(viaHttp.status, 403)
    assert.equal(viaHttp.body.code, 'bypass_not_allowed')
    // Still pending: a plain allow goes through, once.
    holder.send({ type: 'control_response', response: { subtype: 'success', request_id: prompt.request_id, response: { behavior: 'allow' } } })
    const resolved = await holder.waitFor((f) => f.subtype === 'permission_resolved' && f.request_id === prompt.request_id)
    assert.equal(resolved.decision, 'allowed')
    await fence(holder)
    assert.ok(!gw.stdinText(id).includes('bypassPermissions'), 'bypassPermissions never reached the CLI')
    assert.equal(gw.stdinLines(id).filter((l) => l.type === 'control_response').length, 1)
  })
})

describe('bypassPermissions with ALLOW_BYPASS_PERMISSIONS=true', () => {
  it('starts the CLI with --permission-mode=bypassPermissions and forwards set_permission_mode', async (t) => {
    const gw = await gateway(t, { env: { ALLOW_BYPASS_PERMISSIONS: 'true' } })
    const { id, holder } = await holderOf(gw, t, { body: { permission_mode: 'bypassPermissions' } })
    assert.ok((await dumpOf(gw, id)).argv.includes('--permission-mode=bypassPermissions'))
    holder.send({ type: 'control_request', request_id: 'to-bypass', request: { subtype: 'set_permission_mode', mode: 'bypassPermissions' } })
    const res = await holder.waitFor((f) => f.type === 'control_response' && f.response?.request_id === 'to-bypass')
    assert.equal(res.response.subtype, 'success')
  })
})

describe('working folder confinement', () => {
  const scope = suiteScope()
  let gw: TestGateway
  let outside: string
  let root: string
  before(async () => {
    gw = await gateway(scope)
    outside = mkdtempSync(join(tmpdir(), 'cgw-outside-'))
    root = join(gw.dataDir, 'workspaces', 'tenant-a')
    mkdirSync(root, { recursive: true })
    mkdirSync(join(gw.dataDir, 'workspaces', 'tenant-b', 'their-project'), { recursive: true })
    symlinkSync(outside, join(root, 'escape'))
    symlinkSync(join(gw.dataDir, 'workspaces', 'tenant-b'), join(root, 'to-b'))
    symlinkSync('../../..', join(root, 'up'))
  })
  after(async () => {
    rmSync(outside, { recursive: true, force: true })
  })

  it('refuses .., absolute paths and symlinks leading outside with 400, creating nothing outside and starting nothing', async () => {
    const cases = [
      '..', '../..', '../../etc', 'a/../../..', '../tenant-b', '../tenant-a-evil', 'a/../../tenant-b/their-project',
      '/etc', '/tmp', outside, join(root, 'inside-but-absolute'),
      'escape', 'escape/sub', 'escape/sub/deeper', 'to-b', 'to-b/their-project', 'to-b/new', 'up', 'up/etc'
    ]
    for (const cwd of cases) {
      const res = await gw.request('POST', '/v1/sessions', { cwd })
      assert.equal(res.status, 400, `cwd ${cwd}: ${res.status} ${JSON.stringify(res.body)}`)
      assert.equal(res.body.code, 'bad_request', cwd)
    }
    assert.deepEqual(readdirSync(outside), [], 'nothing was created through the symlink')
    assert.deepEqual(readdirSync(join(gw.dataDir, 'workspaces', 'tenant-b')), ['their-project'])
    assert.ok(!existsSync(join(gw.dataDir, 'workspaces', 'tenant-a-evil')))
    assert.ok(!existsSync(join(gw.dataDir, 'etc')))
    assert.ok(!existsSync(join(root, 'inside-but-absolute')))
    assert.deepEqual(argvFiles(gw), [], 'no CLI was started')
    assert.deepEqual((await gw.request('GET', '/v1/sessions')).body.sessions, [], 'no session was stored')
  })

  it('accepts a sub-folder (also one reached through .. that stays inside) and runs the CLI there', async () => {
    const id = (await gw.createSession({ cwd: 'project/./x/../sub' })).id
    const dump = await dumpOf(gw, id)
    assert.equal(dump.cwd, realpathSync(join(root, 'project', 'sub')))
    assert.ok(statSync(dump.cwd).isDirectory())
    await gw.request('DELETE', `/v1/sessions/${id}`)
  })
})

describe('session options never become flags', () => {
  it('glues each value to its own flag, so values that look like flags stay values', async (t) => {
    const gw = await gateway(t)
    const options = {
      model: '--dangerously-skip-permissions',
      permission_mode: 'default',
      allowed_tools: ['--dangerously-skip-permissions', 'Bash(--x --permission-mode bypassPermissions)'],
      disallowed_tools: ['-p'],
      append_system_prompt: '--dangerously-skip-permissions\n--permission-mode bypassPermissions --add-dir /',
      max_turns: 3,
      include_partial_messages: true,
      cwd: '--add-dir=',
      metadata: { flag: '--mcp-config=/tmp/evil.json', list: ['--settings', '/tmp/evil.json'] }
    }
    const { id, holder } = await holderOf(gw, t, { body: options })
    const dump = await dumpOf(gw, id)
    assert.deepEqual(dump.argv, [
      ...baseArgs,
      ...promptToolArgs,
      '--session-id', id,
      '--model=--dangerously-skip-permissions',
      '--permission-mode=default',
      '--allowedTools=--dangerously-skip-permissions,Bash(--x --permission-mode bypassPermissions)',
      '--disallowedTools=-p',
      '--append-system-prompt=--dangerously-skip-permissions\n--permission-mode bypassPermissions --add-dir /',
      '--max-turns=3',
      '--include-partial-messages',
      '--fake-log-dir', gw.fakeLogDir
    ])
    for (const forbidden of ['--dangerously-skip-permissions', '--permission-mode', '--add-dir', '--settings', '-p']) {
      assert.ok(!dump.argv.includes(forbidden), `${forbidden} is not an argument of its own`)
    }
    assert.ok(!dump.argv.some((a) => a.startsWith('--mcp-config')))
    // The CLI read them as values: the model is the odd string, the mode stays default.
    holder.sendUser('hello')
    const init = await holder.waitFor((f) => f.type === 'system' && f.subtype === 'init')
    assert.equal(init.model, '--dangerously-skip-permissions')
    assert.equal(init.permissionMode, 'default')
    await holder.waitFor((f) => f.type === 'result')
  })

  it('refuses option values the schema does not allow (flag-ish model with spaces, NUL, unknown keys) with 400', async (t) => {
    const gw = await gateway(t)
    for (const body of [
      { model: 'sonnet --dangerously-skip-permissions' },
      { model: 'a\0b' },
      { allowed_tools: ['Bash\n--dangerously-skip-permissions'] },
      { allowed_tools: 'Bash' },
      { append_system_prompt: 'x\0y' },
      { cwd: 'a\0b' },
      { dangerously_skip_permissions: true },
      { extra_args: ['--dangerously-skip-permissions'] },
      { max_turns: '3 --dangerously-skip-permissions' }
    ]) {
      const res = await gw.request('POST', '/v1/sessions', body)
      assert.equal(res.status, 400, JSON.stringify(body))
      assert.equal(res.body.code, 'bad_request')
    }
    assert.deepEqual(argvFiles(gw), [])
  })
})

describe('CLI environment', () => {
  const secrets = {
    GATEWAY_TOKENS: 'leaked-gateway-token-0123456789=tenant-a',
    REDIS_URL: 'redis://:leaked-redis-password@redis.internal:6379',
    JWT_SECRET: 'leaked-jwt-secret-0123456789-0123456789',
    JWT_PUBLIC_KEY: '-----BEGIN PUBLIC KEY-----leaked-----END PUBLIC KEY-----',
    AWS_SECRET_ACCESS_KEY: 'leaked-aws-secret-access-key',
    AWS_ACCESS_KEY_ID: 'AKIALEAKEDKEYID',
    GITHUB_TOKEN: 'ghp_leakedgithubtoken',
    DATABASE_URL: 'postgres://u:leaked-db-password@db/x',
    NODE_OPTIONS: '--require /nonexistent/leaked-preload.cjs',
    LD_PRELOAD: '/nonexistent/leaked-preload.so'
  }

  it("passes only the allowlist: no gateway secret or unrelated secret, the gateway's entrypoint, and the tenant's own config dir", async (t) => {
    const gw = await gateway(t, {
      parts: {
        env: {
          PATH: process.env.PATH,
          HOME: process.env.HOME,
          LANG: 'C.UTF-8',
          ANTHROPIC_API_KEY: 'sk-ant-test-key',
          CLAUDE_CODE_ENTRYPOINT: 'spoofed-entrypoint',
          CLAUDE_CONFIG_DIR: '/tmp/operator-config-dir',
          ...secrets
        }
      }
    })
    const a = await holderOf(gw, t)
    const b = (await gw.createSession({}, TOKEN_B)).id as string

    const envA = (await dumpOf(gw, a.id)).env
    const envB = (await dumpOf(gw, b)).env
    for (const env of [envA, envB]) {
      for (const name of Object.keys(secrets)) assert.equal(env[name], undefined, `${name} reached the CLI`)
      const text = JSON.stringify(env)
      for (const value of Object.values(secrets)) assert.ok(!text.includes(value), `a secret value reached the CLI: ${value}`)
      assert.equal(env.CLAUDE_CODE_ENTRYPOINT, 'claude-gateway')
      assert.equal(env.PATH, process.env.PATH)
      assert.equal(env.ANTHROPIC_API_KEY, 'sk-ant-test-key', 'the API key the CLI needs does pass')
    }
    const configA = join(gw.dataDir, 'claude-config', 'tenant-a')
    assert.equal(envA.CLAUDE_CONFIG_DIR, configA)
    assert.equal(envB.CLAUDE_CONFIG_DIR, join(gw.dataDir, 'claude-config', 'tenant-b'))
    assert.equal(statSync(configA).mode & 0o777, 0o700)

    // What a tool running in the CLI would print.
    a.holder.sendUser('env')
    const said = await a.holder.waitFor((f) => f.type === 'assistant')
    const printed = JSON.parse(said.message.content[0].text) as Record<string, string>
    assert.equal(printed.CLAUDE_CODE_ENTRYPOINT, 'claude-gateway')
    assert.equal(printed.CLAUDE_CONFIG_DIR, configA)
    for (const name of Object.keys(secrets)) assert.equal(printed[name], undefined, name)
    await a.holder.waitFor((f) => f.type === 'result')
  })
})
