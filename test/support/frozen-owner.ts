/**
 * For the tests of a session's owner frozen (SIGSTOP) past its lease while
 * another node takes the session over: two real gateway nodes on one Redis
 * with a short lease, whose fake CLIs log what they read on stdin and ignore
 * SIGTERM (a fenced CLI that takes its time to go, as one busy in a tool
 * does, reads what it was last written); and the freeze itself.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before } from 'node:test'
import { isHello, isPrompt, isResult } from './frames.js'
import { type GatewayNode, type GatewayNodes, answersRead, isLost, startNodes } from './gateway-nodes.js'
import { REDIS_URL, redisCommand } from './redis-server.js'
import { eventually } from './waiters.js'

export interface FrozenOwnerNodes {
  /** The two nodes, once the suite's `before` has started them. */
  readonly cluster: GatewayNodes
  /** The control responses the session's CLIs, on any node, read on stdin. */
  answersGiven: (sessionId: string) => string[]
}

/** Call in a describe's body: the nodes start in the suite's `before`; its `after` closes them and removes the CLIs' logs. */
export function frozenOwnerNodes (dirPrefix: string): FrozenOwnerNodes {
  let cluster: GatewayNodes | undefined
  const dir = mkdtempSync(join(tmpdir(), dirPrefix))
  const logDir = join(dir, 'log')
  before(async () => { cluster = await startNodes({ count: 2, redisUrl: REDIS_URL, env: { CLAUDE_ARGS_EXTRA: `--fake-log-dir ${logDir} --fake-mode ignore-sigterm`, SESSION_LEASE_MS: '600' } }) })
  after(async () => {
    await cluster?.close()
    rmSync(dir, { recursive: true, force: true })
  })
  return {
    get cluster () {
      if (cluster === undefined) throw new Error('the nodes start in the suite\'s before hook')
      return cluster
    },
    answersGiven: (sessionId) => answersRead(logDir, sessionId)
  }
}

/** What a test does at each point of the freeze, with the session's id and its pending prompt's request id. */
export interface FreezeSteps<F, M> {
  /** With the prompt pending on A, just before A is frozen. */
  beforeFreeze?: (id: string, requestId: string) => Promise<void>
  /** Once A is frozen, before its lease lapses. */
  frozen?: (id: string, requestId: string) => Promise<F>
  /** Once B runs the session, before A wakes. */
  moved?: (id: string, requestId: string) => Promise<M>
}

export interface Frozen<F, M> {
  id: string
  requestId: string
  /** The pid of A's CLI (fenced once A wakes). */
  oldPid: number
  /** What `steps.frozen` returned (undefined without it). */
  frozen: F
  /** What `steps.moved` returned (undefined without it). */
  moved: M
}

/**
 * A session with a prompt pending, created on node A; A frozen until its
 * lease lapses and a client of B resumes the session there (B records it
 * lost); A woken at the end, also when a step fails.
 */
export async function movedWhileFrozen<F = undefined, M = undefined> (cluster: GatewayNodes, steps: FreezeSteps<F, M>): Promise<Frozen<F, M>> {
  const [a, b] = cluster.nodes as [GatewayNode, GatewayNode]
  const created = await a.create()
  const onA = await a.connect(created.id, 'after=0')
  await onA.waitFor(isHello)
  onA.sendUser('ask Bash touch frozen.txt')
  const requestId = (await onA.waitFor(isPrompt)).request_id as string
  const oldPid = (await a.session(created.id)).body.pid as number
  await steps.beforeFreeze?.(created.id, requestId)
  a.child.kill('SIGSTOP')
  try {
    // Without the step, F and M default to undefined: the casts hold.
    const frozen = await steps.frozen?.(created.id, requestId) as F
    await eventually(async () => await redisCommand(REDIS_URL, ['EXISTS', `${cluster.prefix}{${created.id}}:lease`]) === 0, 10_000, 'A\'s lease to lapse')
    const onB = await b.connect(created.id, 'after=0')
    await onB.waitFor(isHello)
    onB.sendUser('echo moved')
    await onB.waitFor(isLost, 20_000)
    await onB.waitFor(isResult, 20_000)
    return { id: created.id, requestId, oldPid, frozen, moved: await steps.moved?.(created.id, requestId) as M }
  } finally {
    // Woken with what the steps sent it in its inbox or its sockets: before the bus gives up
    // its read of the inbox, before its next lease renewal lands.
    a.child.kill('SIGCONT')
  }
}
