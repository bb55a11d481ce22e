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
import { describe, it } from 'node:test'
import { TOKEN_A, processAlive } from '../support/gateway.js'
import { frozenOwnerNodes, movedWhileFrozen } from '../support/frozen-owner.js'
import type { GatewayNode } from '../support/gateway-nodes.js'
import { eventually } from '../support/waiters.js'

interface Reply { status: number, body: any }

describe('an HTTP request made on an owner woken past its lease', { timeout: 90_000 }, () => {
  const nodes = frozenOwnerNodes('cgw-woken-http-')

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

  it('an answer and the pending list are those of the node running the session now', async () => {
    const a = nodes.cluster.nodes[0] as GatewayNode
    const { id, requestId, oldPid, moved: sent } = await movedWhileFrozen(nodes.cluster, {
      moved: async (id, requestId) => {
        const answer = send(a, 'POST', `/v1/sessions/${id}/permissions/${requestId}`, { behavior: 'allow' })
        const pending = send(a, 'GET', `/v1/sessions/${id}/permissions`)
        await Promise.all([answer.written, pending.written])
        return { answer: answer.reply, pending: pending.reply }
      }
    })
    const answered = await sent.answer
    const pending = await sent.pending
    await eventually(() => !processAlive(oldPid), 15_000, 'the fenced CLI to be stopped')
    assert.deepEqual(nodes.answersGiven(id).filter((r) => r === requestId), [], 'no CLI was given the answer')
    assert.notEqual(answered.status, 200, `answered ${JSON.stringify(answered.body)} though the session moved`)
    // Where it runs now, the prompt ended with the CLI that asked it; while nobody ran it, 503.
    assert.ok(['unknown_request', 'already_resolved', 'node_unavailable'].includes(answered.body.code), JSON.stringify(answered.body))
    // The prompt ended with the CLI that asked it (B recorded the session lost): not pending where it runs now.
    assert.equal(pending.status, 200, JSON.stringify(pending.body))
    assert.deepEqual(pending.body.requests.map((r: { request_id: string }) => r.request_id), [], 'the pending list is the running node\'s')
  })

  it('a stop stops the CLI where the session runs now', async () => {
    const [a, b] = nodes.cluster.nodes as [GatewayNode, GatewayNode]
    const { id, moved: sent } = await movedWhileFrozen(nodes.cluster, {
      moved: async (id) => {
        const newPid = (await b.session(id)).body.pid as number
        // Checked before A wakes: once it does, the stop may reach B at once.
        assert.ok(processAlive(newPid), 'B runs the CLI')
        const stop = send(a, 'DELETE', `/v1/sessions/${id}`)
        await stop.written
        return { newPid, reply: stop.reply }
      }
    })
    const { newPid } = sent
    const stopped = await sent.reply
    assert.equal(stopped.status, 200, JSON.stringify(stopped.body))
    assert.notEqual(stopped.body.status, 'running', 'the answer is the session as stopped, not the fenced copy')
    await eventually(() => !processAlive(newPid), 15_000, 'the CLI running on B to be stopped')
    assert.equal((await b.session(id)).body.status, 'stopped')
  })
})
