/**
 * claude-remote's bridge (src/remote/bridge.ts) run in-process against a
 * real gateway, for the tests that pass it short bounds (silence, give-up,
 * requests at the end) rather than wait out the defaults of the real
 * binary. Its stdout lines and its stderr are kept, with waiting on them.
 */
import assert from 'node:assert/strict'
import { parseRemoteArgs } from '../../src/remote/argv.js'
import { RemoteBridge } from '../../src/remote/bridge.js'
import { GatewayApi } from '../../src/remote/gateway-api.js'
import { readRemoteEnv } from '../../src/remote/remote-env.js'
import { type Scope, TOKEN_A, type TestGateway, gateway } from './gateway.js'
import { type Gate, SDK_ARGS, WAIT_MS, sdkInitialize, startGate, userLine } from './remote.js'
import { Waiters } from './waiters.js'

/** What a test may pass the bridge besides its gateway: its bounds and its jitter draw. */
export type BridgeBounds = Omit<ConstructorParameters<typeof RemoteBridge>[0], 'api' | 'env' | 'args' | 'io'>

export interface InProcessRemote {
  bridge: RemoteBridge
  /** The bridge's exit code. */
  done: Promise<number>
  /** Its stdout, a line each. */
  lines: string[]
  frames: () => any[]
  /** Its stderr: warnings and debug lines, in order. */
  debug: string[]
  /** Its warnings alone (what a user sees without debug on). */
  warned: string[]
  /** What a failed wait says came last. */
  lastSeen: () => string
  /** Resolves with the first value of `check` that holds, re-checked as stdout and stderr arrive. */
  until: <T>(check: () => T | undefined | false, what: string) => Promise<T>
}

/** A bridge to `url` with the SDK's argv, running; ended (143) with the scope. */
export function startBridge (scope: Scope, url: string, bounds: BridgeBounds = {}): InProcessRemote {
  const env = readRemoteEnv({ CLAUDE_REMOTE_URL: url, CLAUDE_REMOTE_TOKEN: TOKEN_A })
  const lines: string[] = []
  const debug: string[] = []
  const warned: string[] = []
  const arrivals = new Waiters()
  const bridge = new RemoteBridge({
    api: new GatewayApi(env),
    env,
    args: parseRemoteArgs(SDK_ARGS),
    io: { writeOut: (line) => { lines.push(line); arrivals.wake() }, warn: (m) => { warned.push(m); debug.push(m); arrivals.wake() }, debug: (m) => { debug.push(m); arrivals.wake() } },
    ...bounds
  })
  const done = bridge.run()
  scope.after(() => bridge.terminate(143))
  const lastSeen = (): string => `${lines.length} lines; ${debug.slice(-5).join(' | ')}`
  return {
    bridge,
    done,
    lines,
    frames: () => lines.map((l) => JSON.parse(l)),
    debug,
    warned,
    lastSeen,
    until: async (check, what) => await arrivals.until(check, WAIT_MS, what, lastSeen)
  }
}

/**
 * A bridge through a gate that has run one turn (initialized, `echo first`
 * answered), its WebSocket then closed and new ones held until
 * `gate.release()`; `sessionId` is the gateway's session. On `shared`, a
 * gateway several cases use (the gate and the session are this case's own),
 * else on one of its own.
 */
export async function cutOffAfterOneTurn (scope: Scope, bounds: BridgeBounds = {}, shared?: TestGateway): Promise<InProcessRemote & { gw: TestGateway, gate: Gate, sessionId: string }> {
  const gw = shared ?? await gateway(scope)
  const gate = await startGate(gw.url)
  scope.after(() => gate.close())
  const remote = startBridge(scope, gate.url, { random: () => 1, ...bounds })
  remote.bridge.hostLine(sdkInitialize())
  remote.bridge.hostLine(userLine('echo first'))
  await remote.until(() => remote.frames().some((f) => f.type === 'result'), 'the first turn\'s result')
  const sessionId = String(remote.frames().find((f) => f.type === 'result').session_id)
  assert.equal(gate.holdWebSockets(), 1)
  await remote.until(() => remote.debug.some((m) => /connection closed/.test(m)), 'the connection closed')
  return { ...remote, gw, gate, sessionId }
}
