/**
 * An HTTP request (an answer to a prompt, the pending prompts, a stop) that
 * reaches the session's owner itself while it is frozen (SIGSTOP) past its
 * lease, after another node took the session over: the woken owner must not
 * carry it out on its fenced CLI before its next renewal tells it the
 * session moved, but where the session runs now. Real gateway processes on
 * one Redis; the fake CLI logs what it read on stdin.
 */
import assert from 'node:assert/strict'
import { request as httpRequest } from 'node:http'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { isHello, isPrompt, isResult } from '../support/frames.js'
import { TOKEN_A, processAlive } from '../support/gateway.js'
import { type GatewayNode, type GatewayNodes, answersRead, isLost, startNodes } from '../support/gateway-nodes.js'
import { REDIS_URL, redisCommand } from '../support/redis-server.js'
import { eventually } from '../support/waiters.js'

interface Reply { status: number, body: any }

describe('an HTTP request made on an owner woken past its lease', { timeout: 90_000 }, () => {
  let cluster: GatewayNodes
  const dir = mkdtempSync(join(tmpdir(), 'cgw-woken-http-'))
  // A fenced CLI that takes its time to go (as one busy in a tool does) reads what it was last written.
  before(async () => { cluster = await startNodes({ count: 2, redisUrl: REDIS_URL, env: { CLAUDE_ARGS_EXTRA: `--fake-log-dir ${join(dir, 'log')} --fake-mode ignore-sigterm`, SESSION_LEASE_MS: '600' } }) })
  after(async () => {
    await cluster.close()
    rmSync(dir, { recursive: true, force: true })
  })

  /** The control responses the session's CLIs, on any node, read on stdin. */
  const answersGiven = (id: string): string[] => answersRead(join(dir, 'log'), id)

  /**
   * Sends a request to `node` (frozen: the kernel takes the connection and
   * its bytes); resolves `written` once the request is all in its socket, and
   * `reply` with the answer it gets after the node wakes.
   */
  const send = (node: GatewayNode, method: string, path: string, body?: unknown): { written: Promise<void>, reply: Promise<Reply> } => {
    let written!: () => void
    const done = new Promise<void>((resolve) => { written = resolve })
    const reply = new Promise<Reply>((resolve, reject) => {
      const text = body === undefined ? undefined : JSON.stringify(body)
      const req = httpRequest(`${node.url}${path}`, {
        method,
        agent: false,
        headers: { authorization: `Bearer ${TOKEN_A}`, ...(text === undefined ? {} : { 'content-type': 'application/json' }) }
      }, (res) => {
        let data = ''
        res.setEncoding('utf8')
        res.on('data', (chunk: string) => { data += chunk })
        res.on('end', () => { resolve({ status: res.statusCode ?? 0, body: data === '' ? null : JSON.parse(data) }) })
      })
      req.on('error', reject)
      req.on('finish', written)
      req.end(text)
    })
    return { written: done, reply }
  }

  /**
   * A session with a prompt pending, created on A; A frozen until its lease
   * lapses and a client of B resumes the session there (B records it lost).
   * `whileFrozen` sends A its requests before A is woken.
   */
  const movedWhileFrozen = async <T>(whileFrozen: (id: string, requestId: string) => Promise<T>): Promise<{ id: string, requestId: string, oldPid: number, sent: T }> => {
    const [a, b] = cluster.nodes as [GatewayNode, GatewayNode]
    const created = await a.create()
    const onA = await a.connect(created.id, 'after=0')
    await onA.waitFor(isHello)
    onA.sendUser('ask Bash touch frozen.txt')
    const requestId = (await onA.waitFor(isPrompt)).request_id as string
    const oldPid = (await a.session(created.id)).body.pid as number
    a.child.kill('SIGSTOP')
    try {
      await eventually(async () => await redisCommand(REDIS_URL, ['EXISTS', `${cluster.prefix}{${created.id}}:lease`]) === 0, 10_000, 'A\'s lease to lapse')
      const onB = await b.connect(created.id, 'after=0')
      await onB.waitFor(isHello)
      onB.sendUser('echo moved')
      await onB.waitFor(isLost, 20_000)
      await onB.waitFor(isResult, 20_000)
      return { id: created.id, requestId, oldPid, sent: await whileFrozen(created.id, requestId) }
    } finally {
      // Woken with the requests in its sockets, before its next lease renewal lands.
      a.child.kill('SIGCONT')
    }
  }

  it('an answer and the pending list are those of the node running the session now', async () => {
    const a = cluster.nodes[0] as GatewayNode
    const { id, requestId, oldPid, sent } = await movedWhileFrozen(async (id, requestId) => {
      const answer = send(a, 'POST', `/v1/sessions/${id}/permissions/${requestId}`, { behavior: 'allow' })
      const pending = send(a, 'GET', `/v1/sessions/${id}/permissions`)
      await Promise.all([answer.written, pending.written])
      return { answer: answer.reply, pending: pending.reply }
    })
    const answered = await sent.answer
    const pending = await sent.pending
    await eventually(() => !processAlive(oldPid), 15_000, 'the fenced CLI to be stopped')
    assert.deepEqual(answersGiven(id).filter((r) => r === requestId), [], 'no CLI was given the answer')
    assert.notEqual(answered.status, 200, `answered ${JSON.stringify(answered.body)} though the session moved`)
    // Where it runs now, the prompt ended with the CLI that asked it; while nobody ran it, 503.
    assert.ok(['unknown_request', 'already_resolved', 'node_unavailable'].includes(answered.body.code), JSON.stringify(answered.body))
    // The prompt ended with the CLI that asked it (B recorded the session lost): not pending where it runs now.
    assert.equal(pending.status, 200, JSON.stringify(pending.body))
    assert.deepEqual(pending.body.requests.map((r: { request_id: string }) => r.request_id), [], 'the pending list is the running node\'s')
  })

  it('a stop stops the CLI where the session runs now', async () => {
    const [a, b] = cluster.nodes as [GatewayNode, GatewayNode]
    const { id, sent } = await movedWhileFrozen(async (id) => {
      const newPid = (await b.session(id)).body.pid as number
      // Checked before A wakes: once it does, the stop may reach B at once.
      assert.ok(processAlive(newPid), 'B runs the CLI')
      const stop = send(a, 'DELETE', `/v1/sessions/${id}`)
      await stop.written
      return { newPid, reply: stop.reply }
    })
    const { newPid } = sent
    const stopped = await sent.reply
    assert.equal(stopped.status, 200, JSON.stringify(stopped.body))
    assert.notEqual(stopped.body.status, 'running', 'the answer is the session as stopped, not the fenced copy')
    await eventually(() => !processAlive(newPid), 15_000, 'the CLI running on B to be stopped')
    assert.equal((await b.session(id)).body.status, 'stopped')
  })
})
