/**
 * claude-remote spawned as the Agent SDK spawns the CLI (bin/claude-remote,
 * the SDK's argv), with its stdout read as NDJSON lines and its stderr kept,
 * for the tests that drive it against a real gateway.
 */
import assert from 'node:assert/strict'
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { connect, createServer, type Socket } from 'node:net'
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

/** The ids of the sessions the gateway lists now (one page of the largest size): what a case on a shared gateway found before it began. */
export async function sessionIds (gw: TestGateway): Promise<Set<string>> {
  const list = await gw.request('GET', '/v1/sessions?limit=100')
  assert.equal(list.body.next_cursor ?? null, null, 'more sessions than one page')
  return new Set(list.body.sessions.map((s: any) => String(s.id)))
}

/** The one session listed that is not in `before` (claude-remote created exactly one), on a gateway shared by several cases. */
export async function newSession (gw: TestGateway, before: Set<string>): Promise<any> {
  const added = (await gw.request('GET', '/v1/sessions?limit=100')).body.sessions.filter((s: any) => !before.has(String(s.id)))
  assert.equal(added.length, 1)
  return added[0]
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

/**
 * A TCP gate in front of a gateway, for what claude-remote does while it
 * waits on the network: `holdWebSockets` keeps new WebSocket upgrades
 * waiting (their bytes buffered, nothing reaches the gateway) until
 * `release`, while plain HTTP (the REST calls) passes; `holdCreate` lets
 * `POST /v1/sessions` reach the gateway but keeps its answer from
 * claude-remote until `release`; `proxyCreate` answers it as a proxy that
 * gave up on the gateway would.
 */
export interface Gate {
  url: string
  /** Closes the WebSocket connections open so far; new upgrades wait until `release`. Returns how many were closed. */
  holdWebSockets: () => number
  /** The next `POST /v1/sessions` answer waits until `release`. */
  holdCreate: () => void
  /** The next `POST /v1/sessions` reaches the gateway, but its answer is replaced by a proxy's HTML page with that status. */
  proxyCreate: (status: number) => void
  /** Resolves once a held create's answer has arrived from the gateway (the session exists). */
  createAnswered: () => Promise<void>
  /** Lets everything held through, and stops holding. */
  release: () => void
  close: () => Promise<void>
}

export async function startGate (gatewayUrl: string): Promise<Gate> {
  const target = Number(new URL(gatewayUrl).port)
  const all = new Set<Socket>()
  const websockets = new Set<Socket>()
  let holdingWs = false
  let holdingCreate = false
  let proxyAnswer: number | null = null
  const waiting: Array<() => void> = []
  let answered: () => void = () => {}
  const createAnswered = new Promise<void>((resolve) => { answered = resolve })
  const track = (s: Socket): void => {
    all.add(s)
    s.on('close', () => all.delete(s))
    s.on('error', () => {})
  }
  const server = createServer((client) => {
    track(client)
    client.once('data', (first: Buffer) => {
      const head = first.toString('latin1')
      const isWs = /^upgrade: websocket/im.test(head)
      const isCreate = (holdingCreate || proxyAnswer !== null) && head.startsWith('POST /v1/sessions ')
      if (isCreate) holdingCreate = false
      const open = (): void => {
        if (client.destroyed) return
        const upstream = connect(target, '127.0.0.1')
        track(upstream)
        if (isWs) {
          websockets.add(client)
          client.on('close', () => websockets.delete(client))
        }
        upstream.write(first)
        // A held create goes on at the gateway when claude-remote gives up on it (as behind a proxy
        // that sat on the answer): its end is not passed on, or the gateway would drop the request.
        client.pipe(upstream, { end: !(isCreate && proxyAnswer === null) })
        if (isCreate && proxyAnswer !== null) {
          // A proxy that gave up on the gateway: the session is made, the client gets the proxy's page.
          const status = proxyAnswer
          proxyAnswer = null
          upstream.once('data', () => {
            const page = `<html><body>${status} from the proxy</body></html>`
            client.end(`HTTP/1.1 ${status} Proxy Gave Up\r\ncontent-type: text/html\r\ncontent-length: ${page.length}\r\nconnection: close\r\n\r\n${page}`)
            answered()
          })
        } else if (isCreate) {
          const held: Buffer[] = []
          let released = false
          upstream.on('data', (chunk: Buffer) => {
            if (released) { client.write(chunk); return }
            held.push(chunk)
            answered()
          })
          upstream.on('end', () => { if (released) client.end() })
          waiting.push(() => {
            released = true
            for (const chunk of held.splice(0)) client.write(chunk)
            if (upstream.readableEnded) client.end()
          })
        } else {
          upstream.pipe(client)
        }
      }
      if (isWs && holdingWs) {
        client.pause()
        waiting.push(() => { client.resume(); open() })
      } else {
        open()
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('no address')
  return {
    url: `http://127.0.0.1:${address.port}`,
    holdWebSockets: () => {
      holdingWs = true
      const n = websockets.size
      for (const s of websockets) s.destroy()
      return n
    },
    holdCreate: () => { holdingCreate = true },
    proxyCreate: (status) => { proxyAnswer = status },
    createAnswered: async () => await createAnswered,
    release: () => {
      holdingWs = false
      holdingCreate = false
      for (const go of waiting.splice(0)) go()
    },
    close: async () => {
      for (const s of all) s.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
}
