// End to end with the real CLI: history holds the conversation (every user
// message the gateway writes to the CLI is recorded, with the client that
// sent it, before the CLI's answer), and the two failures a gateway user
// cannot diagnose from the CLI's lines (no credentials, an API it cannot
// reach) come with a `cli_problem` frame while every CLI line is still relayed.
import assert from 'node:assert/strict'
import { after, test } from 'node:test'
import { E2E_TEST_TIMEOUT_MS, WAIT_MS, closeAll, controlRequest, isCli, isGateway, isResponseTo, startE2e, waitLive } from '../support/e2e.js'

after(closeAll)

test('user messages are recorded with their sender before the answer; observers get them live; history holds them', { timeout: E2E_TEST_TIMEOUT_MS }, async () => {
  const e = await startE2e()
  try {
    const session = await e.createSession()
    const holder = await e.connect(session.id)
    const hello = await waitLive(holder, isGateway('hello'))
    const observer = await e.connect(session.id, 'role=observer&after=0')
    await waitLive(observer, isGateway('hello'))
    holder.sendUser('Say hello', { uuid: 'a5d0c8e2-8a57-4c35-9a5e-1d3c7b2e9f10' })
    const result = await waitLive(holder, isCli('result'))
    holder.sendUser('Say bye')
    const second = await waitLive(holder, (f) => isCli('result')(f) && f.seq > result.seq)

    const asked = holder.seqFrames.filter(isGateway('user_message'))
    assert.deepEqual(asked.map((f) => f.message), [{ role: 'user', content: 'Say hello' }, { role: 'user', content: 'Say bye' }])
    assert.ok(asked.every((f) => f.client_id === hello.client_id), 'each names the client that sent it')
    assert.equal(asked[0].uuid, 'a5d0c8e2-8a57-4c35-9a5e-1d3c7b2e9f10')
    assert.equal(asked[1].uuid, undefined)
    const answer = holder.seqFrames.find(isCli('assistant'))
    assert.ok(asked[0].seq < answer.seq, 'the question is recorded before the CLI answers it')
    assert.ok(asked[1].seq > result.seq && asked[1].seq < second.seq)

    await waitLive(observer, (f) => f.seq === second.seq)
    assert.deepEqual(observer.seqFrames.filter(isGateway('user_message')), asked, 'the observer saw the questions live')
    const history = await e.history(session.id)
    assert.deepEqual(history?.filter(isGateway('user_message')), asked, 'GET /events holds them')
  } finally {
    await e.close()
  }
})

test('no credentials: the CLI\'s own lines are relayed and a cli_problem frame says cli_not_authenticated with a hint', { timeout: E2E_TEST_TIMEOUT_MS }, async () => {
  const e = await startE2e({ cliEnv: ({ ANTHROPIC_API_KEY: _key, ...env }) => env })
  try {
    const session = await e.createSession()
    const client = await e.connect(session.id)
    client.sendUser('Say hello')
    const result = await waitLive(client, isCli('result'))
    assert.equal(result.is_error, true)
    const problem = await waitLive(client, isGateway('cli_problem'))
    assert.equal(problem.code, 'cli_not_authenticated')
    assert.match(problem.hint, /ANTHROPIC_API_KEY/)
    const said = client.seqFrames.find((f) => isCli('assistant')(f) && f.error === 'authentication_failed')
    assert.ok(said, 'the CLI\'s own assistant line is relayed as printed')
    assert.equal(problem.seq, said.seq + 1, 'the problem comes right after the line that shows it')
    assert.equal(client.seqFrames.filter(isGateway('cli_problem')).length, 1)
    assert.equal(e.turns().length, 0, 'nothing reached the API')
  } finally {
    await e.close()
  }
})

test('an unreachable API: after repeated api_retry lines a cli_problem frame says api_unreachable with the retry count', { timeout: E2E_TEST_TIMEOUT_MS }, async () => {
  // A port nothing listens on (the discard port); the sandbox's egress allowlist follows ANTHROPIC_BASE_URL.
  const e = await startE2e({ cliEnv: (env) => ({ ...env, ANTHROPIC_BASE_URL: 'http://127.0.0.1:9' }) })
  try {
    const session = await e.createSession()
    const client = await e.connect(session.id)
    client.sendUser('Say hello')
    const problem = await waitLive(client, isGateway('cli_problem'), 0, WAIT_MS * 2)
    assert.equal(problem.code, 'api_unreachable')
    assert.match(problem.hint, /ANTHROPIC_BASE_URL/)
    const retries = client.seqFrames.filter((f) => isCli('system', 'api_retry')(f) && f.seq < problem.seq)
    assert.equal(retries.length, 2, 'said at the second retry')
    assert.equal(problem.attempt, retries[1].attempt)
    assert.equal(problem.max_retries, retries[1].max_retries)
    client.send(controlRequest('int-1', { subtype: 'interrupt' }))
    await waitLive(client, isResponseTo('int-1'))
    await waitLive(client, isCli('result'))
    assert.equal(client.seqFrames.filter(isGateway('cli_problem')).length, 1, 'once per turn')
  } finally {
    await e.close()
  }
})
