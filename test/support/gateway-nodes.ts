/**
 * Several gateway processes sharing one store, as nodes of one deployment:
 * one Redis (or a Redis Cluster), one key prefix, one DATA_DIR (the shared
 * volume: workspaces, CLI config dirs, the store secret), each with its own
 * NODE_ID and port. Real processes, so a test can SIGKILL, SIGSTOP and
 * SIGCONT a node. `nodes.close()` kills what is left, deletes the keys (on a
 * single Redis) and the directory.
 */
import { randomUUID } from 'node:crypto'
import { existsSync, mkdtempSync, readFileSync, readdirSync, statSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type Frame, isHello, isStatus } from './frames.js'
import { FAKE_CLI, TOKEN_A, TestClient, type ArgvDump } from './gateway.js'
import { type GatewayProcess, startGatewayProcess } from './gateway-process.js'
import { deleteKeys } from './redis-server.js'

export interface GatewayNode extends GatewayProcess {
  /** Its NODE_ID. */
  id: string
  wsUrl: string
  /** POST /v1/sessions on this node (tenant-a); the created session. */
  create: (body?: Record<string, unknown>) => Promise<{ id: string, pid: number | null, status: string }>
  /** GET /v1/sessions/:id on this node. */
  session: (id: string) => Promise<{ status: number, body: any }>
  /** A WebSocket client of tenant-a on this node, closed by `close()`. */
  connect: (sessionId: string, query?: string) => Promise<TestClient>
}

export interface GatewayNodes {
  nodes: GatewayNode[]
  dataDir: string
  prefix: string
  redisUrl: string
  /** True on a Redis Cluster. */
  cluster: boolean
  /** Starts one more node (a restart: pass the id of one that is gone). */
  start: (id: string) => Promise<GatewayNode>
  /** The fake CLI's argv dumps for a session, whichever node spawned it, oldest first. */
  argvDumps: (sessionId: string) => ArgvDump[]
  close: () => Promise<void>
}

export interface NodesOptions {
  count: number
  redisUrl: string
  /** REDIS_URL names a Redis Cluster seed (its keys go with the cluster). */
  cluster?: boolean
  env?: Record<string, string>
  /**
   * Start the nodes at the same time instead of one after another: most of a
   * start is the process loading its modules, so this shortens a suite's set-up.
   */
  concurrent?: boolean
}

export async function startNodes (options: NodesOptions): Promise<GatewayNodes> {
  const dataDir = mkdtempSync(join(tmpdir(), 'cgw-nodes-'))
  const prefix = `cgw-test:${randomUUID()}:`
  const fakeLogDir = join(dataDir, 'fake-log')
  const clients: TestClient[] = []
  const started: GatewayNode[] = []
  const env: Record<string, string> = {
    DATA_DIR: dataDir,
    GATEWAY_TOKENS: `${TOKEN_A}=tenant-a`,
    CLAUDE_BIN: FAKE_CLI,
    CLAUDE_ARGS_EXTRA: `--fake-log-dir ${fakeLogDir}`,
    SANDBOX: 'none',
    ALLOW_UNSANDBOXED: 'true',
    LOG_LEVEL: 'warn',
    RATE_LIMIT_PER_MINUTE: '100000',
    AUTH_FAILURES_PER_MINUTE: '100000',
    CLI_STOP_TIMEOUT_MS: '1000',
    SESSION_LEASE_MS: '1500',
    REDIS_URL: options.redisUrl,
    REDIS_PREFIX: prefix,
    ...(options.cluster === true ? { REDIS_CLUSTER: 'true' } : {}),
    ...options.env
  }
  const auth = { authorization: `Bearer ${TOKEN_A}` }
  const start = async (id: string): Promise<GatewayNode> => {
    const proc = await startGatewayProcess({ ...env, NODE_ID: id })
    const node: GatewayNode = {
      ...proc,
      id,
      wsUrl: proc.url.replace('http', 'ws'),
      async create (body = {}) {
        const res = await fetch(`${proc.url}/v1/sessions`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(body) })
        if (res.status !== 201) throw new Error(`create on ${id}: ${res.status} ${await res.text()}`)
        return await res.json() as { id: string, pid: number | null, status: string }
      },
      async session (sessionId) {
        const res = await fetch(`${proc.url}/v1/sessions/${sessionId}`, { headers: auth })
        return { status: res.status, body: await res.json() }
      },
      async connect (sessionId, query = '') {
        const client = await TestClient.open(`${proc.url.replace('http', 'ws')}/v1/sessions/${sessionId}/ws${query === '' ? '' : `?${query}`}`, auth)
        clients.push(client)
        return client
      }
    }
    started.push(node)
    return node
  }
  const nodes: GatewayNode[] = []
  try {
    const ids = Array.from({ length: options.count }, (_, i) => `node-${String.fromCharCode(97 + i)}`)
    if (options.concurrent === true) {
      // allSettled: a failed start must not leave the others running unseen (each is in `started` once up).
      const results = await Promise.allSettled(ids.map(async (id) => await start(id)))
      for (const r of results) if (r.status === 'rejected') throw r.reason
      for (const r of results) if (r.status === 'fulfilled') nodes.push(r.value)
    } else {
      for (const id of ids) nodes.push(await start(id))
    }
  } catch (err) {
    for (const n of started) await n.kill()
    await rm(dataDir, { recursive: true, force: true })
    throw err
  }
  return {
    nodes,
    dataDir,
    prefix,
    redisUrl: options.redisUrl,
    cluster: options.cluster === true,
    start,
    argvDumps (sessionId) {
      if (!existsSync(fakeLogDir)) return []
      return readdirSync(fakeLogDir)
        .filter((f) => f.startsWith(`${sessionId}.`) && f.endsWith('.argv.json'))
        .map((f) => ({ file: join(fakeLogDir, f), mtime: statSync(join(fakeLogDir, f)).mtimeMs }))
        .sort((a, b) => a.mtime - b.mtime)
        .map(({ file }) => JSON.parse(readFileSync(file, 'utf8')) as ArgvDump)
    },
    async close () {
      for (const c of clients) c.terminate()
      for (const n of started) {
        try { n.child.kill('SIGCONT') } catch { /* gone */ }
        await n.kill()
      }
      if (options.cluster !== true) await deleteKeys(options.redisUrl, prefix)
      // The nodes were killed, not stopped: their fake CLIs see stdin close and write a last log
      // line as they exit, which can land while the folder is being removed (ENOTEMPTY).
      await rm(dataDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 })
    }
  }
}

/** The status a session is recorded with when its node died or was fenced. */
export const isLost = (f: Frame): boolean => isStatus('stopped')(f) && f.exit?.reason === 'lost'
/** The owner's word that this client holds the session. */
export const holdsIt = (f: Frame): boolean => f.type === 'gateway' && f.subtype === 'holder' && f.role === 'controller'

/** A controller connected to `node` once it holds the session: its hello, then the owner's `holder` frame. */
export async function takeOver (node: GatewayNode, sessionId: string): Promise<TestClient> {
  const client = await node.connect(sessionId, 'after=0')
  await client.waitFor(isHello)
  await client.waitFor(holdsIt)
  return client
}

/** The request ids of the control responses the session's fake CLIs (any node, logging to `logDir`) read on stdin. */
export function answersRead (logDir: string, sessionId: string): string[] {
  return readFileSync(join(logDir, `${sessionId}.stdin.ndjson`), 'utf8').split('\n')
    .filter((l) => l.includes('"control_response"')).map((l) => String(JSON.parse(l).response.request_id))
}
