/**
 * What the suites of several gateway nodes on one store share
 * (cluster-nodes*.test.ts): the two backends they run on (one Redis, a
 * private Redis Cluster), starting nodes on one, and reading what the nodes
 * stored, what their CLIs read and what their metrics count.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { after } from 'node:test'
import { Cluster, Redis } from 'ioredis'
import { type Frame } from './frames.js'
import { TOKEN_A, type TestClient } from './gateway.js'
import { type GatewayNode, type GatewayNodes, startNodes } from './gateway-nodes.js'
import { type RedisCluster, redisClusterMissing, startRedisCluster } from './redis-cluster.js'
import { REDIS_URL } from './redis-server.js'

/** The frames with a seq, as received (text), from `fromSeq` on. */
export function seqFrames (client: TestClient, fromSeq = 1, toSeq = Infinity): string[] {
  return client.raw.filter((_, i) => typeof client.frames[i].seq === 'number' && client.frames[i].seq >= fromSeq && client.frames[i].seq <= toSeq)
}

export const textOf = (f: Frame): string => f.type === 'assistant' ? f.message.content.map((b: any) => b.text ?? '').join('') : ''


/** Where the nodes keep their store: one Redis, or a Redis Cluster. */
export interface Backend {
  name: string
  skip: string | false
  url: () => Promise<string>
  cluster: boolean
}

/**
 * The two stores every suite runs on: one Redis (TEST_REDIS_URL), and a
 * private Redis Cluster started on first use and stopped after the file.
 * Call at the top of a test file.
 */
export function backends (): Backend[] {
  let redisCluster: Promise<RedisCluster> | null = null
  after(async () => { if (redisCluster !== null) await (await redisCluster).stop() })
  const clusterMissing = redisClusterMissing()
  return [
    { name: 'one Redis', skip: false, url: async () => REDIS_URL, cluster: false },
    { name: 'a Redis Cluster', skip: clusterMissing ?? false, url: async () => (await (redisCluster ??= startRedisCluster())).url, cluster: true }
  ]
}

/** `count` nodes on the backend, started together. */
export async function nodesOn (backend: Backend, count: number, env?: Record<string, string>): Promise<GatewayNodes> {
  return await startNodes({ count, redisUrl: await backend.url(), cluster: backend.cluster, env, concurrent: true })
}

/** Every stored frame of the session, in stream order, parsed. */
export async function storedLog (nodes: GatewayNodes, sessionId: string): Promise<Frame[]> {
  const url = new URL(nodes.redisUrl)
  const redis = nodes.cluster ? new Cluster([{ host: url.hostname, port: Number(url.port) }]) : new Redis(nodes.redisUrl)
  try {
    const entries = await redis.xrange(`${nodes.prefix}{${sessionId}}:events`, '-', '+')
    return entries.map(([id, fields]) => ({ id, ...JSON.parse(fields[1] as string) }))
  } finally {
    redis.disconnect()
  }
}

/** A connection to the nodes' Redis (or Cluster) for `use`, closed after. */
export async function withRedis<T> (nodes: GatewayNodes, use: (redis: Redis | Cluster) => Promise<T>): Promise<T> {
  const url = new URL(nodes.redisUrl)
  const redis = nodes.cluster ? new Cluster([{ host: url.hostname, port: Number(url.port) }]) : new Redis(nodes.redisUrl)
  try {
    return await use(redis)
  } finally {
    redis.disconnect()
  }
}

/** The user prompts a session's CLIs read on stdin, in order. */
export function promptsRead (nodes: GatewayNodes, sessionId: string): string[] {
  const file = join(nodes.dataDir, 'fake-log', `${sessionId}.stdin.ndjson`)
  return readFileSync(file, 'utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Frame)
    .filter((f) => f.type === 'user').map((f) => String(f.message.content))
}

/** A counter's value in a node's /metrics. */
export async function counter (node: GatewayNode, series: string): Promise<number> {
  const text = await (await fetch(`${node.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN_A}` } })).text()
  const line = text.split('\n').find((l) => l.startsWith(`${series} `))
  assert.ok(line !== undefined, `${series} in /metrics`)
  return Number(line.slice(series.length + 1))
}

export function assertContiguous (log: Frame[]): void {
  log.forEach((f, i) => {
    assert.equal(f.seq, i + 1, `seq ${i + 1} is at index ${i} of the stored log`)
    assert.equal(f.id, `${f.seq}-0`)
  })
}
