/**
 * A prompt that reaches a client's node through the session's log before the
 * owner's word that the client holds the session (real gateway processes on
 * a private Redis, the fake CLI). The log (the feed) and the owner's
 * messages (the node bus) are two connections, so nothing orders them. The
 * test makes the order deterministic: the owner A is frozen while client X
 * on node B attaches and sends a message; B is frozen and its inbox reader
 * connection cut (it reconnects only after B runs again); A continues, makes
 * X holder and runs the message up to a permission prompt; then B continues
 * and reads the feed first. The prompt came after the owner's redelivery
 * point, so the owner does not send it again: B must, or X holds the session
 * with a prompt it was shown only as a notice, stuck.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { Redis } from 'ioredis'
import { type Frame, isHello, isPrompt, isResult, resolved } from '../support/frames.js'
import { eventually } from '../support/gateway.js'
import { type GatewayNode, type GatewayNodes, startNodes } from '../support/gateway-nodes.js'
import { type RedisServer, startRedisServer } from '../support/redis-server.js'

const holdsIt = (f: Frame): boolean => f.type === 'gateway' && f.subtype === 'holder' && f.role === 'controller'
const isNotice = (f: Frame): boolean => f.type === 'gateway' && f.subtype === 'request_pending'

describe('a prompt relayed before the owner says who holds the session', { timeout: 60_000 }, () => {
  let server: RedisServer
  let cluster: GatewayNodes
  let redis: Redis
  before(async () => {
    server = await startRedisServer()
    // A lease long enough for both freezes, and for the owner to keep B's client meanwhile.
    cluster = await startNodes({ count: 2, redisUrl: server.url, env: { SESSION_LEASE_MS: '6000' } })
    redis = new Redis(server.url)
  })
  after(async () => {
    redis.disconnect()
    await cluster.close()
    await server.stop()
  })

  it('the new holder gets the prompt in full, and its answer runs the tool', async () => {
    const [a, b] = cluster.nodes as [GatewayNode, GatewayNode]
    const created = await a.create()
    const inbox = async (node: string): Promise<Frame[]> =>
      (await redis.xrange(`${cluster.prefix}node:{${node}}:inbox`, '-', '+')).map(([, fields]) => JSON.parse(fields[1] as string) as Frame)
    const stored = async (): Promise<Frame[]> =>
      (await redis.xrange(`${cluster.prefix}{${created.id}}:events`, '-', '+')).map(([, fields]) => JSON.parse(fields[1] as string) as Frame)

    a.child.kill('SIGSTOP')
    let x
    let xId = ''
    try {
      x = await b.connect(created.id, 'after=0')
      xId = (await x.waitFor(isHello)).client_id as string
      x.sendUser('ask Bash touch raced.txt')
      await eventually(async () => (await inbox(a.id)).some((m) => m.k === 'frame' && m.c === xId), 10_000, 'X\'s message in A\'s inbox')
      b.child.kill('SIGSTOP')
      try {
        // Every inbox reader (A's and B's; nothing else uses this Redis): A's reads again at once, B's once it runs.
        const readers = (await redis.client('LIST') as string).split('\n').filter((l) => / cmd=xread /.test(` ${l} `))
        assert.equal(readers.length, 2, 'one inbox reader per node')
        for (const line of readers) await redis.client('KILL', 'ID', (/(?:^| )id=(\d+)/.exec(line) as RegExpExecArray)[1] as string)
        a.child.kill('SIGCONT')
        await eventually(async () => (await stored()).some(isPrompt), 10_000, 'the prompt in the log')
        await eventually(async () => (await inbox(b.id)).some((m) => m.k === 'send' && m.c === xId && String(m.f).includes('"controller"')), 10_000, 'the owner\'s holder message in B\'s inbox')
      } finally {
        b.child.kill('SIGCONT')
      }
    } finally {
      a.child.kill('SIGCONT')
    }
    const client = x
    // What B relayed first, the prompt as a notice (X did not hold it yet, as far as B knew), then the holder frame.
    const notice = await client.waitFor(isNotice)
    await client.waitFor(holdsIt)
    assert.ok(client.frames.indexOf(notice) < client.frames.findIndex(holdsIt), 'the race this test is about: the notice came first')
    const prompt = await client.waitFor(isPrompt)
    assert.equal(prompt.request_id, notice.request_id)
    assert.equal(prompt.seq, notice.seq, 'the prompt as first recorded')
    client.send({ type: 'control_response', response: { subtype: 'success', request_id: prompt.request_id, response: { behavior: 'allow', updatedInput: prompt.request.input } } })
    const done = await client.waitFor(resolved(prompt.request_id))
    assert.deepEqual({ decision: done.decision, by: done.by }, { decision: 'allowed', by: xId })
    assert.equal((await client.waitFor(isResult)).is_error, false)
  })
})
