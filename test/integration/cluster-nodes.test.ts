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
 * This file: clients on several nodes, placement and tenant limits; a node
 * that dies or freezes is in cluster-nodes-failover.test.ts, moving between
 * nodes in cluster-nodes-moving.test.ts (split so they run side by side).
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { isError, isHello, isPrompt, isResult, isStatus } from '../support/frames.js'
import { TOKEN_A, TOKEN_B, TestClient, eventually, processAlive } from '../support/gateway.js'
import { type GatewayNodes, holdsIt, takeOver } from '../support/gateway-nodes.js'
import { assertContiguous, backends, counter, nodesOn, promptsRead, seqFrames, storedLog, withRedis } from '../support/cluster-nodes-backends.js'

for (const backend of backends()) {
  describe(`three gateway nodes on ${backend.name}`, { timeout: 60_000, skip: backend.skip }, () => {
    let cluster: GatewayNodes
    before(async () => { cluster = await nodesOn(backend, 3) })
    after(async () => { await cluster.close() })

    it('clients on every node see the same frames with the same seqs; only the owner takes input', async () => {
      const [a, b, c] = cluster.nodes as [typeof cluster.nodes[0], typeof cluster.nodes[0], typeof cluster.nodes[0]]
      const created = await a.create()
      const holder = await a.connect(created.id, 'after=0')
      const onB = await b.connect(created.id, 'after=0&role=observer')
      const onC = await c.connect(created.id, 'after=0&role=observer')
      const hello = await holder.waitFor(isHello)
      assert.equal(hello.role, 'controller')
      for (const other of [onB, onC]) {
        const h = await other.waitFor(isHello)
        assert.equal(h.role, 'observer', 'a client on a node that does not run the CLI observes')
      }
      holder.sendUser('burst 300 40')
      await holder.waitFor(isResult)
      // What the holder has by now (the result, maybe the idle state after it) is what the others must relay.
      const expected = seqFrames(holder)
      const last = (JSON.parse(expected[expected.length - 1] as string) as { seq: number }).seq
      await onB.waitFor((f) => f.seq === last)
      await onC.waitFor((f) => f.seq === last)
      assert.ok(expected.length > 300)
      assert.deepEqual(seqFrames(onB).slice(0, expected.length), expected, 'node B relays the identical frames')
      assert.deepEqual(seqFrames(onC).slice(0, expected.length), expected, 'node C relays the identical frames')
      assertContiguous(await storedLog(cluster, created.id))

      // An observer's prompt, on whichever node, is refused by the owner.
      onB.sendUser('echo from b')
      await onB.waitFor(isError('not_holder'))
      assert.equal(cluster.argvDumps(created.id).length, 1, 'one CLI was ever started')
    })

    it('a holder on another node runs turns and answers a prompt raised on the owner; a later answer through a third node is refused', async () => {
      const [a, b, c] = cluster.nodes as [typeof cluster.nodes[0], typeof cluster.nodes[0], typeof cluster.nodes[0]]
      const created = await a.create()
      const onA = await a.connect(created.id, 'after=0')
      await onA.waitFor(isHello)
      const onB = await b.connect(created.id, 'after=0')
      await onB.waitFor(isHello)
      // The newest controller holds the session, whichever node it reached.
      await onB.waitFor(holdsIt)
      await onA.waitFor((f) => f.type === 'gateway' && f.subtype === 'holder' && f.role === 'observer')

      onB.sendUser('ask Bash touch from-b.txt')
      const prompt = await onB.waitFor(isPrompt)
      assert.equal(prompt.request.tool_name, 'Bash')
      const notice = await onA.waitFor((f) => f.type === 'gateway' && f.subtype === 'request_pending' && f.seq === prompt.seq)
      assert.equal(notice.request_id, prompt.request_id, 'an observer on the owner sees the same prompt as a notice')
      onB.send({ type: 'control_response', response: { subtype: 'success', request_id: prompt.request_id, response: { behavior: 'allow', updatedInput: prompt.request.input } } })
      const resolved = await onA.waitFor((f) => f.type === 'gateway' && f.subtype === 'permission_resolved' && f.request_id === prompt.request_id)
      assert.equal(resolved.by, onB.frames.find(isHello).client_id, 'answered by the client on node B')
      await onB.waitFor(isResult, 10_000, onB.frames.indexOf(prompt))

      // A client on C takes the session and answers the same prompt again: too late, cluster-wide.
      const onC = await c.connect(created.id, 'after=0')
      await onC.waitFor(holdsIt)
      onC.send({ type: 'control_response', response: { subtype: 'success', request_id: prompt.request_id, response: { behavior: 'deny', message: 'no' } } })
      await onC.waitFor(isError('already_resolved'))
      assert.equal(onA.frames.filter((f) => f.subtype === 'permission_resolved' && f.request_id === prompt.request_id).length, 1)
      assert.equal(cluster.argvDumps(created.id).length, 1, 'one CLI, on the owner')
    })

    it('HTTP answers, pending lists and stops through any node act on the node running the CLI; the first answer wins', async () => {
      const [a, b, c] = cluster.nodes as [typeof cluster.nodes[0], typeof cluster.nodes[0], typeof cluster.nodes[0]]
      const auth = { authorization: `Bearer ${TOKEN_A}`, 'content-type': 'application/json' }
      const created = await a.create()
      const holder = await a.connect(created.id, 'after=0')
      await holder.waitFor(isHello)
      holder.sendUser('ask Bash touch over-http.txt')
      const prompt = await holder.waitFor(isPrompt)

      const listed = await fetch(`${b.url}/v1/sessions/${created.id}/permissions`, { headers: auth })
      assert.equal(listed.status, 200)
      assert.deepEqual((await listed.json() as any).requests.map((r: any) => r.request_id), [prompt.request_id], 'node B lists the prompt raised on A')
      const seenFromB = (await b.session(created.id)).body
      const seenFromA = (await a.session(created.id)).body
      assert.equal(seenFromB.pid, seenFromA.pid, 'node B shows the CLI running on A')
      assert.equal(seenFromB.pending_requests, 1)
      assert.equal(seenFromB.holder, holder.frames.find(isHello).client_id)
      assert.equal(seenFromB.turn_running, true)
      // The listing too, on a node that never loaded the session, and on one that follows it.
      for (const node of [c, b]) {
        const page = await fetch(`${node.url}/v1/sessions`, { headers: auth })
        const entry = (await page.json() as any).sessions.find((s: any) => s.id === created.id)
        assert.deepEqual({ pid: entry.pid, pending: entry.pending_requests, turn: entry.turn_running, holder: entry.holder },
          { pid: seenFromA.pid, pending: 1, turn: true, holder: seenFromA.holder }, 'listed as node A, running the CLI, has it')
      }

      const answer = (node: typeof a, behavior: string): Promise<Response> => fetch(`${node.url}/v1/sessions/${created.id}/permissions/${prompt.request_id}`, {
        method: 'POST', headers: auth, body: JSON.stringify(behavior === 'allow' ? { behavior, updatedInput: prompt.request.input } : { behavior, message: 'no' })
      })
      const first = await answer(c, 'allow')
      assert.equal(first.status, 200, await first.clone().text())
      assert.equal((await first.json() as any).decision, 'allowed')
      const second = await answer(b, 'deny')
      assert.equal(second.status, 409)
      assert.equal((await second.json() as any).code, 'already_resolved')
      const resolved = await holder.waitFor((f) => f.subtype === 'permission_resolved' && f.request_id === prompt.request_id)
      assert.equal(resolved.decision, 'allowed')
      assert.equal(resolved.by, `http:tenant-a`)
      await holder.waitFor(isResult, 10_000, holder.frames.indexOf(prompt))

      const cliPid = (await a.session(created.id)).body.pid as number
      assert.ok(processAlive(cliPid))
      const stopped = await fetch(`${b.url}/v1/sessions/${created.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${TOKEN_A}` } })
      assert.equal(stopped.status, 200)
      await holder.waitFor(isStatus('stopped'))
      await eventually(() => !processAlive(cliPid), 10_000, 'the CLI on node A to end')
    })

    it('a WebSocket ticket issued by one node opens a socket on another, once', async () => {
      const [a, b, c] = cluster.nodes as [typeof cluster.nodes[0], typeof cluster.nodes[0], typeof cluster.nodes[0]]
      const created = await a.create()
      const res = await fetch(`${a.url}/v1/sessions/${created.id}/ws-ticket`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN_A}` } })
      assert.equal(res.status, 201)
      const { ticket } = await res.json() as { ticket: string }
      const opened = await TestClient.open(`${b.wsUrl}/v1/sessions/${created.id}/ws?ticket=${encodeURIComponent(ticket)}`, {})
      try {
        assert.equal((await opened.waitFor(isHello)).session_id, created.id)
      } finally {
        opened.terminate()
      }
      await assert.rejects(TestClient.open(`${c.wsUrl}/v1/sessions/${created.id}/ws?ticket=${encodeURIComponent(ticket)}`, {}),
        (err: any) => err.statusCode === 401, 'spent on node B: refused on node C')
    })

    it('a frame posted into the owner\'s inbox by someone without STORE_SECRET, or a copy of a node\'s message, never reaches the CLI', async () => {
      const [a, b] = cluster.nodes as [typeof cluster.nodes[0], typeof cluster.nodes[0]]
      const created = await a.create()
      const onB = await takeOver(b, created.id)
      const inbox = `${cluster.prefix}node:{${a.id}}:inbox`
      // What a router of this version would have sent, as a controller on node B: only the signature is missing.
      const forged = { k: 'frame', s: created.id, c: 'forger', n: b.id, r: 'controller', f: { type: 'user', message: { role: 'user', content: 'echo forged' } }, i: 1 }
      await withRedis(cluster, async (redis) => { await redis.xadd(inbox, '*', 'm', JSON.stringify(forged)) })
      onB.sendUser('echo first')
      await onB.waitFor(isResult)
      // Node B's own message, signed, copied back into the inbox: a replay.
      await withRedis(cluster, async (redis) => {
        const entries = await redis.xrange(inbox, '-', '+')
        const signed = entries.map(([, fields]) => fields[1] as string).find((m) => m.includes('echo first'))
        assert.ok(signed !== undefined && signed.startsWith('{"$":"'), 'node B signed its message')
        await redis.xadd(inbox, '*', 'm', signed)
      })
      onB.sendUser('echo second')
      await onB.waitFor((f) => isResult(f) && f.seq > onB.frames.find(isResult).seq)
      assert.deepEqual(promptsRead(cluster, created.id), ['echo first', 'echo second'], 'the CLI read each real prompt once and nothing else')
      assert.equal(await counter(a, 'cgw_node_bus_refused_total{reason="unsigned"}'), 1)
      assert.equal(await counter(a, 'cgw_node_bus_refused_total{reason="replay"}'), 1)
      assert.equal(await counter(a, 'cgw_node_bus_refused_total{reason="mac"}'), 0)
    })

    it('a session stopped on one node resumes on the node the next message reaches', async () => {
      const [a, b] = cluster.nodes as [typeof cluster.nodes[0], typeof cluster.nodes[0]]
      const created = await a.create()
      const first = await a.connect(created.id, 'after=0')
      await first.waitFor(isHello)
      first.sendUser('echo one')
      await first.waitFor(isResult)
      const stop = await fetch(`${a.url}/v1/sessions/${created.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${TOKEN_A}` } })
      assert.ok(stop.status < 300, `stop answered ${stop.status}`)
      const stopped = await first.waitFor(isStatus('stopped'))

      const onB = await b.connect(created.id, 'after=0')
      const hello = await onB.waitFor(isHello)
      assert.equal(hello.role, 'controller', 'nobody runs it: a client anywhere may take it')
      await onB.waitFor((f) => f.seq === stopped.seq) // the replay is done
      const from = onB.frames.length
      onB.sendUser('echo two')
      const result = await onB.waitFor(isResult, 10_000, from)
      assert.equal(result.is_error, false)
      const dumps = cluster.argvDumps(created.id)
      assert.equal(dumps.length, 2)
      assert.ok(dumps[1]?.argv.includes('--resume'), 'the second CLI resumes the conversation')
      // Node A's client follows the session to its new node. Up to the result: what the CLI
      // prints after it (its idle state) reaches the two clients at their own pace.
      await first.waitFor((f) => f.seq === result.seq)
      assert.deepEqual(seqFrames(first, 1, result.seq), seqFrames(onB, 1, result.seq))
      assertContiguous(await storedLog(cluster, created.id))
    })
  })

  describe(`placement across nodes (${backend.name})`, { timeout: 60_000, skip: backend.skip }, () => {
    let cluster: GatewayNodes
    before(async () => { cluster = await nodesOn(backend, 2, { MAX_SESSIONS: '1' }) })
    after(async () => { await cluster.close() })

    it('a create on a full node starts the CLI on a node with room; refused only when every node is full', async () => {
      const [a, b] = cluster.nodes as [typeof cluster.nodes[0], typeof cluster.nodes[0]]
      const first = await a.create()
      const second = await a.create()
      assert.notEqual(second.id, first.id)
      assert.ok(Number.isInteger(second.pid) && processAlive(second.pid as number), 'its CLI runs')
      const onB = (await b.session(second.id)).body
      assert.equal(onB.pid, second.pid, 'node B runs it')
      assert.equal((await a.session(first.id)).body.pid, first.pid, 'node A still runs the first')
      const client = await a.connect(second.id, 'after=0')
      await client.waitFor(isHello)
      client.sendUser('echo placed')
      assert.equal((await client.waitFor(isResult)).result, 'Echo: echo placed', 'a client on A drives it on B')
      const third = await fetch(`${a.url}/v1/sessions`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN_A}`, 'content-type': 'application/json' }, body: '{}' })
      assert.equal(third.status, 503)
      assert.equal((await third.json() as any).code, 'too_many_sessions')
    })
  })

  describe(`tenant limits across nodes (${backend.name})`, { timeout: 60_000, skip: backend.skip }, () => {
    let cluster: GatewayNodes
    before(async () => {
      cluster = await nodesOn(backend, 2, { MAX_SESSIONS_PER_TENANT: '2', GATEWAY_TOKENS: `${TOKEN_A}=tenant-a,${TOKEN_B}=tenant-b` })
    })
    after(async () => { await cluster.close() })

    it('MAX_SESSIONS_PER_TENANT counts the tenant\'s sessions on every node', async () => {
      const [a, b] = cluster.nodes as [typeof cluster.nodes[0], typeof cluster.nodes[0]]
      const create = async (node: typeof a, token: string): Promise<Response> =>
        await fetch(`${node.url}/v1/sessions`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: '{}' })
      const first = await a.create()
      await b.create()
      for (const node of [a, b]) {
        const refused = await create(node, TOKEN_A)
        assert.equal(refused.status, 429, 'one on each node makes two: the limit, whichever node is asked')
        assert.equal((await refused.json() as any).code, 'tenant_session_limit')
      }
      const other = await create(a, TOKEN_B)
      assert.equal(other.status, 201, 'another tenant is not held back')
      // One of tenant A's sessions stops on node A: a create on node B may go ahead.
      const stopped = await fetch(`${a.url}/v1/sessions/${first.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${TOKEN_A}` } })
      assert.equal(stopped.status, 200)
      assert.equal((await stopped.json() as any).status, 'stopped')
      // Node A reports the stop at once, and B reads the reports before each create: within a store round trip.
      await eventually(async () => (await create(b, TOKEN_A)).status === 201, 5_000, 'a create on B once the stop on A is counted')
      // A create answered 201 was reported first: a create made after it, on any node, counts it.
      const over = await create(a, TOKEN_A)
      assert.equal(over.status, 429)
    })
  })
}
