// End to end: gateway + real claude CLI + Messages API stand-in + real
// WebSocket clients. Continuing a conversation: after the session's CLI was
// stopped, and after the gateway itself restarted (Redis store).
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { type TestContext, after, test } from 'node:test'
import { allUserTexts, startMockAnthropic, type MockAnthropic } from '../support/mock-anthropic.js'
import { REDIS_URL, deleteKeys, redisCommand } from '../support/redis-server.js'
import { commandLine } from '../support/gateway.js'
import {
  E2E_TEST_TIMEOUT_MS, WAIT_MS, type E2e, type Scratch, assertContiguous, closeAll, waitLive, isCanUseTool, isCli, isGateway, makeScratch, startE2e, streamedPrompt
} from '../support/e2e.js'
import { eventually } from '../support/waiters.js'

after(closeAll)


/** Texts of the assistant's earlier messages in a request. */
function assistantTexts (body: unknown): string[] {
  const messages = (body as { messages?: Array<{ role: string, content: unknown }> }).messages ?? []
  return messages.filter((m) => m.role === 'assistant').flatMap((m) => typeof m.content === 'string'
    ? [m.content]
    : Array.isArray(m.content) ? m.content.map((b: { text?: unknown }) => typeof b.text === 'string' ? b.text : '') : [])
}

/** The new CLI's status frame (after `from`) and its argv: it must continue the session with --resume. */
async function assertResumed (client: Awaited<ReturnType<E2e['connect']>>, sessionId: string, from: number, oldPid: number): Promise<number> {
  const starting = await waitLive(client, isGateway('status', { status: 'starting' }), from)
  assert.equal(typeof starting.pid, 'number')
  assert.notEqual(starting.pid, oldPid, 'a new CLI')
  const argv = await commandLine(starting.pid)
  assert.equal(argv[argv.indexOf('--resume') + 1], sessionId, `spawned with --resume <id>: ${argv.join(' ')}`)
  assert.ok(!argv.includes('--session-id'))
  return starting.pid
}

test('stop, then prompt again: the CLI is restarted with --resume and the API sees the earlier turns', { timeout: E2E_TEST_TIMEOUT_MS }, async () => {
  const e = await startE2e()
  try {
    const session = await e.createSession()
    const client = await e.connect(session.id)
    client.sendUser('First prompt')
    const first = await waitLive(client, isCli('result'))
    assert.equal(first.result, 'Echo: First prompt')

    const stopped = await e.gw.request('DELETE', `/v1/sessions/${session.id}`)
    assert.equal(stopped.status, 200)
    assert.equal(stopped.body.status, 'stopped')
    assert.equal(stopped.body.pid, null)
    assert.equal(stopped.body.exit.reason, 'stopped')
    await waitLive(client, isGateway('status', { status: 'stopped' }))

    const mark = client.frames.length
    client.sendUser('Second prompt')
    await assertResumed(client, session.id, mark, session.pid)
    const second = await waitLive(client, isCli('result'), mark)
    const request = await e.mock.waitForRequest(streamedPrompt('Second prompt'), WAIT_MS)
    const users = allUserTexts(request.body)
    assert.ok(users.some((t) => t.includes('First prompt')), `earlier prompt in the request: ${JSON.stringify(users)}`)
    assert.ok(assistantTexts(request.body).includes('Echo: First prompt'), 'earlier answer in the request')
    assert.equal(second.subtype, 'success', JSON.stringify(second))
    assert.equal(second.session_id, session.id, 'same conversation')
    assertContiguous(client.seqFrames)
  } finally {
    await e.close()
  }
})

test('gateway restart with Redis: the session is still listed and a new prompt resumes the conversation', { timeout: E2E_TEST_TIMEOUT_MS }, async (t) => {
  try {
    await redisCommand(REDIS_URL, ['PING'], { timeoutMs: 1000 })
  } catch (err) {
    t.skip(`no Redis answers at ${REDIS_URL} (${(err as Error).message}): run it through npm test, which starts a private redis-server, or set TEST_REDIS_URL to a running Redis`)
    return
  }
  const prefix = `cgw-e2e-${randomUUID()}:`
  const env = { REDIS_URL, REDIS_PREFIX: prefix }
  // One CLI HOME (the CLI's transcripts), one DATA_DIR (workspaces) and one stand-in for both gateway runs.
  const scratch = makeScratch()
  let mock: MockAnthropic | undefined
  let first: E2e | undefined
  let second: E2e | undefined
  try {
    mock = await startMockAnthropic()
    first = await startE2e({ scratch, mock, env })
    const session = await first.createSession({ metadata: { test: 'restart' } })
    const before = await first.connect(session.id)
    before.sendUser('Before the restart')
    const result = await waitLive(before, isCli('result'))
    assert.equal(result.result, 'Echo: Before the restart')
    await first.close() // also checks its CLI is gone
    const history = before.seqFrames

    second = await startE2e({ scratch, mock, env })
    const listed = await second.gw.request('GET', '/v1/sessions')
    assert.equal(listed.status, 200)
    const entry = listed.body.sessions.find((s: { id: string }) => s.id === session.id)
    assert.ok(entry, `the session is listed after the restart: ${JSON.stringify(listed.body)}`)
    assert.equal(entry.status, 'stopped')
    assert.deepEqual(entry.metadata, { test: 'restart' })
    assert.ok(entry.last_seq >= result.seq)

    // The history came back from Redis: a client attaching with after=0 gets it again.
    const client = await second.connect(session.id)
    await waitLive(client, (f) => f.seq === history[history.length - 1].seq)
    assert.deepEqual(client.seqFrames.slice(0, history.length), history)

    const mark = client.frames.length
    client.sendUser('After the restart')
    await assertResumed(client, session.id, mark, session.pid)
    const resumed = await waitLive(client, isCli('result'), mark)
    const request = await mock.waitForRequest(streamedPrompt('After the restart'), WAIT_MS)
    assert.ok(allUserTexts(request.body).some((t) => t.includes('Before the restart')), 'earlier prompt in the request')
    assert.ok(assistantTexts(request.body).includes('Echo: Before the restart'), 'earlier answer in the request')
    assert.equal(resumed.subtype, 'success', JSON.stringify(resumed))
    assert.equal(resumed.session_id, session.id)
    assertContiguous(client.seqFrames)
  } finally {
    await second?.close()
    await first?.close()
    await mock?.close()
    scratch.remove()
    await deleteKeys(REDIS_URL, prefix).catch(() => 0)
  }
})

interface TwoNodes { mock: MockAnthropic, nodeA: E2e, nodeB: E2e, prefix: string }

/**
 * Two nodes, each its own DATA_DIR (CLI config dirs, pid files) and HOME;
 * shared only the store (and its secret) and the workspace folders, at the
 * same path on both. Node A is each case's own (the case ends it), node B and
 * the stand-in serve every case: a case stops what it resumed on node B, so
 * no CLI of an earlier case talks to the stand-in during a later one. Skips
 * without a Redis; removes everything afterwards.
 */
let twoNodes: { mock: MockAnthropic, nodeB: E2e, prefix: string, shared: Record<string, string>, scratchB: Scratch } | undefined
after(async () => {
  if (twoNodes === undefined) return
  const { mock, nodeB, prefix, scratchB } = twoNodes
  try {
    await nodeB.close()
  } finally {
    await mock.close()
    scratchB.remove()
    await deleteKeys(REDIS_URL, prefix).catch(() => 0)
  }
})

async function onTwoNodes (t: TestContext, body: (nodes: TwoNodes) => Promise<void>): Promise<void> {
  try {
    await redisCommand(REDIS_URL, ['PING'], { timeoutMs: 1000 })
  } catch (err) {
    t.skip(`no Redis answers at ${REDIS_URL} (${(err as Error).message}): run it through npm test, which starts a private redis-server, or set TEST_REDIS_URL to a running Redis`)
    return
  }
  if (twoNodes === undefined) {
    const prefix = `cgw-e2e-${randomUUID()}:`
    const scratchB = makeScratch()
    const shared = { REDIS_URL, REDIS_PREFIX: prefix, STORE_SECRET: randomUUID(), WORKSPACE_ROOT: `${scratchB.root}/shared-workspaces` }
    const mock = await startMockAnthropic()
    try {
      twoNodes = { mock, prefix, shared, scratchB, nodeB: await startE2e({ scratch: scratchB, mock, env: { ...shared, NODE_ID: 'node-b' } }) }
    } catch (err) {
      await mock.close()
      scratchB.remove()
      throw err
    }
  }
  const { mock, nodeB, prefix, shared } = twoNodes
  const scratchA = makeScratch()
  let nodeA: E2e | undefined
  try {
    nodeA = await startE2e({ scratch: scratchA, mock, env: { ...shared, NODE_ID: 'node-a' } })
    await body({ mock, nodeA, nodeB, prefix })
  } finally {
    await nodeA?.close()
    scratchA.remove()
  }
}

/** Stops a session node B resumed: its CLI is gone before the next case counts the stand-in's requests. */
async function stopOnB (nodeB: E2e, sessionId: string): Promise<void> {
  const stopped = await nodeB.gw.request('DELETE', `/v1/sessions/${sessionId}`)
  assert.equal(stopped.status, 200, JSON.stringify(stopped.body))
}

test('another node resumes the conversation: config dirs on each node\'s own disk, the conversation carried through Redis', { timeout: E2E_TEST_TIMEOUT_MS }, async (t) => {
  await onTwoNodes(t, async ({ mock, nodeA, nodeB }) => {
    const session = await nodeA.createSession()
    const onA = await nodeA.connect(session.id)
    onA.sendUser('Before the move')
    assert.equal((await waitLive(onA, isCli('result'))).result, 'Echo: Before the move')
    await nodeA.close() // drains: the CLI stops, its conversation is saved, the lease released

    const onB = await nodeB.connect(session.id)
    await waitLive(onB, (f) => f.type === 'gateway' && f.subtype === 'status' && f.status === 'stopped')
    const mark = onB.frames.length
    onB.sendUser('After the move')
    const resumed = await waitLive(onB, isCli('result'), mark)
    assert.equal(resumed.subtype, 'success', JSON.stringify(resumed))
    const request = await mock.waitForRequest(streamedPrompt('After the move'), WAIT_MS)
    assert.ok(allUserTexts(request.body).some((text) => text.includes('Before the move')), 'the turn run on node A is in node B\'s request')
    assert.ok(assistantTexts(request.body).includes('Echo: Before the move'), 'and so is its answer')
    assertContiguous(onB.seqFrames)
    await stopOnB(nodeB, session.id)
  })
})

test('a node that dies mid-turn leaves the turn\'s steps so far: the tool call waiting for permission is in the store, and the node that resumes sends it to the API', { timeout: E2E_TEST_TIMEOUT_MS }, async (t) => {
  await onTwoNodes(t, async ({ mock, nodeA, nodeB, prefix }) => {
    const session = await nodeA.createSession()
    const onA = await nodeA.connect(session.id)
    onA.sendUser('Before the step')
    assert.equal((await waitLive(onA, isCli('result'))).result, 'Echo: Before the step')
    // The next turn's model calls a tool; the CLI waits for permission: mid-turn.
    onA.sendUser('RUN_BASH touch interrupted-step.txt')
    const prompt = await waitLive(onA, isCanUseTool)
    const toolUseId = String(prompt.request.tool_use_id)
    assert.match(toolUseId, /^toolu_/)
    const key = `${prefix}{${session.id}}:conversation`
    const midTurn = await eventually(async () => {
      const stored = await redisCommand(REDIS_URL, ['GET', key])
      return typeof stored === 'string' && stored.includes(toolUseId) && stored
    }, WAIT_MS, 'the tool call in the stored conversation while its permission prompt waits')
    assert.ok(midTurn.includes('Before the step'), 'with the turn before it')

    // Node A dies here: what it had stored mid-turn is what a surviving node finds.
    await nodeA.close()
    assert.equal(await redisCommand(REDIS_URL, ['SET', key, midTurn]), 'OK')

    const onB = await nodeB.connect(session.id)
    await waitLive(onB, (f) => f.type === 'gateway' && f.subtype === 'status' && f.status === 'stopped')
    const mark = onB.frames.length
    onB.sendUser('After the step')
    const resumed = await waitLive(onB, isCli('result'), mark)
    assert.equal(resumed.subtype, 'success', JSON.stringify(resumed))
    const request = await mock.waitForRequest(streamedPrompt('After the step'), WAIT_MS)
    const blocks = ((request.body as { messages: Array<{ content: unknown }> }).messages).flatMap((m) => Array.isArray(m.content) ? m.content as Array<Record<string, unknown>> : [])
    assert.ok(blocks.some((b) => b.type === 'tool_use' && b.id === toolUseId), 'node B\'s CLI remembers the tool call made on node A')
    // The API refuses a tool_use without its tool_result: the resumed CLI closes it itself.
    assert.ok(blocks.some((b) => b.type === 'tool_result' && b.tool_use_id === toolUseId), JSON.stringify(blocks))
    await stopOnB(nodeB, session.id)
  })
})

test('a conversation copy changed in Redis never reaches the CLI of the node that resumes the session', { timeout: E2E_TEST_TIMEOUT_MS }, async (t) => {
  await onTwoNodes(t, async ({ mock, nodeA, nodeB, prefix }) => {
    const session = await nodeA.createSession()
    const onA = await nodeA.connect(session.id)
    onA.sendUser('Before the change')
    assert.equal((await waitLive(onA, isCli('result'))).result, 'Echo: Before the change')
    await nodeA.close()
    // Someone who can write Redis, but does not hold STORE_SECRET, rewrites the agent's past.
    const key = `${prefix}{${session.id}}:conversation`
    const stored = await redisCommand(REDIS_URL, ['GET', key])
    assert.ok(typeof stored === 'string' && stored.startsWith('cgws1 ') && stored.includes('Echo: Before the change'), 'node A stored a sealed copy')
    assert.equal(await redisCommand(REDIS_URL, ['SET', key, stored.replaceAll('Echo: Before the change', 'Echo: Injected by someone')]), 'OK')
    const requestsBefore = mock.messageRequests().length

    const onB = await nodeB.connect(session.id)
    await waitLive(onB, (f) => f.type === 'gateway' && f.subtype === 'status' && f.status === 'stopped')
    const mark = onB.frames.length
    onB.sendUser('After the change')
    // Node B has no copy it may use and no file of its own: the CLI says it has no such conversation, as it
    // does when a copy is missing, and asks the API nothing.
    const result = await waitLive(onB, isCli('result'), mark)
    assert.equal(result.subtype, 'error_during_execution', JSON.stringify(result))
    assert.match(JSON.stringify(result.errors), /No conversation found/)
    assert.equal(mock.messageRequests().length, requestsBefore, 'no request after the change')
    assert.ok(!mock.requests.some((r) => JSON.stringify(r.body ?? '').includes('Injected by someone')), 'the changed text reached no model')
    await stopOnB(nodeB, session.id)
  })
})
