/**
 * A permission prompt the store outage dropped from history (held frames
 * past STORE_QUEUE_MAX) while it was still open.
 *
 * The prompt belongs to the session: the hello of a client resuming from a
 * seq before it lists its id in `pending_requests`. The replay cannot read it
 * back, yet the resuming holder must still get it in full (an observer its
 * `request_pending` notice), or nobody can show or answer it and the turn
 * waits for ever. Asserted with real WebSocket clients and the typed client:
 * every pending id arrives as an actionable control_request, once, and the
 * answer reaches the CLI's stdin and ends the prompt.
 *
 * With two nodes, a holder resuming on the node that does not run the CLI
 * gets it from the owner, which sends a new holder every pending request.
 *
 * The private Redis keeps an append-only file, so it comes back with what it
 * had acknowledged: history before the outage stays, and only the seqs
 * dropped past STORE_QUEUE_MAX are missing (a Redis that came back empty
 * would make them part of a trimmed start, another path).
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it, type TestContext } from 'node:test'
import WebSocket from 'ws'
import { GatewayClient, type PermissionRequest, type WebSocketCtor } from '../../src/client/index.js'
import { isError, isHello, isPrompt, isResult, resolved } from '../support/frames.js'
import { type TestClient, type TestGateway, TOKEN_A, eventually, gateway, suiteScope } from '../support/gateway.js'
import { type GatewayNodes, startNodes } from '../support/gateway-nodes.js'
import { type RedisServer, startRedisServer } from '../support/redis-server.js'
import { Waiters } from '../support/waiters.js'
import { turn } from './resume-helpers.js'

const LIMITS = { RATE_LIMIT_PER_MINUTE: '100000', WS_MAX_FRAMES_PER_SEC: '100000' }
const QUEUE_MAX = 10
/** Frames recorded after the prompt while the store is down: the prompt is dropped well before the last. */
const AFTER_PROMPT = 3 * QUEUE_MAX
const range = (from: number, to: number): number[] => Array.from({ length: to - from + 1 }, (_, i) => from + i)

interface Stranded {
  id: string
  /** The last seq before the outage: where the resuming clients come back from. */
  before: number
  requestId: string
  /** The prompt's seq, dropped from history. */
  seq: number
}

/** Where the session runs and where clients connect: one gateway, or the owner node. */
interface Place {
  connect: (id: string, query?: string) => Promise<TestClient>
  store: (id: string) => Promise<string>
}

/**
 * The holder's connection is gone when the CLI asks; another controller
 * sees the prompt live during the outage and leaves, and the frames recorded
 * after the prompt push it out of the held frames. The store comes back with
 * everything else. `before` is the last seq before the outage.
 */
async function strand (redis: RedisServer, place: Place, id: string, before: number): Promise<Stranded> {
  await redis.stop()
  const other = await place.connect(id)
  await other.waitFor(isHello)
  other.sendUser('ask Bash touch stranded.txt')
  const prompt = await other.waitFor(isPrompt, 15_000)
  // Each answer is recorded: frames after the prompt, while it stays open.
  for (let i = 0; i < AFTER_PROMPT; i++) other.send({ type: 'control_request', request_id: `fill-${i}`, request: { subtype: 'mcp_status' } })
  await other.until(() => other.frames.filter((f) => f.type === 'control_response' && String(f.response?.request_id).startsWith('fill-')).length === AFTER_PROMPT, 15_000, 'every filler answered')
  await other.waitFor(isError('store_overflow'))
  other.terminate()

  await redis.start()
  await eventually(async () => await place.store(id) === 'ok', 20_000, 'the held frames written')
  return { id, before, requestId: prompt.request_id, seq: prompt.seq }
}

/** Persistent (append-only file), in a folder of its own. */
async function persistentRedis (): Promise<{ redis: RedisServer, dir: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'prompt-resend-'))
  return { redis: await startRedisServer({ args: ['--appendonly', 'yes', '--appendfsync', 'always', '--dir', dir] }), dir }
}

describe('a pending prompt dropped from history during a store outage', () => {
  const scope = suiteScope()
  let redis: RedisServer
  let dir: string
  let gw: TestGateway

  before(async () => {
    ({ redis, dir } = await persistentRedis())
    gw = await gateway(scope, { env: { ...LIMITS, REDIS_URL: redis.url, REDIS_PREFIX: 'prompt-resend:', STORE_QUEUE_MAX: String(QUEUE_MAX) } })
  })
  after(async () => {
    await redis?.kill()
    await rm(dir, { recursive: true, force: true })
  })

  async function strandPrompt (t: TestContext): Promise<Stranded> {
    const { id } = await gw.createSession()
    t.after(() => gw.request('DELETE', `/v1/sessions/${id}`))
    const first = await gw.connect(id, 'after=0')
    const before = await turn(gw, id, first, 'echo before the outage')
    first.terminate()
    const s = await strand(redis, { connect: gw.connect, store: async (sid) => (await gw.request('GET', `/v1/sessions/${sid}`)).body.store }, id, before)
    const open = await gw.request('GET', `/v1/sessions/${id}/permissions`)
    assert.deepEqual(open.body.requests.map((r: any) => r.request_id), [s.requestId], 'the prompt is still open')
    return s
  }

  /** The hello of a client resuming from `s.before`, checked to be about the dropped prompt. */
  async function resumedHello (client: TestClient, s: Stranded): Promise<any> {
    const hello = await client.waitFor(isHello)
    assert.equal(hello.resume, 'gap', JSON.stringify(hello))
    const missing = (hello.missing as Array<[number, number]>).flatMap(([a, b]) => range(a, b))
    assert.ok(missing.includes(s.seq), `the prompt's seq ${s.seq} is one history lost (missing ${JSON.stringify(hello.missing)})`)
    assert.deepEqual(hello.pending_requests, [s.requestId])
    return hello
  }

  /** Waits until `client` got every seq of the replay (the hello's last_seq, or the gap frame that ends it). */
  async function replayed (client: TestClient, lastSeq: number): Promise<void> {
    await client.until(() => client.seqFrames.some((f) => f.seq >= lastSeq) ||
      client.frames.some((f) => f.type === 'gateway' && f.subtype === 'gap' && f.missing_to >= lastSeq), 15_000, `the replay up to ${lastSeq}`)
  }

  it('a holder resuming from before the prompt gets it in full, once, and its answer reaches the CLI', async (t) => {
    const s = await strandPrompt(t)
    const holder = await gw.connect(s.id, `after=${s.before}`)
    t.after(() => holder.terminate())
    const hello = await resumedHello(holder, s)
    assert.equal(hello.role, 'controller')
    await replayed(holder, hello.last_seq)

    for (const requestId of hello.pending_requests as string[]) {
      await holder.until(() => holder.frames.some((f) => isPrompt(f) && f.request_id === requestId), 5_000,
        `the control_request of ${requestId}, listed in hello.pending_requests`)
    }
    const prompts = holder.frames.filter(isPrompt)
    assert.equal(prompts.length, 1, 'sent once')
    assert.equal(prompts[0].seq, s.seq, 'as first sent, at its own seq')
    assert.equal(prompts[0].request.tool_name, 'Bash')
    // In seq order with the replay: right where history jumps over it.
    const seqs = holder.seqFrames.map((f) => f.seq)
    assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b), 'seqs ascending')

    const from = holder.frames.length
    holder.send({ type: 'control_response', response: { subtype: 'success', request_id: s.requestId, response: { behavior: 'allow' } } })
    const done = await holder.waitFor(resolved(s.requestId), 10_000, from)
    assert.equal(done.decision, 'allowed')
    assert.equal(done.by, hello.client_id)
    await eventually(() => gw.stdinLines(s.id).some((l) => l.type === 'control_response' && l.response?.request_id === s.requestId), 10_000, 'the answer on the CLI\'s stdin')
    const result = await holder.waitFor(isResult, 15_000, from)
    assert.match(String(result.result), /Tool finished/)
    assert.deepEqual((await gw.request('GET', `/v1/sessions/${s.id}/permissions`)).body.requests, [])
  })

  it('an observer resuming from before the prompt gets its request_pending notice, in place', async (t) => {
    const s = await strandPrompt(t)
    const observer = await gw.connect(s.id, `after=${s.before}&role=observer`)
    t.after(() => observer.terminate())
    const hello = await resumedHello(observer, s)
    await replayed(observer, hello.last_seq)
    const notice = await observer.waitFor((f) => f.type === 'gateway' && f.subtype === 'request_pending' && f.request_id === s.requestId, 5_000)
    assert.equal(notice.seq, s.seq)
    assert.equal(notice.tool_name, 'Bash')
    assert.equal(observer.frames.filter(isPrompt).length, 0, 'never the prompt itself')

    // Taking the session over, it gets the prompt in full (a new holder is sent what it saw as notices).
    const holder = await gw.connect(s.id, `after=${hello.last_seq}`)
    t.after(() => holder.terminate())
    await holder.waitFor((f) => isPrompt(f) && f.request_id === s.requestId)
  })

  it('the typed client resuming from before the prompt is asked it, and its answer ends it', async (t) => {
    const s = await strandPrompt(t)
    const client = new GatewayClient({ url: gw.url, token: TOKEN_A, WebSocket: WebSocket as unknown as WebSocketCtor })
    const asked: PermissionRequest[] = []
    const waiters = new Waiters()
    const conn = client.connect(s.id, {
      after: s.before,
      onPermission: (request) => {
        asked.push(request)
        waiters.wake()
        return { behavior: 'allow', updatedInput: request.input }
      }
    })
    t.after(() => conn.close())
    const resolvedIds: string[] = []
    conn.on('permissionResolved', (r) => { resolvedIds.push(r.requestId); waiters.wake() })
    conn.on('frame', () => waiters.wake())
    const last = () => `state ${conn.state}, lastSeq ${conn.lastSeq}, pending ${JSON.stringify([...conn.pending.keys()])}`
    await waiters.until(() => asked.some((r) => r.requestId === s.requestId), 15_000, `onPermission for ${s.requestId}`, last)
    assert.equal(asked.length, 1)
    assert.equal(asked[0]?.canAnswer, true)
    await waiters.until(() => resolvedIds.includes(s.requestId), 15_000, 'the prompt resolved', last)
    await eventually(() => gw.stdinLines(s.id).some((l) => l.type === 'control_response' && l.response?.request_id === s.requestId), 10_000, 'the answer on the CLI\'s stdin')
  })
})

describe('the same with the resuming holder on a node that does not run the CLI', () => {
  let redis: RedisServer
  let dir: string
  let cluster: GatewayNodes

  before(async () => {
    ({ redis, dir } = await persistentRedis())
    // A lease that outlives the outage: the session stays on its node.
    cluster = await startNodes({ count: 2, redisUrl: redis.url, env: { ...LIMITS, STORE_QUEUE_MAX: String(QUEUE_MAX), SESSION_LEASE_MS: '30000' } })
  })
  after(async () => {
    await cluster?.close()
    await redis?.kill()
    await rm(dir, { recursive: true, force: true })
  })

  it('the owner sends it the prompt, and its answer reaches the CLI', async () => {
    const [owner, other] = cluster.nodes as [GatewayNodes['nodes'][0], GatewayNodes['nodes'][0]]
    const { id } = await owner.create()
    const first = await owner.connect(id, 'after=0')
    await first.waitFor(isHello)
    first.sendUser('echo before the outage')
    await first.waitFor((f) => f.type === 'system' && f.subtype === 'session_state_changed' && f.state === 'idle')
    const before = (await owner.session(id)).body.last_seq as number
    first.terminate()
    const s = await strand(redis, { connect: owner.connect, store: async (sid) => (await owner.session(sid)).body.store }, id, before)

    const holder = await other.connect(id, `after=${s.before}`)
    const hello = await holder.waitFor(isHello)
    assert.equal(hello.resume, 'gap', JSON.stringify(hello))
    const prompt = await holder.waitFor((f) => isPrompt(f) && f.request_id === s.requestId)
    assert.equal(prompt.seq, s.seq)
    const from = holder.frames.length
    holder.send({ type: 'control_response', response: { subtype: 'success', request_id: s.requestId, response: { behavior: 'allow' } } })
    const done = await holder.waitFor(resolved(s.requestId), 10_000, from)
    assert.equal(done.decision, 'allowed')
    assert.equal(done.by, hello.client_id)
    const result = await holder.waitFor(isResult, 15_000, from)
    assert.match(String(result.result), /Tool finished/)
  })
})
