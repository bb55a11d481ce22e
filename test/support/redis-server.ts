/**
 * Test helpers for Redis:
 *
 * - `REDIS_URL` is the Redis the tests share: TEST_REDIS_URL, else
 *   127.0.0.1:6379 (`npm test` sets TEST_REDIS_URL to a private server when
 *   nothing answers there; see scripts/test.mjs).
 * - `startRedisServer()` runs a private, non-persistent `redis-server` on a
 *   free port, for tests that stop and restart Redis. The process is killed
 *   on `stop()`/`kill()` and, as a last resort, when the test process exits.
 * - `redisCommand()` sends one command over a fresh ioredis connection and
 *   returns the reply; `deleteKeys()` removes every key with a prefix.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { createServer } from 'node:net'
import { Redis } from 'ioredis'
import { endsWithTest, onTestExit } from './exit-hooks.js'
import { outputMatches } from './process-output.js'

/** The shared Redis of the tests (a private one when `npm test` had to start it). */
export const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
/** Its host and port, for tests that check a sandbox cannot reach it. */
export const REDIS_HOST = new URL(REDIS_URL).hostname
export const REDIS_PORT = Number(new URL(REDIS_URL).port === '' ? 6379 : new URL(REDIS_URL).port)

export interface RedisServer {
  url: string
  port: number
  /** The running server's pid; null while it is stopped. */
  readonly pid: number | null
  /** Stops the server (SIGTERM, then SIGKILL) and waits for it to exit. */
  stop: () => Promise<void>
  /** Starts it again on the same port and waits until it answers PING. */
  start: () => Promise<void>
  /** Kills it at once (SIGKILL) and waits for it to exit. */
  kill: () => Promise<void>
  /**
   * Freezes it (SIGSTOP): connections stay open and its data stays, but no
   * command is answered until `resume()` (SIGCONT). Commands sent meanwhile
   * run once it resumes, as after a long GC pause or a stalled VM.
   */
  pause: () => void
  resume: () => void
}

// Found on PATH unless given: machines put it in /usr/bin, /usr/local/bin or a Homebrew prefix.
const REDIS_SERVER_BIN = process.env.REDIS_SERVER_BIN ?? 'redis-server'
const running = new Set<ChildProcess>()
onTestExit(() => { for (const child of running) child.kill('SIGKILL') })

export interface RedisServerOptions {
  startTimeoutMs?: number
  /** More `redis-server` arguments, e.g. `['--aclfile', path]`. */
  args?: string[]
  /** Credentials for the readiness PING when the default user is off (an ACL file). `url` stays without them. */
  auth?: { user: string, password: string }
}

export async function startRedisServer (options: RedisServerOptions = {}): Promise<RedisServer> {
  const port = await freePort()
  const url = `redis://127.0.0.1:${port}`
  const pingUrl = options.auth === undefined
    ? url
    : `redis://${encodeURIComponent(options.auth.user)}:${encodeURIComponent(options.auth.password)}@127.0.0.1:${port}`
  const startTimeoutMs = options.startTimeoutMs ?? 10_000
  let child: ChildProcess | null = null

  const start = async (): Promise<void> => {
    if (child !== null) throw new Error('redis-server is already running')
    const proc = spawn(REDIS_SERVER_BIN, [
      '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
      '--daemonize', 'no', '--protected-mode', 'no', '--loglevel', 'notice', ...(options.args ?? [])
    ], { stdio: ['ignore', 'pipe', 'pipe'], detached: true })
    // Its own group, ended with this file even if the file is killed outright (exit-hooks.ts).
    const unwatch = proc.pid === undefined ? () => {} : endsWithTest(proc.pid)
    // Notice level: the server logs the moment it listens ("Ready to accept connections").
    const ready = outputMatches(proc, /Ready to accept connections/, startTimeoutMs, `redis-server on port ${port}`)
    child = proc
    running.add(proc)
    // Drained after the line waited for, so the server never blocks on a full pipe.
    proc.stdout?.resume()
    proc.stderr?.resume()
    proc.once('exit', () => {
      unwatch()
      running.delete(proc)
      if (child === proc) child = null
    })
    try {
      await ready
      // Listening; and the credentials the tests use work (an ACL file is in force).
      const pong = await redisCommand(pingUrl, ['PING'], { timeoutMs: 2000 })
      if (pong !== 'PONG') throw new Error(`redis-server on port ${port} answered PING with ${JSON.stringify(pong)}`)
    } catch (err) {
      await end(proc, 'SIGKILL')
      throw err
    }
  }

  const halt = async (signal: NodeJS.Signals): Promise<void> => {
    const proc = child
    if (proc === null) return
    child = null
    await end(proc, signal)
  }

  const signal = (name: NodeJS.Signals): void => {
    if (child === null) throw new Error('redis-server is not running')
    child.kill(name)
  }
  // A frozen server cannot take SIGTERM: thaw it first, whichever way the test ends.
  const halt2 = async (name: NodeJS.Signals): Promise<void> => {
    if (child !== null) child.kill('SIGCONT')
    await halt(name)
  }

  await start()
  return {
    url,
    port,
    get pid () { return child?.pid ?? null },
    start,
    stop: () => halt2('SIGTERM'),
    kill: () => halt2('SIGKILL'),
    pause: () => signal('SIGSTOP'),
    resume: () => signal('SIGCONT')
  }
}

/** Signals a process and waits for it to exit, escalating to SIGKILL after 5 s. */
async function end (proc: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return
  const exited = once(proc, 'exit')
  proc.kill(signal)
  const timer = setTimeout(() => proc.kill('SIGKILL'), 5000)
  try {
    await exited
  } finally {
    clearTimeout(timer)
    running.delete(proc)
  }
}

async function freePort (): Promise<number> {
  const server = createServer()
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const address = server.address()
  server.close()
  await once(server, 'close')
  if (address === null || typeof address === 'string') throw new Error('no port')
  return address.port
}

export type Reply = string | number | null | Reply[]

/**
 * Sends one command on a fresh connection and resolves with its reply; error
 * replies (NOAUTH, WRONGPASS, NOPERM…) and connection failures reject. RESP2,
 * so replies have the shapes redis-cli shows (flat arrays, numbers as
 * integers, bulk strings as strings).
 */
export async function redisCommand (url: string, args: (string | number)[], options: { timeoutMs?: number } = {}): Promise<Reply> {
  const timeoutMs = options.timeoutMs ?? 5000
  const client = new Redis(url, {
    protocol: 2,
    lazyConnect: true,
    // One attempt: a refused connection or a bad password is the answer, not something to retry.
    retryStrategy: () => null,
    maxRetriesPerRequest: 0,
    enableReadyCheck: false,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs
  })
  let connectionError: Error | null = null
  // Without a listener ioredis prints connection errors to stderr; the first one is the useful one.
  client.on('error', (error: Error) => { connectionError ??= error })
  const [command, ...rest] = args
  try {
    await client.connect()
    return await client.call(String(command), ...rest) as Reply
  } catch (error) {
    // A refused or dropped connection surfaces as "Connection is closed": report its cause.
    throw connectionError ?? error
  } finally {
    client.disconnect()
  }
}

/** Deletes every key whose name starts with `prefix` (SCAN + DEL). */
export async function deleteKeys (url: string, prefix: string): Promise<number> {
  const pattern = prefix.replace(/[*?[\]\\]/g, (c) => `\\${c}`) + '*'
  const client = new Redis(url, { protocol: 2, lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 })
  let connectionError: Error | null = null
  client.on('error', (error: Error) => { connectionError ??= error })
  let deleted = 0
  try {
    await client.connect()
    for await (const keys of client.scanStream({ match: pattern, count: 1000 }) as AsyncIterable<string[]>) {
      if (keys.length > 0) deleted += await client.del(...keys)
    }
    return deleted
  } catch (error) {
    throw connectionError ?? error
  } finally {
    client.disconnect()
  }
}
