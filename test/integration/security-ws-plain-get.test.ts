/**
 * A plain GET or HEAD (no Upgrade) of the WebSocket route: a typed 400, and
 * no tenant connection slot taken. It used to take one per request, given
 * back only when its TCP connection closed, so one keep-alive connection (a
 * proxy's pool, a probe) locked the tenant out of every WebSocket and stream.
 */
import assert from 'node:assert/strict'
import { Agent, request as httpRequest } from 'node:http'
import { describe, it } from 'node:test'
import { TOKEN_A, gateway } from '../support/gateway.js'
import { upgradeStatus } from '../support/http.js'

function plain (method: string, url: string, agent: Agent): Promise<{ status: number, text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method, agent, headers: { authorization: `Bearer ${TOKEN_A}` } }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => { text += c })
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }))
    })
    req.on('error', reject)
    req.end()
  })
}

describe('the WebSocket route without an upgrade', () => {
  it('answers 400 bad_request and takes no connection slot, while its keep-alive connection stays open', async (t) => {
    const gw = await gateway(t, { env: { MAX_CONNECTIONS_PER_TENANT: '2' } })
    const s = await gw.createSession()
    // One TCP connection for every request: it stays open through the upgrade below.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    t.after(() => agent.destroy())
    for (let i = 0; i < 3; i++) {
      const res = await plain('GET', `${gw.url}/v1/sessions/${s.id}/ws`, agent)
      assert.equal(res.status, 400, res.text)
      const body = JSON.parse(res.text)
      assert.deepEqual(Object.keys(body).sort(), ['code', 'message', 'statusCode'])
      assert.equal(body.code, 'bad_request')
    }
    assert.equal((await plain('HEAD', `${gw.url}/v1/sessions/${s.id}/ws`, agent)).status, 400)

    const first = await upgradeStatus(`${gw.wsUrl}/v1/sessions/${s.id}/ws?role=observer`, TOKEN_A)
    assert.equal(first.status, 101, JSON.stringify(first.body))
  })
})
