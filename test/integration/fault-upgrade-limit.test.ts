/**
 * WebSocket upgrades have their own limits, apart from the REST budget: a
 * reconnect storm is refused upgrades (429 before the upgrade, with
 * retry-after) while the tenant's REST API keeps answering, and REST calls
 * never spend the upgrade budget. The per-address limit counts every tenant
 * coming from one address.
 */
import assert from 'node:assert/strict'
import { type TestContext, describe, it } from 'node:test'
import { type TestGateway, TOKEN_A, TOKEN_B, gateway } from '../support/gateway.js'
import { upgrade } from '../support/http.js'

const ROOMY = { MAX_CLIENTS_PER_SESSION: '1000', MAX_CONNECTIONS_PER_TENANT: '1000' }

/** A gateway for test `t` with room for many clients and connections, and `env` on top. */
const roomyGateway = (t: TestContext, env: Record<string, string>): Promise<TestGateway> => gateway(t, { env: { ...ROOMY, ...env } })

const upgradeAs = (gw: TestGateway, id: string, token: string): ReturnType<typeof upgrade> =>
  upgrade(gw, `/v1/sessions/${id}/ws?role=observer`, { authorization: `Bearer ${token}` })

describe('WebSocket upgrade limits', () => {
  it('upgrades never spend RATE_LIMIT_PER_MINUTE', async (t) => {
    const gw = await roomyGateway(t, { RATE_LIMIT_PER_MINUTE: '5' })
    const { id } = await gw.createSession()
    for (let i = 0; i < 20; i++) {
      const res = await upgradeAs(gw, id, TOKEN_A)
      assert.equal(res.status, 101, `upgrade ${i + 1}: ${JSON.stringify(res.body)}`)
    }
    const list = await gw.request('GET', '/v1/sessions')
    assert.equal(list.status, 200, 'REST still answers after 20 upgrades')
    assert.ok(list.body.sessions.some((s: any) => s.id === id))
  })

  it('past WS_UPGRADES_PER_MINUTE an upgrade gets 429 while REST still answers, and REST never spends it', async (t) => {
    const gw = await roomyGateway(t, { WS_UPGRADES_PER_MINUTE: '3' })
    const { id } = await gw.createSession()
    const other = await gw.createSession({}, TOKEN_B)
    // REST calls first: they must not count against the upgrade limit.
    for (let i = 0; i < 5; i++) assert.equal((await gw.request('GET', `/v1/sessions/${id}`)).status, 200)
    for (let i = 0; i < 3; i++) assert.equal((await upgradeAs(gw, id, TOKEN_A)).status, 101, `upgrade ${i + 1}`)

    const refused = await upgradeAs(gw, id, TOKEN_A)
    assert.equal(refused.status, 429)
    assert.equal(refused.body.statusCode, 429)
    assert.equal(refused.body.code, 'rate_limited')
    assert.match(refused.body.message, /WS_UPGRADES_PER_MINUTE\b/)
    const retryAfter = Number(refused.headers['retry-after'])
    assert.ok(retryAfter > 0 && retryAfter <= 60, `retry-after ${String(refused.headers['retry-after'])}`)

    assert.equal((await gw.request('GET', '/v1/sessions')).status, 200, 'REST answers while upgrades are refused')
    assert.equal((await gw.request('GET', `/v1/sessions/${id}/events`)).status, 200)
    // Per tenant: another tenant's upgrades are not refused.
    assert.equal((await upgradeAs(gw, other.id, TOKEN_B)).status, 101)
  })

  it('WS_UPGRADES_PER_MINUTE_PER_ADDRESS counts every tenant from one address', async (t) => {
    const gw = await roomyGateway(t, { WS_UPGRADES_PER_MINUTE_PER_ADDRESS: '4' })
    const a = await gw.createSession()
    const b = await gw.createSession({}, TOKEN_B)
    for (let i = 0; i < 2; i++) {
      assert.equal((await upgradeAs(gw, a.id, TOKEN_A)).status, 101)
      assert.equal((await upgradeAs(gw, b.id, TOKEN_B)).status, 101)
    }
    for (const [id, token] of [[a.id, TOKEN_A], [b.id, TOKEN_B]] as const) {
      const refused = await upgradeAs(gw, id, token)
      assert.equal(refused.status, 429)
      assert.equal(refused.body.code, 'rate_limited')
      assert.match(refused.body.message, /WS_UPGRADES_PER_MINUTE_PER_ADDRESS/)
      assert.ok(Number(refused.headers['retry-after']) > 0)
    }
    assert.equal((await gw.request('GET', '/v1/sessions', undefined, TOKEN_B)).status, 200)
  })
})
