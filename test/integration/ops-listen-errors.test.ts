// A port the gateway cannot have (PORT or METRICS_PORT in use) or a HOST it
// cannot listen on stops the start as a bad setting does: exit 2 and a line
// naming the setting, not exit 1 with a stack trace naming neither.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { type Server, createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, it, type TestContext } from 'node:test'
import { fakeCliEnv, freePort } from '../support/gateway-process.js'
import { within } from '../support/waiters.js'

const REPO = fileURLToPath(new URL('../..', import.meta.url))

/** Runs `src/server.ts` with `env` until it exits by itself; its exit code and output. */
async function failedStart (t: TestContext, env: Record<string, string>): Promise<{ code: number | null, output: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'cgw-ops-listen-'))
  t.after(() => rmSync(dataDir, { recursive: true, force: true }))
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
    cwd: REPO,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...fakeCliEnv(dataDir), ...env },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  t.after(() => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL') })
  let output = ''
  child.stdout.on('data', (d: Buffer) => { output += d.toString('utf8') })
  child.stderr.on('data', (d: Buffer) => { output += d.toString('utf8') })
  const code = await within(new Promise<number | null>((resolve) => child.once('close', (c) => resolve(c))), 20_000, 'the gateway to give up')
  return { code, output }
}

/** A loopback port held by another listener for the rest of the test. */
async function takenPort (t: TestContext): Promise<number> {
  const server: Server = createServer()
  await new Promise<void>((resolve, reject) => server.listen(0, '127.0.0.1', resolve).once('error', reject))
  t.after(() => new Promise((resolve) => server.close(resolve)))
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('no address')
  return address.port
}

function assertNamed (result: { code: number | null, output: string }, line: RegExp): void {
  assert.equal(result.code, 2, result.output)
  assert.match(result.output, line)
  assert.doesNotMatch(result.output, /^\s+at /m, 'no stack trace')
}

describe('listen failures at start', () => {
  it('PORT in use: exit 2, naming PORT', async (t) => {
    const port = await takenPort(t)
    assertNamed(await failedStart(t, { PORT: String(port), HOST: '127.0.0.1' }), new RegExp(`^  PORT: cannot listen on 127\\.0\\.0\\.1:${port} \\(EADDRINUSE\\)`, 'm'))
  })

  it('METRICS_PORT in use: exit 2, naming METRICS_PORT', async (t) => {
    const port = await takenPort(t)
    const result = await failedStart(t, { PORT: String(await freePort()), HOST: '127.0.0.1', METRICS_PORT: String(port) })
    assertNamed(result, new RegExp(`^  METRICS_PORT: cannot listen on 127\\.0\\.0\\.1:${port} \\(EADDRINUSE\\)`, 'm'))
  })

  it('a HOST that does not resolve: exit 2, naming HOST', async (t) => {
    assertNamed(await failedStart(t, { PORT: String(await freePort()), HOST: 'no-such-host.invalid' }), /^ {2}HOST: cannot listen on no-such-host\.invalid \(E[A-Z_]+\)/m)
  })
})
