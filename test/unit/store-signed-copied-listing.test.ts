/**
 * A correctly signed session record copied under another session's key (by
 * someone who can write Redis) is refused when that session is read by id
 * (store-signed-records.test.ts); listings and recovery must not take it as
 * that session either: the copy would list its session twice (GET
 * /v1/sessions), and recovery would find it twice. Real Redis
 * (TEST_REDIS_URL or 127.0.0.1:6379), a fresh prefix.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, describe, it } from 'node:test'
import pino from 'pino'
import { RedisStore } from '../../src/store/redis.js'
import { SignedStore } from '../../src/store/signed-records.js'
import { REDIS_URL, deleteKeys, redisCommand } from '../support/redis-server.js'
import { DEFAULT_RETENTION, session } from '../support/store-contract.js'

/** A record the record schema accepts. */
const valid = (id: string): ReturnType<typeof session> => session({ id, tenant: 'tenant-a', status: 'running', options: { model: 'sonnet', permission_mode: 'default' } })

describe('a signed record copied under another session\'s key', () => {
  const prefix = `cgw-test:${randomUUID()}:`
  const inner = new RedisStore({ url: REDIS_URL, prefix, retention: DEFAULT_RETENTION })
  const store = new SignedStore(inner, { secret: 'k'.repeat(43), allowBypassPermissions: false, logger: pino({ level: 'silent' }) })
  after(async () => { await store.close(); await deleteKeys(REDIS_URL, prefix) })

  it('is listed and recovered once, as its own session only', async () => {
    const victim = valid(randomUUID())
    const other = valid(randomUUID())
    await store.putSession(victim)
    await store.putSession(other)
    assert.deepEqual((await store.listSessions('tenant-a', { limit: 10 })).sessions.map((s) => s.id).sort(), [victim.id, other.id].sort(), 'both listed before')
    const copy = await redisCommand(REDIS_URL, ['GET', `${prefix}{${victim.id}}:meta`]) as string
    await redisCommand(REDIS_URL, ['SET', `${prefix}{${other.id}}:meta`, copy])
    assert.equal(await store.getSession(other.id), null, 'refused by id')
    assert.deepEqual((await store.listSessions('tenant-a', { limit: 10 })).sessions.map((s) => s.id), [victim.id], 'the tenant\'s listing')
    assert.deepEqual((await store.listLive()).map((s) => s.id), [victim.id], 'the sessions recovery finds')
  })
})
