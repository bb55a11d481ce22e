/**
 * docker/redis/users.acl, the ACL docker/compose.yaml runs Redis with, tried
 * for real: a private redis-server loads the same file (only the password
 * hash filled in, as docker/redis/start.sh does), the Redis store runs every
 * public operation as user `cgw` under the default prefix `cgw:`, and what an
 * agent that reached Redis would try is refused: no access without AUTH, keys
 * outside the prefix, FLUSHALL, CONFIG, KEYS, scripts touching other keys.
 */
import assert from 'node:assert/strict'
import { createHash, randomBytes, randomUUID } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { after, before, describe, it } from 'node:test'
import { RedisStore } from '../../src/store/redis.js'
import { type RedisServer, redisCommand, startRedisServer } from '../support/redis-server.js'
import { events, session } from '../support/store-contract.js'
import { Waiters, eventually } from '../support/waiters.js'

const ACL_TEMPLATE = fileURLToPath(new URL('../../docker/redis/users.acl', import.meta.url))

describe('Redis ACL of docker/compose.yaml', () => {
  const password = randomBytes(24).toString('hex')
  const dir = mkdtempSync(join(tmpdir(), 'cgw-acl-'))
  let server: RedisServer
  let asGateway: string
  let store: RedisStore

  before(async () => {
    const hash = createHash('sha256').update(password).digest('hex')
    const acl = join(dir, 'users.acl')
    writeFileSync(acl, readFileSync(ACL_TEMPLATE, 'utf8').replace('__CGW_PASSWORD_SHA256__', hash))
    server = await startRedisServer({ args: ['--aclfile', acl], auth: { user: 'cgw', password } })
    asGateway = `redis://cgw:${password}@127.0.0.1:${server.port}`
    store = new RedisStore({ url: asGateway, prefix: 'cgw:', retention: { maxEventsPerSession: 10, ttlSecondsAfterEnd: 1 } })
  })
  after(async () => {
    await store?.close()
    await server?.kill()
    rmSync(dir, { recursive: true, force: true })
  })

  it('lets the gateway user run every store operation under cgw:', async () => {
    await store.ping()
    assert.equal(store.status, 'ready', 'the client passed its ready check (INFO)')
    const id = randomUUID()
    // One chunk (EVALSHA, then EVAL after NOSCRIPT), then several chunks (one call after another), trimmed to ~10.
    await store.append(id, events(1, 3))
    await store.append(id, events(4, 5))
    await store.append(id, events(6, 1500).map((e) => ({ ...e, frame: e.frame.padEnd(1000, ' ') })))
    const held = await store.read(id, 0, 10_000)
    assert.equal(held[held.length - 1]?.seq, 1500)
    assert.ok(held.length <= 110, `trimmed to ${held.length}`)
    assert.equal(await store.firstSeq(id), held[0]?.seq)
    // A read with a byte budget runs a script (EVAL on a new connection, EVALSHA after).
    for (let i = 0; i < 2; i++) assert.deepEqual(await store.read(id, 0, 10_000, 5500), held.slice(0, 5))

    const older = session({ id: randomUUID(), tenant: 't', status: 'running', created_at: '2025-01-01T00:00:00.000Z' })
    const newer = session({ id, tenant: 't', status: 'running', created_at: '2025-01-02T00:00:00.000Z' })
    await store.putSession(older)
    await store.putSession(newer)
    assert.deepEqual(await store.getSession(id), newer)
    const page = await store.listSessions('t', { limit: 1 })
    assert.deepEqual(page.sessions.map((r) => r.id), [id])
    const rest = await store.listSessions('t', { limit: 1, cursor: page.next_cursor as string })
    assert.deepEqual(rest.sessions.map((r) => r.id), [older.id])
    assert.deepEqual((await store.listLive()).map((r) => r.id).sort(), [older.id, id].sort())

    // Lazy cleanup of index and live-set members whose record is gone (ZREM, SREM).
    await redisCommand(asGateway, ['ZADD', 'cgw:tenant:t:sessions', Date.parse('2025-06-01T00:00:00.000Z'), 'ghost'])
    await redisCommand(asGateway, ['SADD', 'cgw:live', 'ghost'])
    assert.deepEqual((await store.listSessions('t', { limit: 5 })).sessions.map((r) => r.id), [id, older.id])
    assert.deepEqual((await store.listLive()).map((r) => r.id).sort(), [older.id, id].sort())
    assert.deepEqual(await redisCommand(asGateway, ['ZRANGE', 'cgw:tenant:t:sessions', 0, -1]).catch(() => 'refused'), 'refused', 'ZRANGE is not among the allowed commands')
    assert.deepEqual((await redisCommand(asGateway, ['SMEMBERS', 'cgw:live']) as string[]).sort(), [older.id, id].sort())

    // Retention: a final record and its events expire (SET EX, EXPIRE; PTTL/PEXPIRE in the script).
    await store.putSession({ ...newer, status: 'stopped' })
    await store.append(id, events(1501, 1502))
    assert.deepEqual(await store.listLive().then((l) => l.map((r) => r.id)), [older.id])
    await store.putSession({ ...older, status: 'running' }) // PERSIST path
    await eventually(async () => await store.getSession(id) === null && (await store.read(id, 0, 10)).length === 0, 10_000, 'the stopped session to expire')
    assert.deepEqual(await store.getSession(older.id), { ...older, status: 'running' })

    // Leases and fenced writes (INCR, HSET, HGET, HDEL, PEXPIRE in scripts; HGETALL, PTTL in MULTI).
    const leased = randomUUID()
    const lease = await store.leases.acquire(leased, 'node-a', 10_000)
    assert.ok(lease !== null)
    assert.equal((await store.leases.holder(leased))?.node, 'node-a')
    await store.append(leased, events(1, 2), lease)
    await store.putSession(session({ id: leased, status: 'running' }), lease)
    assert.equal(await store.leases.renew(lease, 10_000), true)
    const taken = await store.leases.acquire(leased, 'node-b', 10_000, { takeFrom: 'node-a' })
    assert.ok(taken !== null)
    await assert.rejects(store.append(leased, events(3, 3), lease), (err: Error) => err.name === 'FencedError')
    await store.leases.release(taken)
    assert.equal(await store.leases.holder(leased), null)

    // Following a session live (SUBSCRIBE on cgw: channels, SET PX of the flag; PUBLISH and EXISTS in the append script).
    const arrivals = new Waiters()
    const seen: number[] = []
    const unfollow = store.feed.follow(leased, 0, (batch) => { for (const e of batch) seen.push(e.seq); arrivals.wake() })
    const saw = async (n: number, what: string): Promise<boolean> => await arrivals.until(() => seen.length === n, 10_000, what, () => `seen ${seen.join(', ')}`)
    await saw(2, 'the stored events through the feed')
    await store.append(leased, events(3, 4))
    await saw(4, 'the appended events through the feed')
    assert.deepEqual(seen, [1, 2, 3, 4])
    unfollow()

    // Node inboxes (XADD, PEXPIRE in MULTI; XREAD), node loads (HSET, HGETALL, HDEL), tickets (SET NX PX), conversations.
    const inbox: string[] = []
    await store.bus.start('node-acl', (m) => { inbox.push(m); arrivals.wake() })
    await store.bus.send('node-acl', 'hello')
    await arrivals.until(() => inbox.length === 1, 10_000, 'the message through the inbox', () => `inbox ${inbox.join(', ')}`)
    await store.reportNode({ node: 'node-acl', running: 1, max: 2, at: Date.now() }, 10_000)
    assert.deepEqual((await store.listNodes()).map((n) => n.node), ['node-acl'])
    await store.forgetNode('node-acl')
    assert.deepEqual(await store.listNodes(), [])
    assert.equal(await store.claimOnce('ticket:x', 10_000), true)
    assert.equal(await store.claimOnce('ticket:x', 10_000), false)
    const again = await store.leases.acquire(leased, 'node-a', 10_000)
    assert.ok(again !== null)
    await store.saveConversation(leased, Buffer.from('p\n{}'), again)
    assert.equal(await store.appendConversation(leased, 4, Buffer.from('\n{}'), again, Buffer.from('q')), true)
    assert.deepEqual(await store.loadConversation(leased), Buffer.from('q\n{}\n{}'), 'appended, and the head written over the start (SETRANGE)')

    // The webhook outbox (HSET, SADD in the keep script; HDEL; SMEMBERS; HSCAN, HSET, HDEL, EXISTS, SREM, SADD in the takeover script).
    await store.outbox.keep('node-acl', { id: 'd1', text: 'one' })
    await store.outbox.keep('node-acl', { id: 'd2', text: 'two' })
    await store.outbox.remove('node-acl', ['d2'])
    assert.deepEqual(await store.outbox.nodes(), ['node-acl'])
    assert.deepEqual(await store.outbox.takeOver('node-acl', 'node-acl'), [{ id: 'd1', text: 'one' }])
    assert.deepEqual(await store.outbox.takeOver('node-acl', 'node-b'), [{ id: 'd1', text: 'one' }])
    assert.deepEqual(await store.outbox.nodes(), ['node-b'])
    assert.deepEqual(await redisCommand(asGateway, ['HGETALL', 'cgw:{webhooks}:out:node-acl']), [], 'the hash taken over is gone (HDEL: no DEL for this user)')
    await store.outbox.remove('node-b', ['d1'])
    assert.deepEqual(await store.outbox.takeOver('node-b', 'node-c'), [])
    assert.deepEqual(await store.outbox.nodes(), [])
  })

  it('refuses connections without AUTH, and the default user', async () => {
    const anonymous = `redis://127.0.0.1:${server.port}`
    await assert.rejects(redisCommand(anonymous, ['GET', 'cgw:x']), /NOAUTH/)
    await assert.rejects(redisCommand(anonymous, ['FLUSHALL']), /NOAUTH/)
    await assert.rejects(redisCommand(`redis://default:${password}@127.0.0.1:${server.port}`, ['PING']), /WRONGPASS|disabled/)
    await assert.rejects(redisCommand(`redis://cgw:wrong-password@127.0.0.1:${server.port}`, ['PING']), /WRONGPASS/)
  })

  it('refuses the gateway user any key outside cgw: and every other command', async () => {
    // Inside a script the refusal is an ERR naming the ACL ("can't access", "can't run").
    const refused = async (args: Array<string | number>): Promise<void> => {
      await assert.rejects(redisCommand(asGateway, args), /NOPERM|can't access|can't run|no permissions/, args.join(' '))
    }
    await refused(['SET', 'other:key', '1'])
    await refused(['GET', 'cgwx'])
    await refused(['XADD', 'elsewhere', '*', 'f', 'x'])
    await refused(['FLUSHALL'])
    await refused(['FLUSHDB'])
    await refused(['CONFIG', 'GET', '*'])
    await refused(['CONFIG', 'SET', 'dir', '/tmp'])
    await refused(['KEYS', '*'])
    await refused(['SCAN', '0'])
    await refused(['DEL', 'cgw:live'])
    await refused(['ACL', 'LIST'])
    await refused(['SUBSCRIBE', 'other:chan'])
    await refused(['PUBLISH', 'other:chan', 'x'])
    await refused(['MODULE', 'LIST'])
    await refused(['SHUTDOWN', 'NOSAVE'])
    // A script may only do what the user may: no key outside the prefix, declared or not.
    await refused(['EVAL', "return redis.call('SET', 'evil', '1')", 0])
    await refused(['EVAL', "return redis.call('GET', KEYS[1])", 1, 'evil'])
    await refused(['EVAL', "return redis.call('FLUSHALL')", 0])
    // Still allowed: its own keys.
    assert.equal(await redisCommand(asGateway, ['SET', 'cgw:probe', '1']), 'OK')
  })
})
