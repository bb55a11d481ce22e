/**
 * `claude-remote`: stands in for the `claude` CLI (same argv, same stdio
 * protocol) and runs the session on a claude-gateway instead. Exit codes
 * follow the CLI's: 0, 1 (last result an error, bad stdin, failures), 143
 * (SIGTERM); 2 for a flag or setting claude-remote cannot honour.
 */
import { appendFileSync } from 'node:fs'
import { StringDecoder } from 'node:string_decoder'
import { entrypoints } from '../protocol/session-options.js'
import { UsageError, parseRemoteArgs } from './argv.js'
import { RemoteBridge } from './bridge.js'
import { GatewayApi } from './gateway-api.js'
import { readRemoteEnv } from './remote-env.js'

function warn (message: string): void {
  process.stderr.write(`claude-remote: ${message}\n`)
}

async function main (): Promise<number> {
  let args
  let env
  try {
    args = parseRemoteArgs(process.argv.slice(2))
    env = readRemoteEnv(process.env)
  } catch (err) {
    if (err instanceof UsageError) { warn(err.message); return 2 }
    throw err
  }
  // The SDK tells its CLI who drives it; a new session's CLI gets the same entrypoint (it changes what
  // the CLI boots with, e.g. its built-in agents). Not compared on --resume: a session keeps its own.
  const entrypoint = process.env.CLAUDE_CODE_ENTRYPOINT
  if (args.resume === null && entrypoint !== undefined && (entrypoints as readonly string[]).includes(entrypoint)) args.options.entrypoint = entrypoint
  const debugFile = args.debug.file
  const debug = (message: string): void => {
    const line = `${new Date().toISOString()} claude-remote: ${message}\n`
    if (args.debug.stderr) process.stderr.write(line)
    if (debugFile !== null) {
      try { appendFileSync(debugFile, line) } catch { /* diagnostics only */ }
    }
  }
  let stdoutGone = false
  const bridge = new RemoteBridge({
    api: new GatewayApi(env),
    env,
    args,
    io: {
      writeOut: (line) => { if (!stdoutGone) process.stdout.write(line + '\n') },
      warn,
      debug
    }
  })
  // The host went away (EPIPE): nobody reads the session any more.
  process.stdout.on('error', () => {
    stdoutGone = true
    void bridge.terminate(1)
  })
  process.once('SIGTERM', () => { void bridge.terminate(143) })
  process.once('SIGINT', () => bridge.interrupt())

  const done = bridge.run()
  // stdin: NDJSON split on "\n" only, like the CLI (U+2028 inside a line is not a break).
  const decoder = new StringDecoder('utf8')
  let buffered = ''
  process.stdin.on('data', (chunk: Buffer) => {
    buffered += decoder.write(chunk)
    let nl: number
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl)
      buffered = buffered.slice(nl + 1)
      bridge.hostLine(line)
    }
  })
  process.stdin.on('end', () => {
    buffered += decoder.end()
    if (buffered !== '') bridge.hostLine(buffered)
    buffered = ''
    bridge.hostEnd()
  })
  process.stdin.on('error', () => bridge.hostEnd())
  return await done
}

main().then((code) => {
  // Let stdout drain before leaving: the last lines matter most (the result).
  process.stdout.write('', () => process.exit(code))
}, (err: unknown) => {
  warn(`unexpected error: ${err instanceof Error ? err.stack ?? err.message : String(err)}`)
  process.exit(1)
})
