/**
 * A gateway as a real separate process (`node --import tsx src/server.ts`),
 * for tests that crash it (SIGKILL) and start another on the same DATA_DIR:
 * an in-process gateway (test/support/gateway.ts) cannot die without taking
 * the test with it, nor leave its CLIs orphaned the way a crash does.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { endsWithTest, onTestExit } from './exit-hooks.js'
import { FAKE_CLI, TOKEN_A, eventually } from './gateway.js'

const REPO = fileURLToPath(new URL('../..', import.meta.url))

/**
 * Gateways still running. If the test process ends first (a file over its
 * timeout), each is sent SIGTERM: it then ends its CLIs itself, which a
 * SIGKILL would leave to die of broken pipes, their tools orphaned.
 */
const live = new Set<ChildProcess>()
onTestExit(() => { for (const child of live) child.kill('SIGTERM') })

export interface GatewayProcess {
  child: ChildProcess
  pid: number
  url: string
  /** What the process wrote to stdout and stderr so far (its logs, start-up errors). */
  output: () => string
  /** Resolves with the exit code or signal once the process has exited. */
  exited: Promise<number | string | null>
  /** SIGKILLs the process unless it has exited; resolves once it has. */
  kill: () => Promise<void>
}

/** A gateway process on `dataDir` running the fake CLI unsandboxed for tenant-a (TOKEN_A), logging warnings only. */
export function fakeCliEnv (dataDir: string): Record<string, string> {
  return {
    DATA_DIR: dataDir,
    WORKSPACE_ROOT: join(dataDir, 'ws'),
    GATEWAY_TOKENS: `${TOKEN_A}=tenant-a`,
    CLAUDE_BIN: FAKE_CLI,
    SANDBOX: 'none',
    ALLOW_UNSANDBOXED: 'true',
    LOG_LEVEL: 'warn',
    CLI_STOP_TIMEOUT_MS: '1000'
  }
}

/** A loopback port nothing listens on at the moment of asking. */
export async function freePort (): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve, reject) => server.listen(0, '127.0.0.1', resolve).once('error', reject))
  const address = server.address()
  await new Promise((resolve) => server.close(resolve))
  if (address === null || typeof address === 'string') throw new Error('no address')
  return address.port
}

export interface StartOptions {
  /** What runs instead of `node <args>` (it must exec node in the end, keeping the pid): e.g. a shell joining a cgroup first. */
  command?: (node: string, args: string[]) => { file: string, args: string[] }
}

/**
 * Starts `src/server.ts` with `env` on top of PATH and HOME (PORT and HOST
 * are chosen here) and resolves once it answers /healthz, which it does only
 * after its start-up hooks (the reaper among them) have run. Rejects with its
 * output if it exits first or is not up within `timeoutMs`.
 */
export async function startGatewayProcess (env: Record<string, string>, timeoutMs = 15_000, options: StartOptions = {}): Promise<GatewayProcess> {
  const port = await freePort()
  const { file, args } = (options.command ?? ((node, nodeArgs) => ({ file: node, args: nodeArgs })))(process.execPath, ['--import', 'tsx', 'src/server.ts'])
  const child = spawn(file, args, {
    cwd: REPO,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env, PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
    // A session of its own, without the terminal `npm test` may run in: as a service runs, so SIGHUP reloads.
    detached: true
  })
  let output = ''
  child.stdout?.on('data', (d: Buffer) => { output += d.toString('utf8') })
  child.stderr?.on('data', (d: Buffer) => { output += d.toString('utf8') })
  let done: number | string | null | undefined
  live.add(child)
  // Detached, it leads its own group: ended with this file even if the file is killed outright.
  const unwatch = child.pid === undefined ? () => {} : endsWithTest(child.pid)
  const exited = new Promise<number | string | null>((resolve) => child.once('exit', (code, signal) => {
    live.delete(child)
    unwatch()
    done = code ?? signal
    resolve(done)
  }))
  const gateway: GatewayProcess = {
    child,
    pid: child.pid as number,
    url: `http://127.0.0.1:${port}`,
    output: () => output,
    exited,
    async kill () {
      if (done === undefined) child.kill('SIGKILL')
      await exited
    }
  }
  try {
    await eventually(async () => {
      if (done !== undefined) throw new Error(`gateway exited (${String(done)}) before answering /healthz`)
      try {
        return (await fetch(`${gateway.url}/healthz`)).status === 200
      } catch {
        return false // not listening yet
      }
    }, timeoutMs, `the gateway on port ${port} to answer /healthz`)
  } catch (err) {
    await gateway.kill()
    throw new Error(`${(err as Error).message}; its output:\n${output}`, { cause: err })
  }
  return gateway
}
