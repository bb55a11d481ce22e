/**
 * An HTTP request made on one node that the session's owner carries out (an
 * answer to a prompt, here) waits in the owner's inbox while the owner is
 * frozen (SIGSTOP) past its lease; another node takes the session over
 * meanwhile, and the owner wakes. The call must not be carried out on the
 * woken owner's fenced CLI (its tool would run for a turn nobody stores), nor
 * be answered 200 as if it had been: the session moved. Real gateway
 * processes on one Redis; the fake CLI logs what it read on stdin.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { isHello, isPrompt, isResult } from '../support/frames.js'
import { TOKEN_A, processAlive } from '../support/gateway.js'
import { type GatewayNode, type GatewayNodes, answersRead, isLost, startNodes } from '../support/gateway-nodes.js'
import { REDIS_URL, redisCommand } from '../support/redis-server.js'
import { eventually } from '../support/waiters.js'

describe('a call waiting in a frozen owner\'s inbox', { timeout: 60_000 }, () => {
  let cluster: GatewayNodes
  const dir = mkdtempSync(join(tmpdir(), 'cgw-frozen-calls-'))
  // A fenced CLI that takes its time to go (as one busy in a tool does) reads what it was last written.
  before(async () => { cluster = await startNodes({ count: 2, redisUrl: REDIS_URL, env: { CLAUDE_ARGS_EXTRA: `--fake-log-dir ${join(dir, 'log')} --fake-mode ignore-sigterm`, SESSION_LEASE_MS: '600' } }) })
  after(async () => {
    await cluster.close()
    rmSync(dir, { recursive: true, force: true })
  })
  /** The messages waiting in a node's bus inbox. */
  const inbox = async (node: string): Promise<Array<Record<string, unknown>>> => {
    const entries = await redisCommand(REDIS_URL, ['XRANGE', `${cluster.prefix}node:{${node}}:inbox`, '-', '+']) as Array<[string, string[]]>
    return entries.map(([, fields]) => JSON.parse(fields[1] as string) as Record<string, unknown>)
  }
  /** The control responses the session's CLIs, on any node, read on stdin. */
  const answersGiven = (id: string): string[] => answersRead(join(dir, 'log'), id)

  it('an answer is not given to the woken owner\'s CLI, nor answered 200, once the session moved', async () => {
    const [a, b] = cluster.nodes as [GatewayNode, GatewayNode]
    const created = await a.create()
    const onA = await a.connect(created.id, 'after=0')
    await onA.waitFor(isHello)
    onA.sendUser('ask Bash touch frozen.txt')
    const requestId = (await onA.waitFor(isPrompt)).request_id as string
    // A client of B attached to A: B repeats its attachment every heartbeat, so A's inbox read
    // was sent again just before the freeze, and does not time out before A wakes.
    const watching = await b.connect(created.id, 'after=0&role=observer')
    await watching.waitFor((f) => f.type === 'gateway' && f.subtype === 'request_pending')
    const oldPid = (await a.session(created.id)).body.pid as number
    let answered: Promise<{ status: number, body: any }> | undefined
    a.child.kill('SIGSTOP')
    try {
      answered = fetch(`${b.url}/v1/sessions/${created.id}/permissions/${requestId}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN_A}`, 'content-type': 'application/json' },
        body: JSON.stringify({ behavior: 'allow' })
      }).then(async (res) => ({ status: res.status, body: await res.json() }))
      await eventually(async () => (await inbox(a.id)).some((m) => m.k === 'call' && m.op === 'answer'), 10_000, 'the answer call in A\'s inbox')
      // A's lease lapses; a client of B takes the session on: B records it lost and resumes it.
      await eventually(async () => await redisCommand(REDIS_URL, ['EXISTS', `${cluster.prefix}{${created.id}}:lease`]) === 0, 10_000, 'A\'s lease to lapse')
      const onB = await b.connect(created.id, 'after=0')
      await onB.waitFor(isHello)
      onB.sendUser('echo moved')
      await onB.waitFor(isLost, 20_000)
      await onB.waitFor(isResult, 20_000)
    } finally {
      // Woken before the bus gives up its read of the inbox, before its next lease renewal lands.
      a.child.kill('SIGCONT')
    }
    const reply = await answered
    await eventually(() => !processAlive(oldPid), 15_000, 'the fenced CLI to be stopped')
    assert.deepEqual(answersGiven(created.id).filter((id) => id === requestId), [], 'no CLI was given the answer')
    assert.notEqual(reply.status, 200, `answered ${JSON.stringify(reply.body)} though the session moved`)
  })
})
