/**
 * claude-remote spawned as the Agent SDK spawns the CLI (bin/claude-remote,
 * the SDK's argv), with its stdout read as NDJSON lines and its stderr kept,
 * for the tests that drive it against a real gateway.
 */
import assert from 'node:assert/strict'
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { startForwarder, type Forwarder } from './forwarder.js'
import { type GatewayOptions, type Scope, TOKEN_A, type TestGateway, gateway } from './gateway.js'
import { Waiters } from './waiters.js'

const BIN = fileURLToPath(new URL('../../bin/claude-remote', import.meta.url))
/** The project's own recording of the real CLI 2.1.332 driven as the Agent SDK drives it (npm run record). */
const RECORDED = fileURLToPath(new URL('../fixtures/recorded/claude-code-2.1.332', import.meta.url))
export const SDK_ARGS = ['--output-format', 'stream-json', '--verbose', '--input-format', 'stream-json', '--permission-prompt-tool=stdio']
export const WAIT_MS = 20_000

/** The initialize the Agent SDK wrote in a real recording (its first stdin line). */
export function sdkInitialize (): string {
  const line = readFileSync(`${RECORDED}/text.stdin.ndjson`, 'utf8').split('\n')[0] as string
  assert.equal(JSON.parse(line).request.subtype, 'initialize')
  return line
}

export const userLine = (text: string): string =>
  JSON.stringify({ type: 'user', message: { role: 'user', content: [{ type: 'text', text }] }, parent_tool_use_id: null, session_id: '' })

export interface Remote {
  child: ChildProcessWithoutNullStreams
  lines: string[]
  stderr: () => string
  write: (line: string) => void
  exited: Promise<number | null>
  waitLine: (predicate: (frame: any) => boolean) => Promise<any>
  /** Resolves once `check` holds, re-checked as its stdout and stderr arrive. */
  until: (check: () => boolean, what: string) => Promise<boolean>
}

export function spawnRemote (gw: TestGateway, args: string[] = SDK_ARGS, env: Record<string, string> = {}): Remote {
  const child = spawn(BIN, args, {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', CLAUDE_REMOTE_URL: gw.url, CLAUDE_REMOTE_TOKEN: TOKEN_A, CLAUDE_CODE_ENTRYPOINT: 'sdk-ts', ...env },
    stdio: ['pipe', 'pipe', 'pipe']
  })
  const lines: string[] = []
  const arrivals = new Waiters()
  let out = ''
  let err = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk
    let nl
    while ((nl = out.indexOf('\n')) >= 0) {
      lines.push(out.slice(0, nl))
      out = out.slice(nl + 1)
    }
    arrivals.wake()
  })
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => { err += chunk; arrivals.wake() })
  const lastSeen = (): string => `stdout ${lines.length} lines; stderr: ${err.slice(-500)}`
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  return {
    child,
    lines,
    stderr: () => err,
    write: (line) => { child.stdin.write(line + '\n') },
    exited,
    waitLine: async (predicate) => await arrivals.until(() => lines.map((l) => JSON.parse(l)).find(predicate), WAIT_MS, 'a stdout line', lastSeen),
    until: async (check, what) => await arrivals.until(() => check(), WAIT_MS, what, lastSeen)
  }
}

/** The one session the gateway lists (claude-remote created it). */
export async function onlySession (gw: TestGateway): Promise<any> {
  const list = await gw.request('GET', '/v1/sessions')
  assert.equal(list.body.sessions.length, 1)
  return list.body.sessions[0]
}

/**
 * A gateway with no keep_alive (so a forwarder sees only the bytes a test
 * makes), and claude-remote reaching it through a forwarder, initialized;
 * all ended with the scope.
 */
export async function forwardedRemote (scope: Scope, options: GatewayOptions = {}, args: string[] = SDK_ARGS): Promise<{ gw: TestGateway, fwd: Forwarder, remote: Remote }> {
  const gw = await gateway(scope, { ...options, env: { KEEPALIVE_INTERVAL_MS: '3600000', ...options.env } })
  const fwd = await startForwarder(gw.url)
  scope.after(() => fwd.close())
  const remote = spawnRemote(gw, args, { CLAUDE_REMOTE_URL: fwd.url })
  scope.after(() => remote.child.kill('SIGKILL'))
  remote.write(sdkInitialize())
  return { gw, fwd, remote }
}
