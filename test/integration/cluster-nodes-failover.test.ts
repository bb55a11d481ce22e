/**
 * Several gateway nodes on one Redis (issue 15): real gateway processes
 * sharing a key prefix and a data volume, each with its own NODE_ID, and a
 * short SESSION_LEASE_MS (1.5 s) so that a dead node's sessions lapse within
 * the test. Clients on any node see the same log; only the lease holder runs
 * the CLI and writes; a node killed or frozen past its lease loses its
 * sessions to the others, which record them as `lost` and resume them.
 *
 * Every suite runs twice: on one Redis (TEST_REDIS_URL, default
 * redis://127.0.0.1:6379, a unique prefix per suite) and on a private
 * three-master Redis Cluster (skipped, saying why, without redis-cli).
 *
 * This file: a node that dies or freezes (the rest: cluster-nodes.test.ts).
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import { type Frame, isHello, isResult } from '../support/frames.js'
import { eventually, processAlive } from '../support/gateway.js'
import { type GatewayNodes, isLost, takeOver } from '../support/gateway-nodes.js'
import { assertContiguous, backends, nodesOn, seqFrames, storedLog, textOf } from '../support/cluster-nodes-backends.js'

for (const backend of backends()) {
  describe(`a gateway node that dies or freezes (${backend.name})`, { timeout: 60_000, skip: backend.skip }, () => {
    let cluster: GatewayNodes
    before(async () => { cluster = await nodesOn(backend, 3) })
    after(async () => { await cluster.close() })

    it('kill -9 of the owner mid-turn is recorded as lost, and the next message resumes on another node with earlier turns intact', async () => {
      const [a, b] = cluster.nodes as [typeof cluster.nodes[0], typeof cluster.nodes[0]]
      const created = await a.create()
      const holder = await a.connect(created.id, 'after=0')
      await holder.waitFor(isHello)
      holder.sendUser('echo first turn')
      const firstResult = await holder.waitFor(isResult)
      holder.sendUser('slow 50 100')
      await holder.waitFor((f) => textOf(f).startsWith('slow #'))
      // A controller on B takes the session over from A's client (routed to A), mid-turn.
      const onB = await takeOver(b, created.id)
      await a.kill()

      // Within the lease, a surviving node records the end in the session's own log.
      const lost = await onB.waitFor(isLost, 15_000)
      const log = await storedLog(cluster, created.id)
      assertContiguous(log)
      assert.equal(log[log.length - 1]?.seq, lost.seq, 'the lost status is the last stored frame')
      assert.deepEqual(seqFrames(holder), seqFrames(onB).slice(0, seqFrames(holder).length), 'what node A relayed before it died is what B replays')

      // The next message, through B, starts the CLI on B with --resume; earlier turns stay in history.
      assert.equal(onB.frames.filter(isHello).length, 1, 'the same connection all along')
      const from = onB.frames.length
      onB.sendUser('echo after the crash')
      const again = await onB.waitFor(isResult, 10_000, from)
      assert.ok(again.seq > lost.seq)
      const dumps = cluster.argvDumps(created.id)
      assert.equal(dumps.length, 2)
      assert.ok(dumps[1]?.argv.includes('--resume'))
      const history = await storedLog(cluster, created.id)
      assertContiguous(history)
      assert.ok(history.some((f) => f.seq === firstResult.seq && f.type === 'result'), 'the first turn is still in history')
    })

    it('a prompt routed to an owner that freezes is not lost: it runs where the session resumes', async () => {
      // Node A died in the test before: B owns, the client is on C.
      const [, a, b] = cluster.nodes as [unknown, typeof cluster.nodes[0], typeof cluster.nodes[0]]
      const created = await a.create()
      const onB = await takeOver(b, created.id)
      onB.sendUser('echo before the freeze')
      await onB.waitFor(isResult)
      a.child.kill('SIGSTOP')
      try {
        const from = onB.frames.length
        onB.sendUser('echo sent to a frozen owner')
        // A never confirms it; its lease lapses, the session is recorded lost and resumes on B with the prompt.
        await onB.waitFor(isLost, 20_000, from)
        const result = await onB.waitFor(isResult, 20_000, from)
        assert.equal(result.result, 'Echo: echo sent to a frozen owner')
        const dumps = cluster.argvDumps(created.id)
        assert.equal(dumps.length, 2)
        assert.ok(dumps[1]?.argv.includes('--resume'))
      } finally {
        a.child.kill('SIGCONT')
      }
      assertContiguous(await storedLog(cluster, created.id))
    })

    it('a message the old owner already ran, sent again with its uuid after the session moved, does not run twice', async () => {
      const [, a, b] = cluster.nodes as [unknown, typeof cluster.nodes[0], typeof cluster.nodes[0]]
      const created = await a.create()
      const onB = await takeOver(b, created.id)
      const once = { type: 'user', uuid: randomUUID(), message: { role: 'user', content: 'echo run me once' } }
      onB.send(once)
      await onB.waitFor(isResult)
      a.child.kill('SIGSTOP')
      try {
        await onB.waitFor(isLost, 20_000)
      } finally {
        a.child.kill('SIGCONT')
      }
      // At once, while the node that recorded the loss may still be letting the lease go, as a
      // client does when it cannot tell whether its message arrived: the same uuid again, now
      // handled on B, which learnt the uuid from the user_message A recorded.
      const from = onB.frames.length
      onB.send(once)
      onB.sendUser('echo after the move')
      const result = await onB.waitFor(isResult, 20_000, from)
      assert.equal(result.result, 'Echo: echo after the move')
      const asked = (await storedLog(cluster, created.id)).filter((f) => f.type === 'gateway' && f.subtype === 'user_message')
      assert.deepEqual(asked.map((f) => f.message.content), ['echo run me once', 'echo after the move'])
      assert.equal(asked[0]?.uuid, once.uuid)
      assert.deepEqual(onB.frames.slice(from).filter(isResult).map((f) => f.result), ['Echo: echo after the move'], 'one turn ran on B')
      assert.deepEqual(onB.frames.slice(from).filter((f) => f.type === 'gateway' && f.subtype === 'error'), [], 'neither message was refused')
    })

    it('an owner frozen past its lease (SIGSTOP) and then continued cannot append, and its clients are told to reconnect', async () => {
      const [, b, c] = cluster.nodes as [unknown, typeof cluster.nodes[0], typeof cluster.nodes[0]]
      const created = await b.create()
      const holder = await b.connect(created.id, 'after=0')
      const onC = await c.connect(created.id, 'after=0&role=observer')
      await holder.waitFor(isHello)
      await onC.waitFor(isHello)
      holder.sendUser('slow 30 100')
      await holder.waitFor((f) => textOf(f).startsWith('slow #'))
      const cliPid = (await b.session(created.id)).body.pid as number
      assert.ok(Number.isInteger(cliPid))
      b.child.kill('SIGSTOP')
      try {
        // Node C records the session lost once B's lease lapses; B's CLI keeps printing into its pipe meanwhile.
        await onC.waitFor(isLost, 15_000)
      } finally {
        b.child.kill('SIGCONT')
      }
      const lostSeq = (onC.frames.find(isLost) as Frame).seq as number
      // B wakes up, reads what its CLI printed, is refused by the store, and ends the CLI and its clients.
      assert.equal(await holder.waitClose(15_000), 1012)
      await eventually(() => !processAlive(cliPid), 10_000, 'the fenced CLI to be stopped')
      const log = await storedLog(cluster, created.id)
      assertContiguous(log)
      assert.equal(log[log.length - 1]?.seq, lostSeq, 'nothing was appended after the lost status')
      assert.ok(!seqFrames(holder).some((text) => JSON.parse(text).seq > lostSeq), 'B relayed nothing it could not store')
    })
  })
}
