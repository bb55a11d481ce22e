/**
 * Concurrent creates with the Redis store (finding 7 of issue 11): creates
 * racing past the per-tenant limit used to store a "starting" record each and
 * then be refused, leaving records that said "starting" for ever. Now a create
 * holds its slot from admission on, so the limit refuses it before anything
 * is stored, and a create that fails after its record was written leaves a
 * truthful final status (exited, exit.reason spawn_failed). Checked in Redis.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { describe, it } from 'node:test'
import type { AppParts } from '../../src/app.js'
import { type TestGateway, eventually, gateway, suiteScope } from '../support/gateway.js'
import { REDIS_URL, deleteKeys, redisCommand } from '../support/redis-server.js'


/** Every session record under `prefix`, read straight from Redis. */
async function records (prefix: string): Promise<any[]> {
  const keys = await redisCommand(REDIS_URL, ['KEYS', `${prefix}{*}:meta`]) as string[]
  return await Promise.all(keys.map(async (k) => JSON.parse(await redisCommand(REDIS_URL, ['GET', k]) as string)))
}

function tally (list: any[]): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const r of list) counts[r.status] = (counts[r.status] ?? 0) + 1
  return counts
}

describe('concurrent creates (Redis store)', () => {
  const scope = suiteScope()
  const start = async (env: Record<string, string>, parts?: AppParts): Promise<{ gw: TestGateway, prefix: string }> => {
    const prefix = `cgw-test:${randomUUID()}:`
    scope.after(() => deleteKeys(REDIS_URL, prefix))
    const gw = await gateway(scope, { env: { REDIS_URL, REDIS_PREFIX: prefix, ...env }, ...(parts === undefined ? {} : { parts }) })
    return { gw, prefix }
  }

  it('20 at once: every record reaches running, then stopped at shutdown', async () => {
    const { gw, prefix } = await start({})
    const answers = await Promise.all(Array.from({ length: 20 }, () => gw.request('POST', '/v1/sessions', {})))
    assert.deepEqual(answers.map((a) => a.status), Array(20).fill(201))
    await eventually(async () => tally(await records(prefix)).running === 20, 15_000, 'all 20 records running')
    await gw.close()
    assert.deepEqual(tally(await records(prefix)), { stopped: 20 })
  })

  it('past MAX_SESSIONS_PER_TENANT: refused creates store nothing, none is left "starting"', async () => {
    const { gw, prefix } = await start({ MAX_SESSIONS_PER_TENANT: '4' })
    const answers = await Promise.all(Array.from({ length: 12 }, () => gw.request('POST', '/v1/sessions', {})))
    const created = answers.filter((a) => a.status === 201).map((a) => a.body.id as string)
    assert.equal(created.length, 4, JSON.stringify(answers.map((a) => a.status)))
    assert.deepEqual(answers.filter((a) => a.status !== 201).map((a) => a.body.code), Array(8).fill('tenant_session_limit'))
    await eventually(async () => tally(await records(prefix)).running === 4, 15_000, '4 records running')
    const stored = await records(prefix)
    assert.deepEqual(stored.map((r) => r.id).sort(), [...created].sort(), 'only the admitted creates have records')
    assert.deepEqual(tally(stored), { running: 4 })
    // Both tenants' limits are their own: B still gets its 4.
    const b = await Promise.all(Array.from({ length: 6 }, () => gw.request('POST', '/v1/sessions', {}, 'token-tenant-b-0123456789')))
    assert.equal(b.filter((a) => a.status === 201).length, 4)
    await gw.close()
    assert.deepEqual(tally(await records(prefix)), { stopped: 8 })
  })

  it('a create whose CLI cannot be spawned answers cli_start_failed and its record says exited / spawn_failed', async () => {
    const { gw, prefix } = await start({}, {
      // What spawn() does for an argument list the kernel refuses (E2BIG): it throws.
      launch: () => { throw Object.assign(new Error('spawn E2BIG'), { code: 'E2BIG' }) }
    })
    const answers = await Promise.all(Array.from({ length: 3 }, () => gw.request('POST', '/v1/sessions', {})))
    assert.deepEqual(answers.map((a) => [a.status, a.body.code]), Array(3).fill([502, 'cli_start_failed']))
    const stored = await records(prefix)
    assert.deepEqual(tally(stored), { exited: 3 })
    for (const r of stored) {
      assert.equal(r.exit.reason, 'spawn_failed')
      const seen = await gw.request('GET', `/v1/sessions/${r.id as string}`)
      assert.equal(seen.status, 200)
      assert.equal(seen.body.status, 'exited')
      assert.equal(seen.body.exit.reason, 'spawn_failed')
    }
    // Failed creates hold no slot.
    assert.equal(gw.app.gateway.manager.runningCount, 0)
  })
})
