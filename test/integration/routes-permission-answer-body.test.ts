/**
 * POST /v1/sessions/:id/permissions/:request_id with a body of the right
 * shape but a mistyped field (`updatedInput` not an object, `message` not a
 * string, a generic success with no `behavior` for a permission prompt) is
 * an invalid body: 400 `bad_request` naming the field, as API.md's table
 * says, not the WebSocket frame code `invalid_frame`; the prompt stays
 * pending and nothing reaches the CLI.
 */
import assert from 'node:assert/strict'
import { before, describe, it } from 'node:test'
import { type TestGateway, gateway, suiteScope } from '../support/gateway.js'
import { LIMITS, answersTo, ask, setup } from '../support/sessions.js'

describe('HTTP permission answers with a mistyped field', () => {
  let gw: TestGateway
  const scope = suiteScope()
  before(async () => { gw = await gateway(scope, { env: LIMITS }) })

  it('answers 400 bad_request naming the field; the prompt stays pending, the CLI gets nothing', async (t) => {
    const { id, holder, permissions } = await setup(gw, t)
    const prompt = await ask(holder)
    const path = `${permissions}/${prompt.request_id}`
    for (const [body, field] of [
      [{ behavior: 'allow', updatedInput: 'rm -rf /' }, 'updatedInput'],
      [{ behavior: 'allow', updatedPermissions: {} }, 'updatedPermissions'],
      [{ behavior: 'deny', message: 5 }, 'message'],
      [{ behavior: 'deny', interrupt: 'yes' }, 'interrupt'],
      [{ subtype: 'success', response: { decision: 'ok' } }, 'behavior']
    ] as const) {
      const res = await gw.request('POST', path, body)
      const what = JSON.stringify(body)
      assert.deepEqual([res.status, res.body.code], [400, 'bad_request'], `${what}: ${JSON.stringify(res.body)}`)
      assert.match(res.body.message, new RegExp(field), `${what}: ${res.body.message as string}`)
    }
    assert.deepEqual((await gw.request('GET', permissions)).body.requests.map((r: any) => r.request_id), [prompt.request_id], 'still pending')
    assert.deepEqual(answersTo(gw, id, prompt.request_id), [], 'nothing reached the CLI')
    const ok = await gw.request('POST', path, { behavior: 'deny', message: 'no' })
    assert.deepEqual([ok.status, ok.body.decision], [200, 'denied'])
  })
})
