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
 * This file: moving between nodes, a reconnect storm and a rolling restart
 * (the rest: cluster-nodes.test.ts).
 */
import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { type Frame, isHello, isResult, isStatus } from '../support/frames.js'
import { TestClient } from '../support/gateway.js'
import { type GatewayNode, type GatewayNodes, takeOver } from '../support/gateway-nodes.js'
import { assertContiguous, backends, nodesOn, storedLog, textOf } from '../support/cluster-nodes-backends.js'

for (const backend of backends()) {
  describe(`moving between nodes (${backend.name})`, { timeout: 90_000, skip: backend.skip }, () => {
    let cluster: GatewayNodes
    before(async () => { cluster = await nodesOn(backend, 3, { SHUTDOWN_GRACE_MS: '20000' }) })
    after(async () => { await cluster.close() })

    it('a reconnect storm that hops between nodes loses and duplicates nothing', async () => {
      const [a] = cluster.nodes as [typeof cluster.nodes[0]]
      const created = await a.create()
      const holder = await a.connect(created.id, 'after=0')
      await holder.waitFor(isHello)
      holder.sendUser('slow 60 25')
      const seen: number[] = []
      let hops = 0
      for (;;) {
        const node = cluster.nodes[hops % cluster.nodes.length] as typeof cluster.nodes[0]
        const hopper = await node.connect(created.id, `after=${seen[seen.length - 1] ?? 0}&role=observer`)
        await hopper.waitFor(isHello)
        // A few frames on this connection (or the end of the turn), then drop it without a goodbye.
        await hopper.until(() => hopper.seqFrames.length >= 3 || hopper.frames.some(isResult), 10_000)
        hopper.terminate()
        for (const f of hopper.seqFrames) seen.push(f.seq as number)
        hops++
        if (hopper.frames.some(isResult)) break
      }
      assert.ok(hops >= 10, `hopped ${hops} times during the turn`)
      const result = await holder.waitFor(isResult)
      assert.ok(seen.length >= result.seq)
      assert.deepEqual(seen, Array.from({ length: seen.length }, (_, i) => i + 1), 'every seq once, in order, across all connections')
    })

    it('a rolling restart of all three nodes during a turn loses no turn and no frame', async () => {
      const created = await (cluster.nodes[0] as typeof cluster.nodes[0]).create()
      const seqs: number[] = []
      const frames: Frame[] = []
      // The turn goes on until this file exists: it spans all three restarts however slow they are.
      const go = join(cluster.dataDir, `go-${created.id}`)
      let client = await takeOver(cluster.nodes[1] as GatewayNode, created.id)
      client.sendUser(`slow-until ${go} 100`)
      await client.waitFor((f) => textOf(f).startsWith('slow #'))
      const collect = (c: TestClient): void => { for (const f of c.seqFrames) { seqs.push(f.seq); frames.push(f) } }

      // Restart C, then B (the client's node: it comes back through C), then A (the owner, mid-turn).
      for (const index of [2, 1, 0]) {
        const node = cluster.nodes[index] as typeof cluster.nodes[0]
        node.child.kill('SIGTERM')
        if (index === 1) {
          assert.equal(await client.waitClose(20_000), 1012, 'told to reconnect')
          collect(client)
          client = await (cluster.nodes[2] as typeof cluster.nodes[0]).connect(created.id, `after=${seqs[seqs.length - 1] ?? 0}`)
          await client.waitFor(isHello)
          await client.waitFor((f) => textOf(f).startsWith('slow #'), 20_000)
        }
        // The owner drains with the turn still running; it ends the turn once told to, then exits.
        if (index === 0) writeFileSync(go, '')
        assert.equal(await node.exited, 0, `${node.id} drained and exited cleanly`)
        cluster.nodes[index] = await cluster.start(node.id)
      }
      // The owner finished the turn before it stopped the CLI; the client saw it all through C.
      const result = await client.waitFor(isResult, 20_000)
      await client.waitFor((f) => isStatus('stopped')(f) && f.seq > result.seq, 20_000)
      const from = client.frames.length
      client.sendUser('echo after the rolling restart')
      const next = await client.waitFor(isResult, 20_000, from)
      collect(client)
      assert.ok(seqs.length >= next.seq)
      assert.deepEqual(seqs, Array.from({ length: seqs.length }, (_, i) => i + 1), 'every seq once, in order, across the restarts')
      const slow = frames.filter((f) => textOf(f).startsWith('slow #')).map(textOf)
      const done = frames.map(textOf).filter((t) => t.startsWith('slow done after '))
      assert.deepEqual(done, [`slow done after ${slow.length}`], 'the turn\'s end, once, counting every block the client saw')
      assert.deepEqual(slow, Array.from({ length: slow.length }, (_, i) => `slow #${i}`), 'the whole turn, no part lost')
      assert.equal(result.is_error, false)
      assertContiguous(await storedLog(cluster, created.id))
    })
  })
}
