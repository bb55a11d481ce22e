// End to end: gateway + real claude CLI + Messages API stand-in + real
// WebSocket clients. Plain turns: seq'd frames and the recorded history,
// partial messages, the model (set mid-session or at creation) and the other
// session options reaching the CLI.
import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { TOKEN_A, commandLine } from '../support/gateway.js'
import { lastUserText } from '../support/mock-anthropic.js'
import {
  E2E_TEST_TIMEOUT_MS, TENANT, WAIT_MS, assertContiguous, waitLive, controlRequest, isCanUseTool, isCli,
  isResponseTo, startE2e, streamedPrompt, type E2e
} from '../support/e2e.js'

// One gateway and stand-in for every case: each case has its own session and
// prompts, and looks only at the requests made since it began; the close at
// the end still checks no CLI survived.
let e: E2e
before(async () => { e = await startE2e() })
// Not closeAll(): it drops the close's failures, and this close is where they are checked.
after(async () => { await e.close() })

/** A model the stand-in answers and the CLI does not remap (it is not the CLI's default either). */
const OTHER_MODEL = 'claude-sonnet-4-5-20250929'

function systemText (body: unknown): string {
  const system = (body as { system?: unknown }).system
  if (typeof system === 'string') return system
  return Array.isArray(system) ? system.map((b: { text?: unknown }) => typeof b.text === 'string' ? b.text : '').join('\n') : ''
}

test('text turn: assistant and result frames carry seqs, and the recorded history matches what the client got', { timeout: E2E_TEST_TIMEOUT_MS }, async () => {
  const session = await e.createSession()
  assert.equal(session.status, 'starting')
  assert.equal(typeof session.pid, 'number')
  const client = await e.connect(session.id)
  client.sendUser('Say hello')

  const result = await waitLive(client, isCli('result'))
  assert.equal(result.subtype, 'success', JSON.stringify(result))
  assert.equal(result.is_error, false)
  assert.equal(result.result, 'Echo: Say hello')
  assert.equal(result.session_id, session.id, 'the CLI runs under the gateway\'s session id')
  const assistant = client.frames.find(isCli('assistant'))
  assert.ok(assistant, 'an assistant frame')
  assert.equal(typeof assistant.seq, 'number')
  assert.equal(typeof result.seq, 'number')
  assert.ok(assistant.seq < result.seq)
  assert.deepEqual(assistant.message.content, [{ type: 'text', text: 'Echo: Say hello' }])
  assert.ok(e.turns().some(streamedPrompt('Say hello')), 'the stand-in saw the prompt')
  assertContiguous(client.seqFrames)
  const snapshot = await e.gw.request('GET', `/v1/sessions/${session.id}`)
  assert.equal(snapshot.body.status, 'running')
  assert.equal(snapshot.body.turn_running, false)
  assert.equal(snapshot.body.pid, session.pid)
  assert.ok(snapshot.body.last_seq >= result.seq)

  // What was recorded is what the client received (it attached with after=0: the whole history).
  let recorded = await e.history(session.id)
  let witness = 'GET /v1/sessions/:id/events'
  if (recorded === null) {
    // The events route is not there yet: a second client's replay must match instead.
    witness = 'a second client\'s replay'
    const second = await e.connect(session.id, 'role=observer&after=0')
    await waitLive(second, (f) => f.seq === result.seq)
    recorded = second.seqFrames
  }
  const last = recorded[recorded.length - 1]?.seq as number
  assert.ok(last >= result.seq, `${witness} holds the result`)
  await waitLive(client, (f) => f.seq === last)
  assert.deepEqual(client.seqFrames.filter((f) => f.seq <= last), recorded, `${witness} matches the live frames`)
  if (witness.startsWith('GET')) {
    // Byte for byte: the route joins the stored frames, which are the texts clients were sent.
    const res = await fetch(`${e.gw.url}/v1/sessions/${session.id}/events?after=0&limit=${last}`, { headers: { authorization: `Bearer ${TOKEN_A}` } })
    const live = client.raw.filter((_, i) => typeof client.frames[i].seq === 'number' && client.frames[i].seq <= last)
    const text = await res.text()
    assert.ok(text.startsWith(`{"events":[${live.join(',')}],"has_more":`), `GET events text differs from the frames sent: ${text.slice(0, 300)}`)
  }
})

test('partial messages: stream_event frames arrive in order before the assistant message', { timeout: E2E_TEST_TIMEOUT_MS }, async () => {
  const session = await e.createSession({ include_partial_messages: true })
  assert.ok((await commandLine(session.pid)).includes('--include-partial-messages'))
  const client = await e.connect(session.id)
  client.sendUser('LONG_ANSWER 5')
  const result = await waitLive(client, isCli('result'))
  assert.equal(result.subtype, 'success', JSON.stringify(result))

  const assistant = client.frames.find(isCli('assistant'))
  const text = assistant.message.content.map((b: { text?: string }) => b.text ?? '').join('')
  const lines = Array.from({ length: 5 }, (_, i) => `Line ${i + 1} of a long streamed answer.\n`)
  assert.equal(text, lines.join(''))

  const events = client.frames.filter(isCli('stream_event'))
  const before = events.filter((f) => f.seq < assistant.seq).map((f) => f.event)
  assert.deepEqual(before.map((ev) => ev.type), ['message_start', 'content_block_start', ...lines.map(() => 'content_block_delta')])
  assert.deepEqual(before.slice(2).map((ev) => ev.delta.text), lines, 'the deltas in order, before the message they make up')
  assert.equal(before[0].message.id, assistant.message.id)
  const afterwards = events.filter((f) => f.seq > assistant.seq && f.seq < result.seq).map((f) => f.event.type)
  assert.deepEqual(afterwards, ['content_block_stop', 'message_delta', 'message_stop'])
  assertContiguous(client.seqFrames)
})

test('set_model mid-session: the holder\'s control_request reaches the CLI and the next API request names the model', { timeout: E2E_TEST_TIMEOUT_MS }, async () => {
  const earlier = e.turns().length
  const session = await e.createSession()
  const client = await e.connect(session.id)
  client.sendUser('Before the switch')
  await waitLive(client, isCli('result'))
  const first = await e.mock.waitForRequest(streamedPrompt('Before the switch'), WAIT_MS)
  const defaultModel = (first.body as { model: string }).model
  assert.notEqual(defaultModel, OTHER_MODEL, 'the test needs a model other than the default')

  client.send(controlRequest('e2e-set-model-1', { subtype: 'set_model', model: OTHER_MODEL }))
  const answer = await waitLive(client, isResponseTo('e2e-set-model-1'))
  assert.equal(answer.response.subtype, 'success', JSON.stringify(answer))
  assert.equal(typeof answer.seq, 'number')

  const mark = client.frames.length
  client.sendUser('After the switch')
  const result = await waitLive(client, isCli('result'), mark)
  const next = await e.mock.waitForRequest(streamedPrompt('After the switch'), WAIT_MS)
  assert.equal((next.body as { model: string }).model, OTHER_MODEL)
  assert.ok(e.turns().slice(earlier).filter((r) => (r.body as { model: string }).model === OTHER_MODEL).every((r) => r.seq >= next.seq), 'no earlier turn used it')
  assert.equal(result.subtype, 'success', JSON.stringify(result))
})

test('session options: model, append_system_prompt, permission_mode, tool rules and cwd from the POST body reach the CLI', { timeout: E2E_TEST_TIMEOUT_MS }, async () => {
  // Starts with '-': the gateway joins values to their flag with '=', so this is not read as a flag.
  const marker = '- E2E-APPEND-MARKER: answer in the voice of a lighthouse keeper'
  const earlier = e.turns().length
  const session = await e.createSession({
    model: OTHER_MODEL,
    append_system_prompt: marker,
    permission_mode: 'acceptEdits',
    allowed_tools: ['Bash(touch ruled.txt)'],
    disallowed_tools: ['WebFetch'],
    cwd: 'shared/project'
  })
  const folder = join(e.scratch.dataDir, 'workspaces', TENANT, 'shared', 'project')
  const argv = await commandLine(session.pid)
  assert.ok(argv.includes(`--model=${OTHER_MODEL}`) && argv.includes('--permission-mode=acceptEdits'), argv.join(' '))
  const client = await e.connect(session.id)
  client.sendUser('Which options?')
  const result = await waitLive(client, isCli('result'))
  assert.equal(result.subtype, 'success', JSON.stringify(result))

  const first = e.turns()[earlier]
  assert.ok(first, 'a streamed request')
  assert.equal(lastUserText(first.body), 'Which options?')
  assert.equal((first.body as { model: string }).model, OTHER_MODEL, 'the first request names the model')
  assert.ok(systemText(first.body).includes(marker), 'the appended system prompt is in the request\'s system prompt')
  const init = client.frames.find(isCli('system', 'init'))
  assert.equal(init.permissionMode, 'acceptEdits')
  assert.equal(init.model, OTHER_MODEL)
  assert.equal(init.cwd, folder, 'cwd picks a folder under the tenant\'s workspace root')
  assert.ok(init.tools.includes('Bash') && !init.tools.includes('WebFetch'), 'disallowed_tools removes the tool')

  // acceptEdits in effect: a file edit in the workspace runs without a prompt.
  const mark = client.frames.length
  client.sendUser('WRITE_FILE accepted.txt written-without-a-prompt')
  const second = await waitLive(client, isCli('result'), mark)
  assert.equal(second.subtype, 'success', JSON.stringify(second))
  assert.equal(client.frames.slice(mark).filter(isCanUseTool).length, 0, 'no permission prompt')
  const file = join(folder, 'accepted.txt')
  assert.ok(existsSync(file))
  assert.equal(readFileSync(file, 'utf8').trim(), 'written-without-a-prompt')

  // allowed_tools in effect: a Bash command matching the rule runs without a prompt.
  const third = client.frames.length
  client.sendUser('RUN_BASH touch ruled.txt')
  assert.equal((await waitLive(client, isCli('result'), third)).subtype, 'success')
  assert.equal(client.frames.slice(third).filter(isCanUseTool).length, 0, 'no permission prompt')
  assert.ok(existsSync(join(folder, 'ruled.txt')))
})
