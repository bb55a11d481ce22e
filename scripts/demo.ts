// `npm run demo`: the gateway with the real Claude Code CLI and a small
// scripted local model (scripts/demo-model.ts behind the offline Messages API
// stand-in), no API key and no network. Prints the console's address with a
// sign-in token; Ctrl-C stops everything.
//
//   npm run demo                       # port 8080 (DEMO_PORT to change it)
//   npm run demo -- --port 0           # any free port
//
// `startDemo()` is the same thing as a function, for the console's browser
// test: it returns the URL, the token and close().
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { type MockAnthropic, startMockAnthropic } from '../test/support/mock-anthropic.js'
import { demoModel } from './demo-model.js'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')

export interface DemoOptions {
  /** Listen port; 0 picks a free one. */
  port?: number
  /** Extra gateway settings (environment-style), e.g. REDIS_URL. */
  env?: Record<string, string>
  /** Where the gateway's output goes (default: this process's stderr). */
  output?: (chunk: string) => void
}

export interface Demo {
  /** The gateway's base URL, e.g. http://127.0.0.1:8080 */
  url: string
  /** The tenant `demo`'s token. */
  token: string
  /** The console with the token in the fragment: the page signs in by itself. */
  consoleUrl: string
  gateway: ChildProcess
  model: MockAnthropic
  close: () => Promise<void>
}

/** Whether the bubblewrap sandbox can run here (bwrap and socat present); else the demo runs unsandboxed, on loopback. */
function sandboxAvailable (): boolean {
  try {
    execFileSync('sh', ['-c', 'command -v bwrap && command -v socat'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

export async function startDemo (options: DemoOptions = {}): Promise<Demo> {
  // The same build `npm start` makes (TypeScript and the console), only when stale.
  execFileSync(process.execPath, [path.join(ROOT, 'scripts', 'build-if-stale.mjs')], { cwd: ROOT, stdio: 'inherit' })
  const model = await startMockAnthropic({ handler: (body) => demoModel(body) })
  const dataDir = mkdtempSync(path.join(tmpdir(), 'cgw-demo-'))
  const token = `demo_${randomBytes(18).toString('base64url')}`
  const sandboxed = sandboxAvailable()
  const output = options.output ?? ((chunk: string) => { process.stderr.write(chunk) })
  if (!sandboxed) output('bwrap or socat is missing: the demo runs the CLI unsandboxed (apt-get install bubblewrap socat)\n')
  const gateway = spawn(process.execPath, [path.join(ROOT, 'dist', 'src', 'server.js')], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      HOST: '127.0.0.1',
      PORT: String(options.port ?? 8080),
      DATA_DIR: dataDir,
      GATEWAY_TOKENS: `${token}=demo`,
      SANDBOX: sandboxed ? 'bwrap' : 'none',
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
      // The CLI's side: the local model, a key it accepts, nothing else on the network.
      ANTHROPIC_BASE_URL: model.url,
      ANTHROPIC_API_KEY: 'sk-ant-demo-not-a-secret',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      DISABLE_AUTOUPDATER: '1',
      DISABLE_TELEMETRY: '1',
      DISABLE_ERROR_REPORTING: '1',
      ...options.env
    }
  })
  let stopped = false
  const close = async (): Promise<void> => {
    if (stopped) return
    stopped = true
    if (gateway.exitCode === null && gateway.signalCode === null) {
      const exited = new Promise((resolve) => gateway.once('exit', resolve))
      gateway.kill('SIGTERM')
      const force = setTimeout(() => gateway.kill('SIGKILL'), 15_000)
      await exited
      clearTimeout(force)
    }
    await model.close()
    rmSync(dataDir, { recursive: true, force: true })
  }
  try {
    const url = await new Promise<string>((resolve, reject) => {
      let seen = ''
      gateway.stdout?.setEncoding('utf8').on('data', output)
      gateway.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
        // The gateway prints "Console: <address>/" once it listens; the token line is ours to print.
        seen += chunk
        const m = /Console: (http:\/\/\S+?)\/?\n/.exec(seen)
        output(chunk)
        if (m?.[1] !== undefined) resolve(m[1])
      })
      gateway.once('exit', (code, signal) => reject(new Error(`the gateway exited before listening (code ${String(code)}, signal ${String(signal)})`)))
    })
    return { url, token, consoleUrl: `${url}/#token=${encodeURIComponent(token)}`, gateway, model, close }
  } catch (err) {
    await close()
    throw err
  }
}

async function main (): Promise<void> {
  const portArg = process.argv.indexOf('--port')
  const port = portArg > 0 ? Number(process.argv[portArg + 1]) : Number(process.env.DEMO_PORT ?? 8080)
  const demo = await startDemo({ port })
  process.stdout.write([
    '',
    'claude-gateway demo: the real Claude Code CLI, a scripted local model, no API key.',
    '',
    'Open the console (signs in by itself):',
    '',
    demo.consoleUrl,
    '',
    'Or sign in by hand with the token:',
    '',
    demo.token,
    '',
    'Try "hello", then "create a file" (approve the prompt), then "tell a long story" and Interrupt.',
    'Ctrl-C stops the demo.',
    ''
  ].join('\n'))
  const stop = (): void => { void demo.close().then(() => process.exit(0)) }
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
  demo.gateway.once('exit', (code) => { if (code !== 0) process.exit(1) })
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((err: unknown) => {
    process.stderr.write(`demo failed: ${err instanceof Error ? err.message : String(err)}\n`)
    process.exit(1)
  })
}
