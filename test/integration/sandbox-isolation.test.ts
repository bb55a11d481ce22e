/**
 * SANDBOX=bwrap with the fake CLI: what a tool (the fake's `run <command>`,
 * i.e. a Bash call the holder allowed) can see and keep from inside its
 * session's sandbox. Two tenants; tenant B's workspace holds a secret.
 * Without a sandbox (today's main), every check below fails: the tool sees
 * the whole host as the gateway's user.
 */
import assert from 'node:assert/strict'
import { existsSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { before, describe, it, type TestContext } from 'node:test'
import { type Scope, TOKEN_B, type TestClient, type TestGateway, eventually, processAlive, gateway, suiteScope } from '../support/gateway.js'
import { pidsWithArgv, run, sandboxUnavailable, say } from '../support/sandbox.js'

const unavailable = sandboxUnavailable()

interface Setup { gw: TestGateway, id: string, holder: TestClient, secretOfB: string, configOfB: string }
interface Shared { gw: TestGateway, secretOfB: string, configOfB: string }

/** The gateway of the cases below and tenant B's session holding a secret: one for all, each case has its own tenant-a session. */
async function sharedGateway (scope: Scope): Promise<Shared> {
  // No --fake-log-dir: it is under the gateway's DATA_DIR, which no sandbox shows.
  const gw = await gateway(scope, { env: { SANDBOX: 'bwrap', CLAUDE_ARGS_EXTRA: '' } })
  const b = await gw.createSession({}, TOKEN_B)
  const holderB = await gw.connect(b.id, '', TOKEN_B)
  await holderB.waitFor((f) => f.subtype === 'hello')
  assert.match(await run(holderB, 'echo "tenant-b secret" > secret.txt'), /\[exit 0\]$/)
  const secretOfB = realpathSync(join(gw.dataDir, 'workspaces', 'tenant-b', b.id, 'secret.txt'))
  const configOfB = join(gw.dataDir, 'claude-config', 'tenant-b')
  writeFileSync(join(configOfB, '.credentials.json'), '{"token":"tenant-b"}')
  return { gw, secretOfB, configOfB }
}

async function setup (t: TestContext, shared: Shared, body: Record<string, unknown> = {}): Promise<Setup> {
  const created = await shared.gw.createSession(body)
  const holder = await shared.gw.connect(created.id)
  t.after(() => holder.terminate())
  await holder.waitFor((f) => f.subtype === 'hello')
  return { ...shared, id: created.id, holder }
}

describe('SANDBOX=bwrap (fake CLI)', { skip: unavailable ?? false }, () => {
  const scope = suiteScope()
  let shared: Shared
  before(async () => { shared = await sharedGateway(scope) })

  it("shows a tool only its own processes, not the gateway's /proc entry or environment", async (t) => {
    const { holder } = await setup(t, shared)
    // The gateway is this test process.
    const environ = await run(holder, `cat /proc/${process.pid}/environ; echo; cat /proc/${process.pid}/cmdline`)
    assert.match(environ, /No such file or directory/)
    assert.doesNotMatch(environ, /PATH=|node/)
    const pids = (await run(holder, 'ls /proc')).split(/\s+/).filter((e) => /^\d+$/.test(e)).map(Number)
    // bwrap's init, the CLI, socat, the shell and `ls`: a handful, none of them the gateway.
    assert.ok(pids.length > 0 && pids.length <= 10, `pids seen inside: ${pids.join(' ')}`)
    assert.ok(!pids.includes(process.pid) || process.pid <= 10, 'the gateway pid is not visible')
    assert.ok(pids.includes(1), 'its own pid namespace (an init as pid 1)')
  })

  it("shows the tenant's own folders read-write and neither other tenants nor the gateway's data dir", async (t) => {
    const { gw, id, holder, secretOfB, configOfB } = await setup(t, shared)
    const mine = join(realpathSync(join(gw.dataDir, 'workspaces', 'tenant-a')), id) // made inside the sandbox
    assert.equal(await run(holder, 'pwd'), `${mine}\n[exit 0]`, 'the session folder, same path as on the host')
    assert.match(await run(holder, 'echo mine > mine.txt && cat mine.txt'), /^mine\n\[exit 0\]$/)
    assert.equal(readFileSync(join(mine, 'mine.txt'), 'utf8'), 'mine\n', 'written to the real workspace')

    assert.match(await say(holder, `read ${secretOfB}`), /^read-error: ENOENT$/)
    assert.match(await say(holder, `read ${join(configOfB, '.credentials.json')}`), /^read-error: ENOENT$/)
    assert.ok(existsSync(join(gw.dataDir, 'pids')), 'the gateway keeps pid files there')
    assert.match(await run(holder, `ls ${gw.dataDir}`), /^claude-config\nworkspaces\n\[exit 0\]$/, 'of the data dir, only the parents of its own folders')
    assert.equal(await run(holder, `ls ${join(gw.dataDir, 'workspaces')}; ls ${join(gw.dataDir, 'claude-config')}`), 'tenant-a\ntenant-a\n[exit 0]')
    assert.equal(await run(holder, 'test -e "$HOME/../tenant-b" && echo visible || echo absent'), 'absent\n[exit 0]')

    // The system: read-only, and only the allowlisted part of /etc.
    assert.match(await run(holder, 'touch /usr/bin/planted'), /Read-only file system/)
    assert.doesNotMatch(await say(holder, 'read /etc/passwd'), /^read-error/)
    assert.match(await say(holder, 'read /etc/shadow'), /^read-error: ENOENT$/)
    if (existsSync('/etc/ssl/private')) assert.match(await run(holder, 'ls /etc/ssl/private'), /No such file or directory/, 'no host TLS keys')
  })

  it('creates and enters a cwd inside the tenant root, at the same path as on the host', async (t) => {
    const { gw, holder } = await setup(t, shared, { cwd: 'proj/deep/er' })
    const root = realpathSync(join(gw.dataDir, 'workspaces', 'tenant-a'))
    assert.equal(await run(holder, 'pwd -P'), `${join(root, 'proj/deep/er')}\n[exit 0]`)
    assert.ok(existsSync(join(root, 'proj/deep/er')), 'made by the sandbox, visible on the host')
    for (const cwd of ['../tenant-b', 'a/../../..', '/etc', 'x\u0000y']) {
      const res = await gw.request('POST', '/v1/sessions', { cwd })
      assert.equal(res.status, 400, `cwd ${JSON.stringify(cwd)}: ${JSON.stringify(res.body)}`)
    }
  })

  it("passes the CLI only the gateway's allowlisted environment, the sandbox's HOME/TMPDIR and the proxy", async (t) => {
    const { gw, holder } = await setup(t, shared)
    const env = JSON.parse(await say(holder, 'env')) as Record<string, string>
    const proxy = 'http://127.0.0.1:3128'
    assert.equal(env.HTTPS_PROXY, proxy)
    assert.equal(env.HTTP_PROXY, proxy)
    assert.equal(env.https_proxy, proxy)
    assert.equal(env.http_proxy, proxy)
    assert.equal(env.NO_PROXY, '')
    assert.equal(env.no_proxy, '')
    assert.equal(env.HOME, join(gw.dataDir, 'claude-config', 'tenant-a'))
    assert.equal(env.TMPDIR, '/tmp')
    // What the allowlist passes (src/cli/cli-env.ts) plus the above; bwrap and sh add only PWD/OLDPWD.
    const unexpected = Object.keys(env).filter((k) => !/^(PATH|HOME|LANG|LANGUAGE|TZ|TERM|TMPDIR|USER|LOGNAME|SHELL|PWD|OLDPWD|SHLVL|_|LC_.*|ANTHROPIC_.*|CLAUDE_.*|MCP_.*|NODE_EXTRA_CA_CERTS|SSL_CERT_(FILE|DIR)|XDG_.*|DISABLE_.*|HTTPS?_PROXY|https?_proxy|NO_PROXY|no_proxy)$/.test(k))
    assert.deepEqual(unexpected, [])
  })

  it("ends a tool's background processes with the session, even one that left the process group", async (t) => {
    const { gw, id, holder } = await setup(t, shared)
    // setsid: its own session and process group, out of reach of the gateway's group signals
    // (what a tool can do without a sandbox). Unique durations to find them on the host.
    const escaped = ['sleep', '987.125']
    const plain = ['sleep', '987.375']
    assert.match(await run(holder, `setsid ${escaped.join(' ')} >/dev/null 2>&1 & ${plain.join(' ')} >/dev/null 2>&1 & echo started`), /started/)
    await eventually(() => pidsWithArgv(escaped).length === 1 && pidsWithArgv(plain).length === 1, 5000, 'both sleeps to run')
    assert.equal((await gw.request('DELETE', `/v1/sessions/${id}`)).status, 200)
    await eventually(() => pidsWithArgv(escaped).length === 0 && pidsWithArgv(plain).length === 0, 5000, 'both sleeps to be gone after DELETE')

    // The CLI exiting by itself (stdin closed after `exit 0`) takes the namespace down too.
    const from = holder.frames.length
    holder.sendUser('run echo restarted') // restarts the CLI (--resume)
    await holder.waitFor((f) => f.type === 'result', 15_000, from)
    const again = ['sleep', '987.625']
    await run(holder, `setsid ${again.join(' ')} >/dev/null 2>&1 & echo ok`)
    await eventually(() => pidsWithArgv(again).length === 1, 5000, 'the sleep to run')
    const pid = (await gw.request('GET', `/v1/sessions/${id}`)).body.pid as number
    holder.sendUser('exit 0')
    await eventually(() => !processAlive(pid), 10_000, 'the CLI to exit')
    await eventually(() => pidsWithArgv(again).length === 0, 5000, 'the sleep to be gone once the CLI exited')
  })
})

describe('SANDBOX=bwrap stop ladder', { skip: unavailable ?? false }, () => {
  it('ends a sandboxed CLI that ignores stdin EOF and SIGTERM: the signal to the group takes the whole sandbox down', async (t) => {
    const gw = await gateway(t, { env: { SANDBOX: 'bwrap', CLAUDE_ARGS_EXTRA: '--fake-mode hang,ignore-sigterm', CLI_STOP_TIMEOUT_MS: '300' } })
    const created = await gw.createSession()
    const holder = await gw.connect(created.id)
    t.after(() => holder.terminate())
    await holder.waitFor((f) => f.subtype === 'hello')
    await eventually(() => pidsWithArgvContaining(created.id).length > 0, 5000, 'the sandboxed CLI to run')
    const started = Date.now()
    assert.equal((await gw.request('DELETE', `/v1/sessions/${created.id}`)).status, 200)
    // stdin closed and ignored, then SIGTERM to the group: the outer bwrap dies of it, and the
    // kernel kills its namespace (--die-with-parent), whatever the CLI does with the signal.
    assert.ok(Date.now() - started >= 300, 'the stdin step was waited out first')
    await eventually(() => !processAlive(created.pid) && pidsWithArgvContaining(created.id).length === 0, 5000, 'bwrap and the CLI inside to be gone')
    assert.equal((await gw.request('GET', `/v1/sessions/${created.id}`)).body.status, 'stopped')
  })
})

/** Host pids of live processes with `text` in one of their arguments (the session id is in the CLI's argv). */
function pidsWithArgvContaining (text: string): number[] {
  const pids: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').some((a) => a.includes(text)) && processAlive(Number(entry))) pids.push(Number(entry))
    } catch {
      // gone meanwhile
    }
  }
  return pids
}

describe('SANDBOX=bwrap start-up', { skip: unavailable ?? false }, () => {
  it('refuses to start when the sandbox cannot run, saying what to install or set', async (t) => {
    const dataDir = mkdtempSync(join(tmpdir(), 'cgw-probe-'))
    t.after(() => rmSync(dataDir, { recursive: true, force: true }))
    await assert.rejects(
      gateway(t, { dataDir, env: { SANDBOX: 'bwrap' }, parts: { probeSandbox: async () => ({ code: 1, signal: null, error: '', output: 'bwrap: No permissions to create new namespace' }) } }),
      (err: Error) => {
        assert.match(err.message, /SANDBOX=bwrap \(the default\) cannot run here/)
        assert.match(err.message, /No permissions to create new namespace/)
        assert.match(err.message, /Install bubblewrap and socat/)
        assert.match(err.message, /SANDBOX=none/)
        return true
      }
    )
  })
})
