/**
 * A private three-master Redis Cluster for tests: three `redis-server
 * --cluster-enabled yes` on free loopback ports in a temporary directory,
 * joined with `redis-cli --cluster create`, ready once every node reports
 * `cluster_state:ok`. `stop()` kills the servers and removes the directory;
 * a failed start does the same before it rejects, and the servers are killed
 * when the test process exits in any case.
 *
 * `redisClusterMissing()` says what to install when `redis-server` or
 * `redis-cli` is not on PATH, for tests that skip then.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { onTestExit } from './exit-hooks.js'
import { outputMatches } from './process-output.js'

export interface RedisCluster {
  /** A seed node's URL (any node will do for a cluster client). */
  url: string
  /** The masters' ports, in the order they were created. */
  ports: number[]
  /** Kills the servers, waits for them to exit and removes their directory; idempotent. */
  stop: () => Promise<void>
}

const REDIS_SERVER_BIN = process.env.REDIS_SERVER_BIN ?? 'redis-server'
const REDIS_CLI_BIN = process.env.REDIS_CLI_BIN ?? 'redis-cli'
const running = new Set<ChildProcess>()
onTestExit(() => { for (const child of running) child.kill('SIGKILL') })

/** Null when both binaries run; else what to install, for a test's skip message. */
export function redisClusterMissing (): string | null {
  const missing = [REDIS_SERVER_BIN, REDIS_CLI_BIN].filter((bin) => spawnSync(bin, ['--version'], { stdio: 'ignore' }).status !== 0)
  if (missing.length === 0) return null
  return `${missing.join(' and ')} not found on PATH: install redis-server and redis-tools (apt-get install redis-server redis-tools; Homebrew: brew install redis)`
}

export async function startRedisCluster (options: { timeoutMs?: number } = {}): Promise<RedisCluster> {
  // A port found free can be taken before redis-server binds it (free ports come from the range
  // the machine's own outgoing connections use): start again on other ports, a few times.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(options.timeoutMs ?? 30_000)
    } catch (error) {
      if (attempt >= 3 || !/Address already in use/.test(String((error as Error).message))) throw error
    }
  }
}

async function startOnce (timeoutMs: number): Promise<RedisCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'cgw-redis-cluster-'))
  const children: ChildProcess[] = []
  let stopped: Promise<void> | null = null
  const stop = (): Promise<void> => {
    stopped ??= (async () => {
      await Promise.all(children.map((child) => end(child)))
      await rm(dir, { recursive: true, force: true })
    })()
    return stopped
  }
  try {
    const ports = await freeClusterPorts(3)
    const ready: Array<Promise<void>> = []
    const clusterOk: Array<Promise<void>> = []
    for (const port of ports) {
      const child = spawn(REDIS_SERVER_BIN, [
        '--port', String(port), '--bind', '127.0.0.1', '--protected-mode', 'no',
        '--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${port}.conf`,
        '--save', '', '--appendonly', 'no', '--dir', dir, '--daemonize', 'no', '--loglevel', 'notice'
      ], { stdio: ['ignore', 'pipe', 'pipe'] })
      // Notice level: each node logs when it listens, and when the cluster it joined is up.
      ready.push(outputMatches(child, /Ready to accept connections/, timeoutMs, `redis-server on ${port}`))
      clusterOk.push(outputMatches(child, /Cluster state changed: ok/, timeoutMs, `node ${port} reporting cluster_state:ok`))
      // Awaited below; a start that fails earlier must not leave them rejecting unhandled.
      for (const waiting of [ready, clusterOk]) (waiting[waiting.length - 1] as Promise<void>).catch(() => {})
      children.push(child)
      running.add(child)
      child.once('exit', () => running.delete(child))
      // Drained after the lines waited for, so a chatty node never blocks on a full pipe.
      child.stdout?.resume()
      child.stderr?.resume()
    }
    await Promise.all(ready)
    const create = spawn(REDIS_CLI_BIN, ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'],
      { stdio: ['ignore', 'pipe', 'pipe'] })
    let createOutput = ''
    create.stdout?.on('data', (d: Buffer) => { createOutput += d.toString() })
    create.stderr?.on('data', (d: Buffer) => { createOutput += d.toString() })
    const [code] = await once(create, 'exit') as [number | null]
    if (code !== 0) throw new Error(`redis-cli --cluster create exited with ${code}: ${createOutput}`)
    await Promise.all(clusterOk)
    return { url: `redis://127.0.0.1:${ports[0] as number}`, ports, stop }
  } catch (error) {
    await stop()
    throw error
  }
}

/** `count` distinct free ports whose cluster bus ports (port + 10000) are free too. */
async function freeClusterPorts (count: number): Promise<number[]> {
  const ports: number[] = []
  for (let tries = 0; ports.length < count; tries++) {
    if (tries > 200) throw new Error('no free ports for a Redis Cluster')
    const port = await freePort(0)
    if (port + 10000 > 65535 || ports.includes(port)) continue
    if (await freePort(port + 10000).then(() => true, () => false)) ports.push(port)
  }
  return ports
}

async function freePort (port: number): Promise<number> {
  const server = createServer()
  server.listen(port, '127.0.0.1')
  await Promise.race([once(server, 'listening'), once(server, 'error').then(([error]) => { throw error })])
  const address = server.address()
  server.close()
  await once(server, 'close')
  if (address === null || typeof address === 'string') throw new Error('no port')
  return address.port
}

async function end (child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = once(child, 'exit')
  child.kill('SIGKILL')
  await exited
  running.delete(child)
}
