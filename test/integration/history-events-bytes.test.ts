/**
 * `GET /v1/sessions/:id/events` sends the stored frames' bytes as they are:
 * the body is `{"events":[`, the frames live clients received (multi-byte
 * UTF-8 included) byte for byte and joined by commas, then
 * `],"has_more":…,"next_after":…}`, with a Content-Length of its bytes. On
 * the memory store and on Redis, where pages are assembled from Buffers.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import { TOKEN_A, type TestClient, type TestGateway, gateway, suiteScope } from '../support/gateway.js'
import { REDIS_URL, deleteKeys } from '../support/redis-server.js'
import { turn } from './resume-helpers.js'


for (const kind of ['memory', 'redis'] as const) {
  describe(`GET /events bytes (${kind} store)`, () => {
    const scope = suiteScope()
    const prefix = `cgw-test:${randomUUID()}:`
    let gw: TestGateway
    let id: string
    let live: TestClient
    let last: number

    before(async () => {
      gw = await gateway(scope, kind === 'redis' ? { env: { REDIS_URL, REDIS_PREFIX: prefix } } : {})
      assert.equal(gw.app.gateway.store.kind, kind)
      id = (await gw.createSession()).id
      live = await gw.connect(id, 'after=0')
      await turn(gw, id, live, 'héllo wörld — 世界 🙂 𝄞 “quoted” \\ "esc"')
      last = await turn(gw, id, live, 'u2028')
    })

    after(async () => {
      if (kind === 'redis') await deleteKeys(REDIS_URL, prefix)
    })

    /** The recorded frames' text exactly as the live client received it, by seq. */
    function received (): string[] {
      return live.raw.filter((_, i) => typeof live.frames[i].seq === 'number')
    }

    async function page (query: string): Promise<Buffer> {
      const res = await fetch(`${gw.url}/v1/sessions/${id}/events?${query}`, { headers: { authorization: `Bearer ${TOKEN_A}` } })
      assert.equal(res.status, 200)
      assert.equal(res.headers.get('content-type'), 'application/json; charset=utf-8')
      const body = Buffer.from(await res.arrayBuffer())
      assert.equal(res.headers.get('content-length'), String(body.length))
      return body
    }

    it('is the received frames, byte for byte, in the documented envelope', async () => {
      const frames = received()
      assert.equal(frames.length, last)
      assert.ok(frames.some((f) => f.includes('héllo wörld — 世界 🙂 𝄞 “quoted”')), 'multi-byte text was recorded unescaped')
      const all = await page('limit=1000')
      assert.ok(all.equals(Buffer.from(`{"events":[${frames.join(',')}],"has_more":false,"next_after":${last}}`)))
      const middle = await page('after=2&limit=3')
      assert.ok(middle.equals(Buffer.from(`{"events":[${frames.slice(2, 5).join(',')}],"has_more":true,"next_after":5}`)))
      const empty = await page(`after=${last}`)
      assert.equal(empty.toString(), '{"events":[],"has_more":false,"next_after":null}')
    })
  })
}
