/**
 * The gateway on a Redis Cluster (REDIS_CLUSTER=true, REDIS_URL = one seed
 * node of a private three-master cluster): a turn with the fake CLI, a client
 * that drops mid-burst and resumes with `?after=` gets every frame once and
 * in order, the history endpoint and the sessions list read back what was
 * written, and every session's keys sit in one slot while different sessions
 * land on different masters.
 *
 * Skipped, saying what to install, when redis-server or redis-cli is missing.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import { type TestGateway, gateway, suiteScope } from '../support/gateway.js'
import { type RedisCluster, redisClusterMissing, startRedisCluster } from '../support/redis-cluster.js'
import { redisCommand } from '../support/redis-server.js'
import { holderDropsMidBurst, turn } from './resume-helpers.js'

const missing = redisClusterMissing()

describe('gateway on a Redis Cluster', { skip: missing ?? false }, () => {
  let cluster: RedisCluster | undefined
  let url = ''
  let ports: number[] = []
  let gw: TestGateway
  const prefix = `cgw-test:${randomUUID()}:`
  // Closes the gateway before the cluster goes (the suite's scope runs first: registered first).
  const scope = suiteScope()

  before(async () => {
    cluster = await startRedisCluster()
    url = cluster.url
    ports = cluster.ports
    gw = await gateway(scope, { env: { REDIS_URL: url, REDIS_CLUSTER: 'true', REDIS_PREFIX: prefix } })
    assert.equal(gw.app.gateway.store.kind, 'redis')
  })
  after(async () => {
    await cluster?.stop()
  })

  /** The cluster's master (by port) holding `key`, found by asking each master for the keys of its slot. */
  async function masterOf (key: string): Promise<number> {
    const slot = await redisCommand(url, ['CLUSTER', 'KEYSLOT', key]) as number
    const holders: number[] = []
    for (const port of ports) {
      const keys = await redisCommand(`redis://127.0.0.1:${port}`, ['CLUSTER', 'GETKEYSINSLOT', slot, 1000]) as string[]
      if (keys.includes(key)) holders.push(port)
    }
    assert.equal(holders.length, 1, `${key} (slot ${slot}) is held by exactly one master, not ${JSON.stringify(holders)}`)
    return holders[0] as number
  }

  it('a holder that drops mid-burst resumes with ?after=: every frame once, in order, as the history endpoint has them', async () => {
    await holderDropsMidBurst(gw)
  })

  it('lists sessions and keeps each session\'s keys in one slot, sessions spread over the masters', async () => {
    const { id } = await gw.createSession()
    const client = await gw.connect(id, 'after=0&role=controller')
    const last = await turn(gw, id, client, 'echo on a cluster')
    assert.ok(last > 0)

    // Enough sessions that all of them on one of three masters is vanishingly unlikely (3 · 3⁻¹²).
    const ids = [id]
    for (let i = 0; i < 11; i++) ids.push((await gw.createSession()).id as string)
    const listed = await gw.request('GET', '/v1/sessions?limit=100')
    assert.equal(listed.status, 200)
    const listedIds: string[] = listed.body.sessions.map((s: any) => s.id)
    assert.deepEqual(ids.filter((sid) => !listedIds.includes(sid)), [], 'every session created here is listed')

    const masters = new Set<number>()
    for (const sid of ids) {
      const meta = `${prefix}{${sid}}:meta`
      const events = `${prefix}{${sid}}:events`
      assert.equal(await redisCommand(url, ['CLUSTER', 'KEYSLOT', meta]), await redisCommand(url, ['CLUSTER', 'KEYSLOT', events]), sid)
      const master = await masterOf(meta)
      // The session that ran a turn has its stream beside its record.
      if (sid === id) assert.equal(await masterOf(events), master)
      masters.add(master)
    }
    assert.ok(masters.size >= 2, `sessions landed on ${masters.size} master(s)`)
  })

  it('takes a comma-separated list of seed nodes as a Cluster, and starts while the first seed is down', async () => {
    const seeds = `redis://127.0.0.1:1,${url}`
    const listed = await gateway(scope, { env: { REDIS_URL: seeds, REDIS_PREFIX: prefix } })
    assert.equal(listed.app.gateway.store.kind, 'redis')
    const created = await listed.createSession()
    const sessions = (await listed.request('GET', '/v1/sessions?limit=100')).body.sessions.map((s: any) => s.id)
    assert.ok(sessions.includes(created.id))
    assert.notEqual(await redisCommand(url, ['GET', `${prefix}{${created.id}}:meta`]).catch(() => 'moved'), null, 'the record is in the cluster')
    await listed.close()
  })
})
