/**
 * claude-remote as a host sees it: spawned like the CLI (bin/claude-remote,
 * the Agent SDK's argv), NDJSON in on stdin, the CLI's own lines out on
 * stdout. Against a real gateway with the fake CLI; what the host reads is
 * compared byte for byte with the CLI lines in the session's history.
 */
import assert from 'node:assert/strict'
import { before, describe, it, test } from 'node:test'
import { loadConfig } from '../../src/config.js'
import { TOKEN_A, TOKEN_B, type TestGateway, eventually, gateway, suiteScope } from '../support/gateway.js'
import { SDK_ARGS, WAIT_MS, forwardedRemote, newSession, onlySession, sdkInitialize, sessionIds, spawnRemote, userLine } from '../support/remote.js'

/** CLI lines of the session's history as the CLI printed them: gateway frames out, `{"seq":n,` off. */
async function cliLinesInHistory (gw: TestGateway, sessionId: string, gatewayInitIds = true): Promise<string[]> {
  const res = await fetch(`${gw.url}/v1/sessions/${sessionId}/events?limit=1000`, { headers: { authorization: `Bearer ${TOKEN_A}` } })
  const body = await res.json() as { events: Array<Record<string, unknown>> }
  return body.events
    .filter((e) => e.type !== 'gateway')
    // The gateway's own initialize answer is not the host's (the CLI would not print it to this host).
    .filter((e) => !(gatewayInitIds && e.type === 'control_response' && String((e.response as any)?.request_id).startsWith('gw_init_')))
    .map((e) => JSON.stringify(e).replace(/^\{"seq":\d+,/, '{'))
}

// Cases that leave the gateway as they found it (no reload, default options) share one: each finds its own
// session as the one it added, and no other claude-remote is connected while it runs (cases run one at a time).
describe('claude-remote on a shared gateway', () => {
  let gw: TestGateway
  const scope = suiteScope()
  before(async () => { gw = await gateway(scope) })

  it('a turn through claude-remote: the CLI\'s lines byte for byte, no seq, no gateway frame; EOF ends the session (exit 0)', async (t) => {
    const known = await sessionIds(gw)
    const remote = spawnRemote(gw)
    t.after(() => remote.child.kill('SIGKILL'))
    const init = sdkInitialize()
    remote.write(init)
    remote.write(userLine('echo hello from the sdk'))
    await remote.waitLine((f) => f.type === 'result')
    const session = await newSession(gw, known)
    remote.child.stdin.end()
    assert.equal(await remote.exited, 0, remote.stderr())

    // The SDK's initialize reached the CLI as the CLI's own (its request_id), and its answer came back.
    const initId = JSON.parse(init).request_id
    assert.ok(gw.stdinLines(session.id).some((l) => l.type === 'control_request' && l.request_id === initId))
    assert.ok(remote.lines.some((l) => JSON.parse(l).type === 'control_response' && JSON.parse(l).response.request_id === initId))

    for (const line of remote.lines) {
      const frame = JSON.parse(line)
      assert.notEqual(frame.type, 'gateway', line)
      assert.equal(Object.hasOwn(frame, 'seq'), false, line)
    }
    // Byte for byte: what the host read is what the CLI printed (history holds it with seq spliced in).
    const history = await cliLinesInHistory(gw, session.id)
    assert.deepEqual(remote.lines, history)
    // EOF stopped the session (DELETE): the CLI is gone, the record says stopped.
    const after = await gw.request('GET', `/v1/sessions/${session.id}`)
    assert.equal(after.body.status, 'stopped')
    assert.equal(after.body.pid, null)
  })

  it('flags the gateway cannot honour and unknown flags: a clear stderr line, exit 2, no session', async (t) => {
    const known = await sessionIds(gw)
    const cases: Array<[string[], RegExp]> = [
      [[...SDK_ARGS, '--bogus-flag'], /unknown flag --bogus-flag/],
      [[...SDK_ARGS, '--fork-session'], /--fork-session is not supported through the gateway/],
      [[...SDK_ARGS, '--session-id=11111111-1111-4111-8111-111111111111'], /--session-id is not supported.*--resume/],
      [[...SDK_ARGS, '--mcp-config', '{"mcpServers":{"x":{"command":"echo"}}}'], /--mcp-config is not supported/],
      [[...SDK_ARGS, '--setting-sources='], /--setting-sources/],
      [['--verbose', '--input-format', 'stream-json'], /--output-format is required/]
    ]
    // Each its own process, all started at once (each refusal is its own; the session list below covers them all).
    await Promise.all(cases.map(async ([args, message]) => {
      const remote = spawnRemote(gw, args)
      t.after(() => remote.child.kill('SIGKILL'))
      remote.child.stdin.end()
      assert.equal(await remote.exited, 2, args.join(' '))
      assert.match(remote.stderr(), message)
      assert.deepEqual(remote.lines, [])
    }).concat((async () => {
      const missing = spawnRemote(gw, SDK_ARGS, { CLAUDE_REMOTE_URL: '' })
      t.after(() => missing.child.kill('SIGKILL'))
      assert.equal(await missing.exited, 2)
      assert.match(missing.stderr(), /CLAUDE_REMOTE_URL is not set/)
    })()))
    assert.deepEqual(await sessionIds(gw), known)
  })

  it('argv flags become session options (the SDK\'s --flag=value forms)', async (t) => {
    const known = await sessionIds(gw)
    const remote = spawnRemote(gw, [...SDK_ARGS, '--model=claude-x-1', '--permission-mode=acceptEdits', '--allowedTools=Read,Bash(git log:*)', '--disallowedTools=Write', '--max-turns=3', '--include-partial-messages', '--append-system-prompt=be brief'])
    t.after(() => remote.child.kill('SIGKILL'))
    remote.write(userLine('echo options'))
    await remote.waitLine((f) => f.type === 'result')
    const session = await newSession(gw, known)
    assert.deepEqual(session.options, {
      model: 'claude-x-1',
      permission_mode: 'acceptEdits',
      allowed_tools: ['Read', 'Bash(git log:*)'],
      disallowed_tools: ['Write'],
      max_turns: 3,
      include_partial_messages: true,
      append_system_prompt: 'be brief',
      permission_prompt_tool: 'stdio',
      // the SDK's CLAUDE_CODE_ENTRYPOINT (spawnRemote sets sdk-ts), so the CLI boots as the SDK's would
      entrypoint: 'sdk-ts'
    })
    const spawned = gw.argvDumps(session.id).at(-1)
    assert.equal(spawned?.env.CLAUDE_CODE_ENTRYPOINT, 'sdk-ts')
    assert.ok(spawned?.argv.includes('--permission-prompt-tool'))
    remote.child.stdin.end()
    assert.equal(await remote.exited, 0)
  })

  it('a dropped connection mid-turn is resumed by seq: no line lost or repeated; a line written meanwhile arrives', async (t) => {
    const known = await sessionIds(gw)
    const remote = spawnRemote(gw)
    t.after(() => remote.child.kill('SIGKILL'))
    remote.write(sdkInitialize())
    remote.write(userLine('slow 6 150'))
    await remote.waitLine((f) => f.type === 'assistant')
    // Cut the connection from the server side (the client sees 1006).
    for (const ws of gw.app.websocketServer.clients) ws.terminate()
    remote.write(userLine('echo written while disconnected'))
    await remote.until(() => remote.lines.filter((l) => JSON.parse(l).type === 'result').length === 2, 'two results')
    const session = await newSession(gw, known)
    remote.child.stdin.end()
    assert.equal(await remote.exited, 0, remote.stderr())
    assert.deepEqual(remote.lines, await cliLinesInHistory(gw, session.id))
    const texts = gw.stdinLines(session.id).filter((l) => l.type === 'user').map((l) => l.message.content[0].text)
    assert.deepEqual(texts, ['slow 6 150', 'echo written while disconnected'])
  })

  it('stdin EOF while a permission prompt waits: denied as the CLI denies it, the turn ends, exit 0', async (t) => {
    const known = await sessionIds(gw)
    const remote = spawnRemote(gw)
    t.after(() => remote.child.kill('SIGKILL'))
    remote.write(sdkInitialize())
    remote.write(userLine('ask Bash touch eof-file.txt'))
    const prompt = await remote.waitLine((f) => f.type === 'control_request' && f.request.subtype === 'can_use_tool')
    const session = await newSession(gw, known)
    remote.child.stdin.end()
    assert.equal(await remote.exited, 0, remote.stderr())
    const answer = gw.stdinLines(session.id).find((l) => l.type === 'control_response' && l.response.request_id === prompt.request_id)
    assert.equal(answer.response.subtype, 'error')
    assert.match(answer.response.error, /stream closed/)
    assert.ok(remote.lines.some((l) => JSON.parse(l).type === 'result'))
    assert.equal((await gw.request('GET', `/v1/sessions/${session.id}`)).body.status, 'stopped')
  })

  it('exit code 1 when the last result was an error; SIGTERM stops the session with 143', async (t) => {
    // Two sessions of their own, started together.
    const failing = spawnRemote(gw)
    t.after(() => failing.child.kill('SIGKILL'))
    const term = spawnRemote(gw)
    t.after(() => term.child.kill('SIGKILL'))
    failing.write(userLine('api-error'))
    term.write(userLine('slow 20 200'))
    const result = await failing.waitLine((f) => f.type === 'result')
    assert.equal(result.is_error, true)
    failing.child.stdin.end()
    assert.equal(await failing.exited, 1)

    const assistant = await term.waitLine((f) => f.type === 'assistant')
    const running = (await gw.request('GET', `/v1/sessions/${String(assistant.session_id)}`)).body
    assert.equal(running.status, 'running')
    assert.notEqual(running.id, result.session_id)
    term.child.kill('SIGTERM')
    assert.equal(await term.exited, 143)
    const after = await gw.request('GET', `/v1/sessions/${running.id}`)
    assert.notEqual(after.body.status, 'running')
  })

  it('--resume attaches to the gateway session; options that differ from it are refused', async (t) => {
    const known = await sessionIds(gw)
    const first = spawnRemote(gw)
    t.after(() => first.child.kill('SIGKILL'))
    first.write(userLine('echo first'))
    await first.waitLine((f) => f.type === 'result')
    first.child.stdin.end()
    assert.equal(await first.exited, 0)
    const session = await newSession(gw, known)

    const again = spawnRemote(gw, [...SDK_ARGS, `--resume=${session.id}`])
    t.after(() => again.child.kill('SIGKILL'))
    // Refused on its own, whatever `again` is doing meanwhile: started with it.
    const mismatch = spawnRemote(gw, [...SDK_ARGS, `--resume=${session.id}`, '--model=other-model'])
    t.after(() => mismatch.child.kill('SIGKILL'))
    mismatch.child.stdin.end()
    again.write(userLine('echo second'))
    const result = await again.waitLine((f) => f.type === 'result')
    assert.equal(result.session_id, session.id)
    again.child.stdin.end()
    assert.equal(await again.exited, 0)
    // Only the new turn reached this host, not the earlier one's lines.
    assert.equal(again.lines.filter((l) => JSON.parse(l).type === 'result').length, 1)
    assert.equal((await newSession(gw, known)).id, session.id)
    // The gateway restarted the stopped CLI with --resume.
    assert.ok(gw.argvDumps(session.id).at(-1)?.argv.includes('--resume'))

    assert.equal(await mismatch.exited, 2)
    assert.match(mismatch.stderr(), /created with model/)
  })
})

test('a token the gateway revokes (credentials reloaded) ends claude-remote at once: exit 1, saying why, no reconnect loop', async (t) => {
  const gw = await gateway(t)
  const remote = spawnRemote(gw)
  t.after(() => remote.child.kill('SIGKILL'))
  remote.write(sdkInitialize())
  remote.write(userLine('echo before the revocation'))
  await remote.waitLine((f) => f.type === 'result')
  // The operator takes tenant-a's token out and reloads (SIGHUP does this with the files read again).
  const next = loadConfig({ DATA_DIR: gw.dataDir, GATEWAY_TOKENS: `${TOKEN_B}=tenant-b`, SANDBOX: 'none', ALLOW_UNSANDBOXED: 'true' })
  const reloaded = await gw.app.gateway.reloadCredentials(next)
  assert.equal(reloaded.ended, 1, 'its socket was the one opened with the revoked token')
  assert.equal(await remote.exited, 1, remote.stderr())
  assert.match(remote.stderr(), /no longer accepts CLAUDE_REMOTE_TOKEN \(close 4401\)/)
})

test('a control request and a user line with a uuid lost with the connection are sent again: answered once, run once', async (t) => {
  const { gw, fwd, remote } = await forwardedRemote(t)
  remote.write(userLine('echo before'))
  await remote.waitLine((f) => f.type === 'result')

  // ws.send accepted it, the gateway never got it, then the connection died.
  fwd.cutNext('drop')
  remote.write(JSON.stringify({ type: 'control_request', request_id: 'lost-1', request: { subtype: 'set_model', model: 'claude-lost-1' } }))
  const answer = await remote.waitLine((f) => f.type === 'control_response' && f.response.request_id === 'lost-1')
  assert.equal(answer.response.subtype, 'success')
  assert.deepEqual(answer.response.response, { model: 'claude-lost-1' })

  fwd.cutNext('drop')
  const uuid = '33333333-3333-4333-8333-333333333333'
  remote.write(JSON.stringify({ ...JSON.parse(userLine('echo lost user line')), uuid }))
  await remote.until(() => remote.lines.filter((l) => JSON.parse(l).type === 'result').length === 2, 'the lost turn\'s result')
  assert.ok(fwd.dropped() > 0)

  const session = await onlySession(gw)
  remote.child.stdin.end()
  assert.equal(await remote.exited, 0, remote.stderr())
  assert.equal(remote.lines.filter((l) => JSON.parse(l).type === 'control_response' && JSON.parse(l).response.request_id === 'lost-1').length, 1)
  const stdin = gw.stdinLines(session.id)
  assert.equal(stdin.filter((l) => l.type === 'control_request' && l.request_id === 'lost-1').length, 1)
  assert.deepEqual(stdin.filter((l) => l.type === 'user').map((l) => l.message.content[0].text), ['echo before', 'echo lost user line'])
  // Nothing lost or repeated on the host's side either.
  assert.deepEqual(remote.lines, await cliLinesInHistory(gw, session.id))
})

test('a request sent again that the gateway still has in flight: its duplicate_request_id refusal is not the host\'s', async (t) => {
  // The CLI never answers: the initialize and lost-2 stay in flight on the gateway.
  const { gw, fwd, remote } = await forwardedRemote(t, { cliArgs: ['--fake-mode', 'hang'] }, [...SDK_ARGS, '--debug'])
  const session = await eventually(async () => (await gw.request('GET', '/v1/sessions')).body.sessions[0], WAIT_MS, 'the session')
  // Attached: the initialize went through it to the CLI.
  await eventually(() => gw.stdinLines(session.id).some((l) => l.type === 'control_request'), WAIT_MS, 'the initialize at the CLI')

  // The gateway gets it, but the connection dies before anything comes back.
  fwd.cutNext('deliver')
  remote.write(JSON.stringify({ type: 'control_request', request_id: 'lost-2', request: { subtype: 'set_model', model: 'claude-lost-2' } }))
  await remote.until(() => /sending again[^\n]*lost-2/.test(remote.stderr()), 'lost-2 sent again')
  // Refused at once, on the same connection after the re-sent requests' refusals.
  remote.write(JSON.stringify({ type: 'control_request', request_id: 'marker', request: { subtype: 'read_file' } }))
  const marker = await remote.waitLine((f) => f.type === 'control_response' && f.response.request_id === 'marker')
  assert.equal(marker.response.error_code, 'control_not_allowed')

  for (const line of remote.lines) assert.doesNotMatch(line, /duplicate_request_id/)
  assert.equal(remote.lines.filter((l) => JSON.parse(l).type === 'control_response').length, 1, remote.lines.join('\n'))
  const stdin = gw.stdinLines(session.id)
  assert.equal(stdin.filter((l) => l.type === 'control_request' && l.request_id === 'lost-2').length, 1)
  assert.equal(stdin.filter((l) => l.type === 'control_request' && l.request.subtype === 'initialize').length, 1)
})
