/**
 * Test helpers for Redis without a client library (only src/store/redis.ts
 * imports ioredis):
 *
 * - `startRedisServer()` runs a private, non-persistent `redis-server` on a
 *   free port, for tests that stop and restart Redis. The process is killed
 *   on `stop()`/`kill()` and, as a last resort, when the test process exits.
 * - `redisCommand()` sends one command over a fresh connection (RESP2) and
 *   returns the reply; `deleteKeys()` removes every key with a prefix.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { createConnection, createServer } from 'node:net'

export interface RedisServer {
  url: string
  port: number
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

const REDIS_SERVER_BIN = process.env.REDIS_SERVER_BIN ?? '/usr/bin/redis-server'
const running = new Set<ChildProcess>()
process.once('exit', () => { for (const child of running) child.kill('SIGKILL') })

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
  let output = ''

  const start = async (): Promise<void> => {
    if (child !== null) throw new Error('redis-server is already running')
    output = ''
    const proc = spawn(REDIS_SERVER_BIN, [
      '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
      '--daemonize', 'no', '--protected-mode', 'no', '--loglevel', 'warning', ...(options.args ?? [])
    ], { stdio: ['ignore', 'pipe', 'pipe'] })
    child = proc
    running.add(proc)
    proc.stdout?.on('data', (d: Buffer) => { output += d.toString() })
    proc.stderr?.on('data', (d: Buffer) => { output += d.toString() })
    proc.once('exit', () => {
      running.delete(proc)
      if (child === proc) child = null
    })
    const deadline = Date.now() + startTimeoutMs
    while (true) {
      if (proc.exitCode !== null || proc.signalCode !== null) {
        throw new Error(`redis-server exited at start (${proc.exitCode ?? proc.signalCode}): ${output}`)
      }
      try {
        if (await redisCommand(pingUrl, ['PING'], { timeoutMs: 500 }) === 'PONG') return
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) {
        await end(proc, 'SIGKILL')
        throw new Error(`redis-server on port ${port} did not answer PING within ${startTimeoutMs} ms: ${output}`)
      }
      await new Promise((resolve) => setTimeout(resolve, 25))
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

export class RedisReplyError extends Error {
  override name = 'RedisReplyError'
}

/** Sends one command on a fresh connection and resolves with its reply (error replies reject). */
export async function redisCommand (url: string, args: (string | number)[], options: { timeoutMs?: number } = {}): Promise<Reply> {
  const target = new URL(url)
  const socket = createConnection({ host: target.hostname, port: Number(target.port === '' ? 6379 : target.port) })
  const timeoutMs = options.timeoutMs ?? 5000
  return await new Promise<Reply>((resolve, reject) => {
    let buffer = Buffer.alloc(0)
    const timer = setTimeout(() => finish(new Error(`redis ${String(args[0])} timed out`)), timeoutMs)
    const finish = (error: Error | null, reply?: Reply): void => {
      clearTimeout(timer)
      socket.destroy()
      if (error !== null) reject(error)
      else resolve(reply as Reply)
    }
    socket.on('error', (error) => finish(error))
    socket.on('connect', () => {
      const auth = target.password === '' ? [] : [['AUTH', ...(target.username === '' ? [] : [decodeURIComponent(target.username)]), decodeURIComponent(target.password)]]
      const db = target.pathname.length > 1 ? [['SELECT', target.pathname.slice(1)]] : []
      for (const command of [...auth, ...db, args]) socket.write(encode(command))
      let skip = auth.length + db.length
      socket.on('data', (data: Buffer) => {
        buffer = Buffer.concat([buffer, data])
        while (true) {
          let parsed: { reply: Reply | RedisReplyError; end: number } | null
          try {
            parsed = parse(buffer, 0)
          } catch (error) {
            finish(error as Error)
            return
          }
          if (parsed === null) return
          buffer = buffer.subarray(parsed.end)
          if (parsed.reply instanceof RedisReplyError) {
            finish(parsed.reply)
            return
          }
          if (skip > 0) {
            skip--
            continue
          }
          finish(null, parsed.reply)
          return
        }
      })
    })
  })
}

/** Deletes every key whose name starts with `prefix` (SCAN + DEL). */
export async function deleteKeys (url: string, prefix: string): Promise<number> {
  const pattern = prefix.replace(/[*?[\]\\]/g, (c) => `\\${c}`) + '*'
  let cursor = '0'
  let deleted = 0
  do {
    const reply = await redisCommand(url, ['SCAN', cursor, 'MATCH', pattern, 'COUNT', 1000]) as [string, string[]]
    cursor = reply[0]
    if (reply[1].length > 0) deleted += await redisCommand(url, ['DEL', ...reply[1]]) as number
  } while (cursor !== '0')
  return deleted
}

function encode (args: (string | number)[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)]
  for (const arg of args) {
    const bytes = Buffer.from(String(arg))
    parts.push(Buffer.from(`$${bytes.length}\r\n`), bytes, Buffer.from('\r\n'))
  }
  return Buffer.concat(parts)
}

/** Parses one RESP2 reply at `start`; null when the buffer does not hold all of it yet. */
function parse (buffer: Buffer, start: number): { reply: Reply | RedisReplyError; end: number } | null {
  const lineEnd = buffer.indexOf('\r\n', start)
  if (lineEnd < 0) return null
  const type = String.fromCharCode(buffer[start] as number)
  const line = buffer.toString('utf8', start + 1, lineEnd)
  const next = lineEnd + 2
  switch (type) {
    case '+': return { reply: line, end: next }
    case '-': return { reply: new RedisReplyError(line), end: next }
    case ':': return { reply: Number(line), end: next }
    case '$': {
      const length = Number(line)
      if (length < 0) return { reply: null, end: next }
      if (buffer.length < next + length + 2) return null
      return { reply: buffer.toString('utf8', next, next + length), end: next + length + 2 }
    }
    case '*': {
      const count = Number(line)
      if (count < 0) return { reply: null, end: next }
      const items: Reply[] = []
      let at = next
      for (let i = 0; i < count; i++) {
        const item = parse(buffer, at)
        if (item === null) return null
        if (item.reply instanceof RedisReplyError) throw item.reply
        items.push(item.reply)
        at = item.end
      }
      return { reply: items, end: at }
    }
    default: throw new Error(`unexpected RESP reply type ${JSON.stringify(type)}`)
  }
}
