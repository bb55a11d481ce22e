/**
 * claude-remote's credential over a long session: a JWT read from
 * CLAUDE_REMOTE_TOKEN_FILE and renewed there (as a Kubernetes projected
 * token or a sidecar does) is presented before it expires, so the same
 * connection outlives it; a credential nobody renews ends claude-remote at
 * the gateway's deadline with a line saying so; a renewed token the gateway
 * refuses for now is tried on a new connection at the deadline; a token
 * rotated out by a credential reload is replaced from the file without a
 * restart.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { before, describe, it, test } from 'node:test'
import { SignJWT } from 'jose'
import { loadConfig } from '../../src/config.js'
import { isHello } from '../support/frames.js'
import { TOKEN_A, TOKEN_B, type TestGateway, type TestClient, gateway, suiteScope } from '../support/gateway.js'
import { SDK_ARGS, newSession, onlySession, sdkInitialize, sessionIds, spawnRemote, userLine } from '../support/remote.js'

const JWT_SECRET = 'jwt-secret-for-tests-0123456789-abcdefghijklmnop'
const EXPIRY = { JWT_SECRET, JWT_EXPIRY_ENDS_CONNECTIONS: 'true' }

async function jwt (tenant: string, exp: number): Promise<string> {
  return await new SignJWT({ tenant }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime(exp).sign(new TextEncoder().encode(JWT_SECRET))
}

const inSeconds = (s: number): number => Math.floor(Date.now() / 1000) + s

function tokenFile (t: { after: (fn: () => void) => void }, token: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'cgw-remote-token-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'token')
  writeFileSync(file, token + '\n')
  return file
}

/** An observer opened with `token`: its close 4401 says the gateway's deadline for that credential has passed. */
async function fence (gw: TestGateway, sessionId: string, token: string): Promise<TestClient> {
  const c = await gw.connect(sessionId, 'role=observer', token)
  await c.waitFor(isHello)
  return c
}

const count = (text: string, re: RegExp): number => text.match(new RegExp(re.source, 'g'))?.length ?? 0

// The JWT cases leave the gateway as they found it: they share one (each finds its own session).
describe('JWT expiry on a shared gateway', () => {
  let gw: TestGateway
  const scope = suiteScope()
  before(async () => { gw = await gateway(scope, { env: EXPIRY }) })

  it('a JWT renewed in CLAUDE_REMOTE_TOKEN_FILE is presented before it expires: the same connection outlives it and runs the next turn', async (t) => {
    const known = await sessionIds(gw)
    const exp = inSeconds(12)
    const short = await jwt('tenant-a', exp)
    const file = tokenFile(t, short)
    const remote = spawnRemote(gw, [...SDK_ARGS, '--debug'], { CLAUDE_REMOTE_TOKEN: '', CLAUDE_REMOTE_TOKEN_FILE: file })
    t.after(() => remote.child.kill('SIGKILL'))
    remote.write(sdkInitialize())
    remote.write(userLine('echo before the renewal'))
    await remote.waitLine((f) => f.type === 'result')
    await remote.until(() => remote.stderr().includes(`ends this connection at ${new Date(exp * 1000).toISOString()}`), 'the deadline announced')
    const session = await newSession(gw, known)
    const expiring = await fence(gw, session.id, short)

    // The token source renews the file; claude-remote reads it before the deadline and presents it.
    const newer = inSeconds(600)
    writeFileSync(file, await jwt('tenant-a', newer) + '\n')
    await remote.until(() => remote.stderr().includes(`ends this connection at ${new Date(newer * 1000).toISOString()}`), 'the gateway took the newer JWT')
    assert.ok(Date.now() < exp * 1000, 'renewed before the old deadline')
    assert.equal(await expiring.waitClose(15_000), 4401, 'the old JWT did expire')

    remote.write(userLine('echo after the old expiry'))
    await remote.waitLine((f) => f.type === 'result' && f.result === 'Echo: echo after the old expiry')
    const stderr = remote.stderr()
    assert.equal(count(stderr, /presented the newer token/), 1, stderr)
    assert.equal(count(stderr, /connecting ws:/), 1, 'never reconnected')
    assert.doesNotMatch(stderr, /connection closed/)
    remote.child.stdin.end()
    // The DELETE at the end goes with the renewed JWT too.
    assert.equal(await remote.exited, 0, stderr)
    assert.equal((await gw.request('GET', `/v1/sessions/${session.id}`)).body.status, 'stopped')
  })

  it('a JWT nobody renews ends claude-remote at its expiry (exit 1): a fixed CLAUDE_REMOTE_TOKEN is said to be unrenewable at once, a stale file at the end', async (t) => {
    // Long enough for both to start and run a turn on a busy machine first.
    const exp = inSeconds(10)
    const short = await jwt('tenant-a', exp)
    const fixed = spawnRemote(gw, SDK_ARGS, { CLAUDE_REMOTE_TOKEN: short })
    const stale = spawnRemote(gw, SDK_ARGS, { CLAUDE_REMOTE_TOKEN: '', CLAUDE_REMOTE_TOKEN_FILE: tokenFile(t, short) })
    await Promise.all([fixed, stale].map(async (remote) => {
      t.after(() => remote.child.kill('SIGKILL'))
      remote.write(sdkInitialize())
      remote.write(userLine('echo until it expires'))
      await remote.waitLine((f) => f.type === 'result')
    }))
    await fixed.until(() => /CLAUDE_REMOTE_TOKEN cannot be renewed: give CLAUDE_REMOTE_TOKEN_FILE/.test(fixed.stderr()), 'the warning')
    assert.equal(await fixed.exited, 1, fixed.stderr())
    assert.equal(await stale.exited, 1, stale.stderr())
    assert.ok(Date.now() >= exp * 1000 - 5, 'not before the expiry')
    assert.match(fixed.stderr(), /no longer accepts CLAUDE_REMOTE_TOKEN \(close 4401\): [^\n]*expired[^\n]*set a valid one/)
    assert.match(stale.stderr(), /no longer accepts CLAUDE_REMOTE_TOKEN_FILE \([^)]+\) \(close 4401\): [^\n]*expired[^\n]*renew the file/)
    assert.equal(count(fixed.stderr(), /cannot be renewed/), 1, 'said once')
    assert.doesNotMatch(stale.stderr(), /cannot be renewed/)
  })

  it('a renewed token the gateway refuses (not valid yet) is not presented again, and at the old JWT\'s deadline claude-remote reconnects with it instead of exiting', async (t) => {
    const exp = inSeconds(10)
    const short = await jwt('tenant-a', exp)
    // Valid from the short one's deadline: refused whenever it is presented (a fifth of the time left before it; under
    // load a slow attach leaves less than a second), accepted once the gateway has ended the connection at that deadline.
    const newer = await new SignJWT({ tenant: 'tenant-a' }).setProtectedHeader({ alg: 'HS256' }).setNotBefore(exp).setExpirationTime(inSeconds(600)).sign(new TextEncoder().encode(JWT_SECRET))
    const file = tokenFile(t, short)

    const remote = spawnRemote(gw, [...SDK_ARGS, '--debug'], { CLAUDE_REMOTE_TOKEN: '', CLAUDE_REMOTE_TOKEN_FILE: file })
    t.after(() => remote.child.kill('SIGKILL'))
    remote.write(sdkInitialize())
    remote.write(userLine('echo before'))
    await remote.waitLine((f) => f.type === 'result')
    await remote.until(() => remote.stderr().includes('ends this connection at'), 'the deadline announced')
    writeFileSync(file, newer + '\n')
    await remote.until(() => remote.stderr().includes('presented the newer token'), 'the newer token presented')

    await remote.until(() => /gateway: credential_refused/.test(remote.stderr()), 'the refusal')
    await remote.until(() => /holds a newer token: reconnecting with it/.test(remote.stderr()), 'the reconnect at the old deadline')
    remote.write(userLine('echo after the deadline'))
    await remote.waitLine((f) => f.type === 'result' && f.result === 'Echo: echo after the deadline')
    const stderr = remote.stderr()
    assert.equal(count(stderr, /presented the newer token/), 1, 'not presented again after its refusal')
    assert.equal(count(stderr, /connecting ws:/), 2)
    remote.child.stdin.end()
    assert.equal(await remote.exited, 0, stderr)
  })
})

test('a token rotated out by a credential reload: claude-remote reconnects with the one its file holds now, nothing lost or run twice', async (t) => {
  const gw = await gateway(t)
  const file = tokenFile(t, TOKEN_A)
  const remote = spawnRemote(gw, [...SDK_ARGS, '--debug'], { CLAUDE_REMOTE_TOKEN: '', CLAUDE_REMOTE_TOKEN_FILE: file })
  t.after(() => remote.child.kill('SIGKILL'))
  remote.write(sdkInitialize())
  remote.write(userLine('echo before the rotation'))
  await remote.waitLine((f) => f.type === 'result')
  const session = await onlySession(gw)

  // The operator writes tenant-a's new token where claude-remote reads it, then reloads the gateway.
  const rotated = 'tenant-a-rotated-token-0123456789'
  writeFileSync(file, rotated)
  const next = loadConfig({ DATA_DIR: gw.dataDir, GATEWAY_TOKENS: `${rotated}=tenant-a,${TOKEN_B}=tenant-b`, SANDBOX: 'none', ALLOW_UNSANDBOXED: 'true' })
  assert.equal((await gw.app.gateway.reloadCredentials(next)).ended, 1)
  await remote.until(() => /holds a newer token: reconnecting with it/.test(remote.stderr()), 'the reconnect')

  remote.write(userLine('echo after the rotation'))
  await remote.waitLine((f) => f.type === 'result' && f.result === 'Echo: echo after the rotation')
  remote.child.stdin.end()
  assert.equal(await remote.exited, 0, remote.stderr())
  assert.equal(count(remote.stderr(), /connecting ws:/), 2, remote.stderr())
  const prompts = gw.stdinLines(session.id).filter((l) => l.type === 'user').map((l) => l.message.content[0].text)
  assert.deepEqual(prompts, ['echo before the rotation', 'echo after the rotation'])
  // Each CLI line reached the host once.
  const results = remote.lines.map((l) => JSON.parse(l)).filter((f) => f.type === 'result').map((f) => f.result)
  assert.deepEqual(results, ['Echo: echo before the rotation', 'Echo: echo after the rotation'])
  const status = await fetch(`${gw.url}/v1/sessions/${session.id}`, { headers: { authorization: `Bearer ${TOKEN_A}` } })
  assert.equal(status.status, 401, 'the old token is gone')
})
