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
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { Cluster, Redis } from 'ioredis'
import { type Frame, isError, isHello, isPrompt, isResult, isStatus } from '../support/frames.js'
import { TOKEN_A, TOKEN_B, TestClient, eventually, processAlive } from '../support/gateway.js'
import { type GatewayNode, type GatewayNodes, holdsIt, isLost, startNodes, takeOver } from '../support/gateway-nodes.js'
import { type RedisCluster, redisClusterMissing, startRedisCluster } from '../support/redis-cluster.js'
import { REDIS_URL } from '../support/redis-server.js'

/** The frames with a seq, as received (text), from `fromSeq` on. */
function seqFrames (client: TestClient, fromSeq = 1, toSeq = Infinity): string[] {
  return client.raw.filter((_, i) => typeof client.frames[i].seq === 'number' && client.frames[i].seq >= fromSeq && client.frames[i].seq <= toSeq)
}

const textOf = (f: Frame): string => f.type === 'assistant' ? f.message.content.map((b: any) => b.text ?? '').join('') : ''


/** Where the nodes keep their store: one Redis, or a Redis Cluster. */
interface Backend {
  name: string
  skip: string | false
  url: () => Promise<string>
  cluster: boolean
}

let redisCluster: Promise<RedisCluster> | null = null
after(async () => { if (redisCluster !== null) await (await redisCluster).stop() })
const clusterMissing = redisClusterMissing()
const BACKENDS: Backend[] = [
  { name: 'one Redis', skip: false, url: async () => REDIS_URL, cluster: false },
  { name: 'a Redis Cluster', skip: clusterMissing ?? false, url: async () => (await (redisCluster ??= startRedisCluster())).url, cluster: true }
]

/** Every stored frame of the session, in stream order, parsed. */
async function storedLog (nodes: GatewayNodes, sessionId: string): Promise<Frame[]> {
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
async function withRedis<T> (nodes: GatewayNodes, use: (redis: Redis | Cluster) => Promise<T>): Promise<T> {
  const url = new URL(nodes.redisUrl)
  const redis = nodes.cluster ? new Cluster([{ host: url.hostname, port: Number(url.port) }]) : new Redis(nodes.redisUrl)
  try {
    return await use(redis)
  } finally {
    redis.disconnect()
  }
}

/** The user prompts a session's CLIs read on stdin, in order. */
function promptsRead (nodes: GatewayNodes, sessionId: string): string[] {
  const file = join(nodes.dataDir, 'fake-log', `${sessionId}.stdin.ndjson`)
  return readFileSync(file, 'utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Frame)
    .filter((f) => f.type === 'user').map((f) => String(f.message.content))
}

/** A counter's value in a node's /metrics. */
async function counter (node: GatewayNode, series: string): Promise<number> {
  const text = await (await fetch(`${node.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN_A}` } })).text()
  const line = text.split('\n').find((l) => l.startsWith(`${series} `))
  assert.ok(line !== undefined, `${series} in /metrics`)
  return Number(line.slice(series.length + 1))
}

function assertContiguous (log: Frame[]): void {
  log.forEach((f, i) => {
    assert.equal(f.seq, i + 1, `seq ${i + 1} is at index ${i} of the stored log`)
    assert.equal(f.id, `${f.seq}-0`)
  })
}

for (const backend of BACKENDS) {
  describe(`three gateway nodes on ${backend.name}`, { timeout: 60_000, skip: backend.skip }, () => {
    let cluster: GatewayNodes
    before(async () => { cluster = await startNodes({ count: 3, redisUrl: await backend.url(), cluster: backend.cluster }) })
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

  describe(`a gateway node that dies or freezes (${backend.name})`, { timeout: 60_000, skip: backend.skip }, () => {
    let cluster: GatewayNodes
    before(async () => { cluster = await startNodes({ count: 3, redisUrl: await backend.url(), cluster: backend.cluster }) })
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

  describe(`placement across nodes (${backend.name})`, { timeout: 60_000, skip: backend.skip }, () => {
    let cluster: GatewayNodes
    before(async () => { cluster = await startNodes({ count: 2, redisUrl: await backend.url(), cluster: backend.cluster, env: { MAX_SESSIONS: '1' } }) })
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
      cluster = await startNodes({
        count: 2,
        redisUrl: await backend.url(),
        cluster: backend.cluster,
        env: { MAX_SESSIONS_PER_TENANT: '2', GATEWAY_TOKENS: `${TOKEN_A}=tenant-a,${TOKEN_B}=tenant-b` }
      })
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

  describe(`moving between nodes (${backend.name})`, { timeout: 90_000, skip: backend.skip }, () => {
    let cluster: GatewayNodes
    before(async () => { cluster = await startNodes({ count: 3, redisUrl: await backend.url(), cluster: backend.cluster, env: { SHUTDOWN_GRACE_MS: '20000' } }) })
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
      let client = await takeOver(cluster.nodes[1] as GatewayNode, created.id)
      client.sendUser('slow 80 100')
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
        }
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
      assert.deepEqual(slow, Array.from({ length: 80 }, (_, i) => `slow #${i}`), 'the whole turn, no part lost')
      assert.equal(result.is_error, false)
      assertContiguous(await storedLog(cluster, created.id))
    })
  })
}
