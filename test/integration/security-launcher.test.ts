/**
 * CLAUDE_LAUNCHER=config/launchers/bwrap.sh: each CLI sees the system
 * read-only, its own session's workspace and its tenant's config dir, and
 * nothing else. Checked with the fake CLI's `read <path>` (what any tool the
 * CLI runs could read) and a `touch` the holder allows. Run without
 * `--fake-log-dir`, which the sandbox could not see. The last test documents
 * what SANDBOX=none with no launcher does NOT protect (the reason the default
 * is SANDBOX=bwrap, tested in sandbox-*.test.ts): one tenant's CLI can read
 * another tenant's files.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, it, type TestContext } from 'node:test'
import { TOKEN_B, type TestClient, type TestGateway, eventually, processAlive, gateway } from '../support/gateway.js'

const LAUNCHER = fileURLToPath(new URL('../../config/launchers/bwrap.sh', import.meta.url))

/** Why the sandbox cannot run here, or null when it can. */
function sandboxUnavailable (): string | null {
  const probe = spawnSync('bwrap', ['--ro-bind', '/', '/', 'true'], { stdio: 'ignore', timeout: 5000 })
  if (probe.error !== undefined) return `bwrap is not installed (${probe.error.message})`
  if (probe.status !== 0) return '`bwrap --ro-bind / / true` fails here (no unprivileged user namespaces?)'
  // bwrap.sh binds /usr, /bin, /lib*, /etc and the CLI's folder: node must live there to start the fake CLI.
  const node = realpathSync(process.execPath)
  if (!['/usr/', '/bin/', '/lib/', '/lib64/', '/sbin/'].some((p) => node.startsWith(p))) return `node (${node}) is outside the folders bwrap.sh exposes`
  return null
}
const unavailable = sandboxUnavailable()

/** Sends a prompt and returns the assistant text of that turn (the fake answers with one text block). */
async function say (holder: TestClient, prompt: string): Promise<string> {
  const from = holder.frames.length
  holder.sendUser(prompt)
  await holder.waitFor((f) => f.type === 'result', 10_000, from)
  const texts = holder.frames.slice(from).filter((f) => f.type === 'assistant').flatMap((f) => f.message.content)
    .filter((b: any) => b.type === 'text').map((b: any) => b.text as string)
  return texts.join('\n')
}

function workspaceOf (gw: TestGateway, tenant: string, id: string): string {
  return realpathSync(join(gw.dataDir, 'workspaces', tenant, id))
}

interface Tenants { gw: TestGateway, a: { id: string, holder: TestClient, dir: string, pid: number }, secretOfB: string }

/** Tenant B's session has a secret file; tenant A holds a session of its own. */
async function twoTenants (t: TestContext, env: Record<string, string>): Promise<Tenants> {
  const gw = await gateway(t, { env })
  const b = await gw.createSession({}, TOKEN_B)
  const secretOfB = join(workspaceOf(gw, 'tenant-b', b.id), 'secret.txt')
  writeFileSync(secretOfB, 'tenant-b secret\n')
  const created = await gw.createSession()
  const holder = await gw.connect(created.id)
  t.after(() => holder.terminate())
  await holder.waitFor((f) => f.subtype === 'hello')
  const dir = workspaceOf(gw, 'tenant-a', created.id)
  writeFileSync(join(dir, 'mine.txt'), 'tenant-a own file\n')
  return { gw, a: { id: created.id, holder, dir, pid: created.pid }, secretOfB }
}

describe('bubblewrap launcher', { skip: unavailable ?? false }, () => {
  it("keeps a tenant's CLI out of other tenants' workspaces and the gateway's data, while its own workspace works", async (t) => {
    const { gw, a, secretOfB } = await twoTenants(t, { CLAUDE_LAUNCHER: LAUNCHER, CLAUDE_ARGS_EXTRA: '' })

    assert.equal(await say(a.holder, `read ${join(a.dir, 'mine.txt')}`), 'tenant-a own file\n')
    assert.equal(await say(a.holder, 'read mine.txt'), 'tenant-a own file\n', 'the CLI runs in its workspace')

    assert.match(await say(a.holder, `read ${secretOfB}`), /^read-error: (ENOENT|EACCES|EPERM)$/)
    // Nor the gateway's own files: other tenants' CLI config, pid files.
    const configB = join(gw.dataDir, 'claude-config', 'tenant-b')
    mkdirSync(configB, { recursive: true })
    writeFileSync(join(configB, '.credentials.json'), '{"token":"tenant-b"}')
    assert.match(await say(a.holder, `read ${join(configB, '.credentials.json')}`), /^read-error: /)
    assert.match(await say(a.holder, `read ${join(gw.dataDir, 'pids', `${a.id}.${process.pid}.pid`)}`), /^read-error: /)
    assert.ok(existsSync(join(gw.dataDir, 'pids', `${a.id}.${process.pid}.pid`)), 'the pid file does exist outside the sandbox')
    // The system is there, read-only.
    assert.doesNotMatch(await say(a.holder, 'read /etc/passwd'), /^read-error/)

    // A tool the holder allows writes into the session's workspace, visible from outside.
    const from = a.holder.frames.length
    a.holder.sendUser('ask Bash touch made-by-a.txt')
    const prompt = await a.holder.waitFor((f) => f.type === 'control_request' && f.request?.subtype === 'can_use_tool', 10_000, from)
    a.holder.send({ type: 'control_response', response: { subtype: 'success', request_id: prompt.request_id, response: { behavior: 'allow', updatedInput: prompt.request.input } } })
    const result = await a.holder.waitFor((f) => f.type === 'result', 10_000, from)
    assert.equal(result.is_error, false)
    assert.ok(existsSync(join(a.dir, 'made-by-a.txt')))
    assert.equal(readFileSync(secretOfB, 'utf8'), 'tenant-b secret\n')

    // Stopping reaches the sandboxed CLI (it stays in the gateway's process group).
    assert.equal((await gw.request('DELETE', `/v1/sessions/${a.id}`)).status, 200)
    await eventually(() => !processAlive(a.pid), 5000, 'the sandboxed CLI to end')
    assert.equal((await gw.request('GET', `/v1/sessions/${a.id}`)).body.status, 'stopped')
  })
})

describe('SANDBOX=none without a launcher', () => {
  it("lets one tenant's CLI read another tenant's files (what SANDBOX=none does NOT protect)", async (t) => {
    const { a, secretOfB } = await twoTenants(t, { CLAUDE_ARGS_EXTRA: '' })
    assert.equal(await say(a.holder, `read ${secretOfB}`), 'tenant-b secret\n')
  })
})
