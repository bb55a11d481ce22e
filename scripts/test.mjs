#!/usr/bin/env node
// `npm test`'s runner: `node --import tsx --test <args>` with a Redis in place.
// Node's test runner has no global set-up hook, so this script does it: when
// nothing answers at TEST_REDIS_URL (default redis://127.0.0.1:6379) it starts
// a private, non-persistent redis-server on a free port, hands its URL to the
// tests as TEST_REDIS_URL, and stops it when the run ends, however it ends.
// Several tests start their own redis-server too, so without one installed the
// run stops at once, saying what to install.
//
// Usage: node scripts/test.mjs [node --test flags] <test files…>
import { spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { constants, tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'

const url = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const bin = process.env.REDIS_SERVER_BIN ?? 'redis-server'

if (spawnSync(bin, ['--version'], { stdio: 'ignore' }).error !== undefined) {
  console.error(`npm test: "${bin}" not found; install redis-server (Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis) or set REDIS_SERVER_BIN to its path: the tests start private Redis servers, and one for the shared Redis when nothing answers at ${url}`)
  process.exit(1)
}

const probe = await ping(url)
if (probe.error?.name === 'ReplyError') {
  // Something is there and speaks Redis but refuses us (NOAUTH, WRONGPASS…): starting another would hide that.
  console.error(`npm test: the Redis at ${url} answered PING with "${probe.error.message}": fix TEST_REDIS_URL (its credentials) or unset it`)
  process.exit(1)
}
const redis = probe.error === undefined ? null : await startPrivateRedis()
if (redis !== null) console.error(`npm test: nothing answers at ${url} (${probe.error.message}); using a private redis-server at ${redis.url}, stopped when the run ends`)

const child = spawn(process.execPath, ['--import', 'tsx', '--test', ...process.argv.slice(2)], {
  stdio: 'inherit',
  env: { ...process.env, TEST_REDIS_URL: redis?.url ?? url }
})
// Ctrl-C reaches the runner directly (same process group); a signal sent to this script alone is passed on.
// A second one ends the runner at once.
let signalled = 0
for (const name of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(name, () => { child.kill(++signalled > 1 ? 'SIGKILL' : name) })
}
const [code, signal] = await once(child, 'exit')
await redis?.stop()
process.exit(code ?? 128 + (constants.signals[signal] ?? 0))

/** PING over a fresh connection: `{}` on PONG, else `{ error }` (a ReplyError when Redis refused us). */
async function ping (target) {
  const client = new Redis(target, {
    protocol: 2,
    lazyConnect: true,
    retryStrategy: () => null,
    maxRetriesPerRequest: 0,
    enableReadyCheck: false,
    connectTimeout: 1000,
    commandTimeout: 1000
  })
  let connectionError
  client.on('error', (error) => { connectionError ??= error })
  try {
    await client.connect()
    const reply = await client.ping()
    return reply === 'PONG' ? {} : { error: new Error(`PING answered ${reply}`) }
  } catch (error) {
    return { error: error.name === 'ReplyError' ? error : connectionError ?? error }
  } finally {
    client.disconnect()
  }
}

/**
 * Starts redis-server (no persistence, in a temp dir) on a free loopback port and waits for PONG.
 * It runs under a small sh that holds our stdin pipe and, when the pipe closes, kills it and removes
 * the dir: when this script exits, however (SIGKILL included), the server goes too. Its own process
 * group keeps a terminal's Ctrl-C away from it, so the tests still have Redis while they wind down.
 */
async function startPrivateRedis () {
  const dir = mkdtempSync(join(tmpdir(), 'cgw-test-redis-'))
  const port = await freePort()
  const privateUrl = `redis://127.0.0.1:${port}`
  const log = join(dir, 'redis.log')
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir,
    '--logfile', log, '--daemonize', 'no', '--protected-mode', 'no']
  const keeper = spawn('sh', ['-c', '"$@" & pid=$!; read _; kill $pid 2>/dev/null; wait $pid; rm -rf "$REDIS_DIR"', 'sh', bin, ...args], {
    detached: true,
    stdio: ['pipe', 'ignore', 'inherit'],
    env: { ...process.env, REDIS_DIR: dir }
  })
  const exited = once(keeper, 'exit')
  const stop = async () => {
    if (keeper.exitCode === null && keeper.signalCode === null) {
      keeper.stdin.end()
      const timer = setTimeout(() => process.kill(-keeper.pid, 'SIGKILL'), 5000)
      await exited
      clearTimeout(timer)
    }
    rmSync(dir, { recursive: true, force: true })
  }
  const deadline = Date.now() + 10_000
  while ((await ping(privateUrl)).error !== undefined) {
    if (Date.now() > deadline) {
      const output = existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n').slice(-5).join(' | ') : ''
      await stop()
      console.error(`npm test: the private redis-server on port ${port} did not answer PING within 10 s: ${output}`)
      process.exit(1)
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return { url: privateUrl, stop }
}

/** A loopback port nothing listens on at the moment of asking. */
async function freePort () {
  const server = createServer().listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address()
  server.close()
  await once(server, 'close')
  return port
}
