/**
 * One entry planted in a tenant's session index whose record is not JSON (or
 * not a string key at all), by someone who can write Redis without
 * STORE_SECRET. SECURITY.md: a record the gateway did not sign is refused,
 * logged, counted and treated as absent. Before, reading it threw: the
 * tenant's whole listing (and GET /v1/permissions) answered 503 for as long
 * as it stayed, and the entry itself 503 instead of 404, uncounted.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, describe, it } from 'node:test'
import { TOKEN_B, gateway, suiteScope } from '../support/gateway.js'
import { REDIS_URL, deleteKeys, redisCommand } from '../support/redis-server.js'

describe('a session record in Redis that cannot be read as one', () => {
  const prefix = `cgw-test:${randomUUID()}:`
  const scope = suiteScope()
  after(async () => { await deleteKeys(REDIS_URL, prefix) })

  it('is refused and counted alone: the tenant\'s listing and prompts still answer, the entry is 404', async () => {
    const gw = await gateway(scope, { env: { REDIS_URL, REDIS_PREFIX: prefix } })
    const kept = (await gw.createSession()).id as string

    const notJson = randomUUID()
    const notString = randomUUID()
    await redisCommand(REDIS_URL, ['SET', `${prefix}{${notJson}}:meta`, '{"id": not json'])
    await redisCommand(REDIS_URL, ['HSET', `${prefix}{${notString}}:meta`, 'tenant', 'tenant-a'])
    for (const id of [notJson, notString]) {
      await redisCommand(REDIS_URL, ['ZADD', `${prefix}tenant:tenant-a:sessions`, Date.now() + 60_000, id])
      await redisCommand(REDIS_URL, ['SADD', `${prefix}live`, id])
    }

    for (const id of [notJson, notString]) {
      const res = await gw.request('GET', `/v1/sessions/${id}`)
      assert.equal(res.status, 404, `GET /v1/sessions/${id}: ${JSON.stringify(res.body)}`)
    }
    const listed = await gw.request('GET', '/v1/sessions?limit=100')
    assert.equal(listed.status, 200, `GET /v1/sessions: ${JSON.stringify(listed.body)}`)
    assert.deepEqual(listed.body.sessions.map((s: any) => s.id), [kept])
    assert.equal((await gw.request('GET', '/v1/permissions')).status, 200, 'GET /v1/permissions')
    assert.equal((await gw.request('GET', '/v1/sessions?limit=100', undefined, TOKEN_B)).status, 200, 'another tenant\'s listing')

    const metrics = await (await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN_B}` } })).text()
    const count = Number(/^cgw_store_refused_total\{kind="record",reason="unsigned"\} (\d+)$/m.exec(metrics)?.[1])
    assert.ok(count >= 2, metrics)
  })
})
