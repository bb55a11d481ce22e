/**
 * SIGHUP reloads the credentials (src/server.ts, src/auth/live-credentials.ts)
 * of a real gateway process: its GATEWAY_TOKENS_FILE and TENANT_API_KEYS_FILE
 * are read again; a token taken out stops working at once, for requests and
 * for the WebSocket (closed 4401) and event stream (`end`,
 * `credential_revoked`) opened with it or with a ticket issued to it (and
 * for its tickets not yet spent), while other tenants' connections go
 * on; a new CLI gets the new keys (ANTHROPIC_API_KEY_FILE, its tenant's).
 * A file that is not valid changes nothing. A gateway in a terminal (a pty
 * from util-linux's `script`) still ends when the terminal closes. With
 * CREDENTIAL_FILES_POLL_MS, a file replaced as Kubernetes replaces a Secret
 * (a rename over it) reloads with no signal at all.
 */
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { after, before, describe, it } from 'node:test'
import { isHello, isResult } from '../support/frames.js'
import { type ArgvDump, FAKE_CLI, TestClient, eventually, processAlive } from '../support/gateway.js'
import { type GatewayProcess, freePort, startGatewayProcess } from '../support/gateway-process.js'
import { SseReader } from '../support/sse-reader.js'

const REPO = fileURLToPath(new URL('../..', import.meta.url))
const OLD_A = 'tenant-a-old-token-0001'
const NEW_A = 'tenant-a-new-token-0002'
const TOKEN_B = 'tenant-b-token-000000003'

describe('credentials reloaded on SIGHUP', { timeout: 60_000 }, () => {
  let dir: string
  let gateway: GatewayProcess
  const clients: TestClient[] = []
  const tokensFile = (): string => join(dir, 'tokens')
  const keysFile = (): string => join(dir, 'tenant-keys')
  const sharedKeyFile = (): string => join(dir, 'shared-key')

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'cgw-reload-'))
    writeFileSync(tokensFile(), `${OLD_A}=tenant-a,${TOKEN_B}=tenant-b\n`)
    writeFileSync(keysFile(), 'tenant-a=sk-ant-old-key\n')
    writeFileSync(sharedKeyFile(), 'sk-ant-shared-old\n')
    gateway = await startGatewayProcess({
      DATA_DIR: join(dir, 'data'),
      GATEWAY_TOKENS_FILE: tokensFile(),
      TENANT_API_KEYS_FILE: keysFile(),
      ANTHROPIC_API_KEY_FILE: sharedKeyFile(),
      CLAUDE_BIN: FAKE_CLI,
      CLAUDE_ARGS_EXTRA: `--fake-log-dir ${join(dir, 'fake-log')}`,
      SANDBOX: 'none',
      ALLOW_UNSANDBOXED: 'true',
      LOG_LEVEL: 'info',
      CLI_STOP_TIMEOUT_MS: '1000'
    })
  })
  after(async () => {
    for (const c of clients) c.terminate()
    await gateway?.kill()
    rmSync(dir, { recursive: true, force: true })
  })

  const create = async (token: string): Promise<string> => {
    const res = await fetch(`${gateway.url}/v1/sessions`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: '{}' })
    assert.equal(res.status, 201, await res.clone().text())
    return (await res.json() as { id: string }).id
  }
  const connect = async (token: string, sessionId: string): Promise<TestClient> => {
    const client = await TestClient.open(`${gateway.url.replace('http', 'ws')}/v1/sessions/${sessionId}/ws`, { authorization: `Bearer ${token}` })
    clients.push(client)
    await client.waitFor(isHello)
    return client
  }
  /** A ticket issued to `token` (POST /v1/sessions/:id/ws-ticket), for an upgrade with no header. */
  const ticket = async (token: string, sessionId: string): Promise<string> => {
    const res = await fetch(`${gateway.url}/v1/sessions/${sessionId}/ws-ticket`, { method: 'POST', headers: { authorization: `Bearer ${token}` } })
    assert.equal(res.status, 201, await res.clone().text())
    return (await res.json() as { ticket: string }).ticket
  }
  const connectWithTicket = async (ticketText: string, sessionId: string): Promise<TestClient> => {
    const client = await TestClient.open(`${gateway.url.replace('http', 'ws')}/v1/sessions/${sessionId}/ws?role=observer&ticket=${encodeURIComponent(ticketText)}`, {})
    clients.push(client)
    await client.waitFor(isHello)
    return client
  }
  const list = async (token: string): Promise<number> => (await fetch(`${gateway.url}/v1/sessions`, { headers: { authorization: `Bearer ${token}` } })).status
  /** The key the session's CLI was started with (its argv dump, written as it starts). */
  const cliKey = async (sessionId: string): Promise<string | undefined> => {
    const logDir = join(dir, 'fake-log')
    const file = await eventually(() => existsSync(logDir) && readdirSync(logDir).find((f) => f.startsWith(`${sessionId}.`) && f.endsWith('.argv.json')), 10_000, 'the CLI\'s argv dump')
    return (JSON.parse(readFileSync(join(logDir, file), 'utf8')) as ArgvDump).env.ANTHROPIC_API_KEY
  }
  /** Sends SIGHUP and waits for the `nth` log line saying what came of a reload. */
  const reload = async (nth: number, line: RegExp): Promise<void> => {
    gateway.child.kill('SIGHUP')
    await eventually(() => (gateway.output().match(new RegExp(line.source, 'g')) ?? []).length >= nth, 10_000, `reload ${nth}: ${line.source}`)
  }

  it('ends what the old token opened, keeps the rest, and starts new CLIs with the new key', async () => {
    const sessionA = await create(OLD_A)
    const sessionB = await create(TOKEN_B)
    assert.equal(await cliKey(sessionA), 'sk-ant-old-key')
    assert.equal(await cliKey(sessionB), 'sk-ant-shared-old', 'tenant B has no key of its own: the shared one')
    const onA = await connect(OLD_A, sessionA)
    const onB = await connect(TOKEN_B, sessionB)
    // As a browser without headers attaches (an observer here, so the sockets above keep the session): a ticket, then the upgrade with it.
    const onATicket = await connectWithTicket(await ticket(OLD_A, sessionA), sessionA)
    const onBTicket = await connectWithTicket(await ticket(TOKEN_B, sessionB), sessionB)
    const unspent = await ticket(OLD_A, sessionA)
    const stream = await SseReader.open(`${gateway.url}/v1/sessions/${sessionA}/events/stream`, { authorization: `Bearer ${OLD_A}` })
    assert.equal(stream.status, 200)
    await stream.until(() => stream.frames.length > 0 || stream.comments.length > 0 || stream.gatewayFrames.length > 0, 10_000, 'the stream to start')

    writeFileSync(tokensFile(), `${NEW_A}=tenant-a,${TOKEN_B}=tenant-b\n`)
    writeFileSync(keysFile(), 'tenant-a=sk-ant-new-key\n')
    writeFileSync(sharedKeyFile(), 'sk-ant-shared-new\n')
    await reload(1, /"msg":"credentials reloaded"/)
    assert.match(gateway.output(), /"ended":3,"tenantApiKeys":1,"msg":"credentials reloaded"/)

    assert.equal(await onA.waitClose(), 4401, 'the WebSocket opened with the old token is closed 4401')
    assert.equal(await onATicket.waitClose(), 4401, 'so is the one opened with a ticket the old token was issued')
    await assert.rejects(connectWithTicket(unspent, sessionA), (err: any) => err.statusCode === 401, 'a ticket of the old token, unspent, opens nothing now')
    const end = await stream.until(() => stream.events.find((e) => e.event === 'end'), 10_000, 'the end event')
    assert.equal(JSON.parse(end.data).reason, 'credential_revoked')
    assert.equal(await list(OLD_A), 401, 'the old token is refused')
    assert.equal(await list(NEW_A), 200, 'the new one is taken')
    await assert.rejects(connect(OLD_A, sessionA), (err: any) => err.statusCode === 401)

    // Tenant B's socket was never touched: it still runs turns.
    onB.sendUser('echo after the reload')
    assert.equal((await onB.waitFor(isResult)).result, 'Echo: echo after the reload')
    assert.equal(onB.closeCode, null)
    assert.equal(onBTicket.closeCode, null, 'nor was its ticket-opened socket')

    // A CLI started from now on gets the new keys; the ones running keep the keys they started with.
    const later = await create(NEW_A)
    assert.equal(await cliKey(later), 'sk-ant-new-key')
    assert.equal(await cliKey(await create(TOKEN_B)), 'sk-ant-shared-new')
  })

  it('a hangup reaching the whole process group (a terminal closed) leaves the gateway and its spawn helper running', async () => {
    // The spawn helper is the gateway's child that is not a CLI (CLIs are the helper's children).
    const helpers = children(gateway.pid).filter((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('spawn-helper'))
    assert.equal(helpers.length, 1, 'one spawn helper')
    const helper = helpers[0] as number
    process.kill(helper, 'SIGHUP')
    await reload(2, /"msg":"credentials reloaded"/)
    assert.ok(existsSync(`/proc/${helper}`) && !readFileSync(`/proc/${helper}/stat`, 'utf8').includes(') Z '), 'the helper lives on')
    const started = await create(NEW_A)
    assert.equal(await cliKey(started), 'sk-ant-new-key', 'CLIs still start through it')
  })

  it('a file that is not valid changes nothing', async () => {
    writeFileSync(tokensFile(), 'short=tenant-a\n')
    await reload(1, /"msg":"SIGHUP: credentials unchanged"/)
    assert.match(gateway.output(), /GATEWAY_TOKENS \(read from GATEWAY_TOKENS_FILE\)/)
    assert.equal(await list(NEW_A), 200)
    assert.equal(await list('short'), 401)
  })
})

describe('credentials reloaded when their files change (CREDENTIAL_FILES_POLL_MS)', { timeout: 60_000 }, () => {
  it('a tokens file replaced by a rename: no signal, the old token\'s socket closed 4401, the new token taken; a file that is not valid changes nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cgw-files-watch-'))
    const tokens = join(dir, 'tokens')
    writeFileSync(tokens, `${OLD_A}=tenant-a,${TOKEN_B}=tenant-b\n`)
    const gateway = await startGatewayProcess({
      DATA_DIR: join(dir, 'data'),
      GATEWAY_TOKENS_FILE: tokens,
      CREDENTIAL_FILES_POLL_MS: '100',
      CLAUDE_BIN: FAKE_CLI,
      SANDBOX: 'none',
      ALLOW_UNSANDBOXED: 'true',
      LOG_LEVEL: 'info'
    })
    const clients: TestClient[] = []
    try {
      const res = await fetch(`${gateway.url}/v1/sessions`, { method: 'POST', headers: { authorization: `Bearer ${OLD_A}`, 'content-type': 'application/json' }, body: '{}' })
      const { id } = await res.json() as { id: string }
      const onA = await TestClient.open(`${gateway.url.replace('http', 'ws')}/v1/sessions/${id}/ws`, { authorization: `Bearer ${OLD_A}` })
      clients.push(onA)
      await onA.waitFor(isHello)
      const count = (line: RegExp): number => (gateway.output().match(new RegExp(line.source, 'g')) ?? []).length
      const list = async (token: string): Promise<number> => (await fetch(`${gateway.url}/v1/sessions`, { headers: { authorization: `Bearer ${token}` } })).status

      // As a Secret volume is updated: the new content written aside, then renamed over the file.
      writeFileSync(`${tokens}.next`, `${NEW_A}=tenant-a,${TOKEN_B}=tenant-b\n`)
      renameSync(`${tokens}.next`, tokens)
      assert.equal(await onA.waitClose(10_000), 4401)
      await eventually(() => count(/"msg":"credentials reloaded"/) === 1, 10_000, 'the reload\'s log line')
      assert.equal(count(/"msg":"secret files changed: reloading credentials"/), 1)
      assert.match(gateway.output(), /"files":\["[^"]*tokens"\],"msg":"secret files changed/)
      assert.equal(await list(OLD_A), 401)
      assert.equal(await list(NEW_A), 200)

      writeFileSync(tokens, 'short=tenant-a\n')
      await eventually(() => count(/"msg":"secret files changed: credentials unchanged"/) === 1, 10_000, 'the refused reload\'s log line')
      assert.equal(await list(NEW_A), 200)
      assert.equal(count(/"msg":"credentials reloaded"/), 1, 'reloaded once in all')
    } finally {
      for (const c of clients) c.terminate()
      await gateway.kill()
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

/** A process's children, from its main thread's list in /proc. */
function children (pid: number): number[] {
  return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(' ').filter((p) => p !== '').map(Number)
}

/** Why the terminal case cannot run here, or false: it needs util-linux's `script` to give the gateway a terminal. */
function scriptMissing (): string | false {
  const found = spawnSync('script', ['--version'], { stdio: 'ignore' })
  return found.error === undefined && found.status === 0 ? false : 'needs `script` (util-linux) to run the gateway in a terminal'
}

describe('SIGHUP in a terminal', { timeout: 60_000 }, () => {
  it('is the terminal\'s hangup: closing it ends the gateway and its spawn helper, as it always did', { skip: scriptMissing() }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cgw-hangup-'))
    const port = await freePort()
    // `script` gives the gateway a terminal of its own (a pty, the gateway its session leader) and holds its other
    // end: killing it closes the terminal, and the kernel sends the gateway SIGHUP.
    const terminal = spawn('script', ['-qfec', 'exec node --import tsx src/server.ts', '/dev/null'], {
      cwd: REPO,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', PORT: String(port), HOST: '127.0.0.1', DATA_DIR: join(dir, 'data'), GATEWAY_TOKENS: `${NEW_A}=tenant-a`, CLAUDE_BIN: FAKE_CLI, SANDBOX: 'none', ALLOW_UNSANDBOXED: 'true', LOG_LEVEL: 'info' },
      stdio: 'ignore'
    })
    let pid = 0
    try {
      await eventually(async () => {
        try { return (await fetch(`http://127.0.0.1:${port}/healthz`)).status === 200 } catch { return false }
      }, 15_000, 'the gateway in the terminal to answer /healthz')
      pid = children(terminal.pid as number).find((child) => readFileSync(`/proc/${child}/cmdline`, 'utf8').includes('src/server.ts')) ?? 0
      assert.ok(pid !== 0, 'the gateway runs under script')
      const helper = children(pid).find((child) => readFileSync(`/proc/${child}/cmdline`, 'utf8').includes('spawn-helper'))
      assert.ok(helper !== undefined, 'the gateway forked its spawn helper')
      terminal.kill('SIGKILL')
      await eventually(() => !processAlive(pid), 10_000, 'the gateway to end with its terminal')
      await eventually(() => !processAlive(helper), 10_000, 'its spawn helper to end with it')
      await assert.rejects(fetch(`http://127.0.0.1:${port}/healthz`), 'nothing listens on its port any more')
    } finally {
      terminal.kill('SIGKILL')
      if (pid !== 0 && processAlive(pid)) process.kill(pid, 'SIGKILL')
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
