/**
 * The seam between a reconnect's replay and the live relay that follows it:
 * while the CLI keeps printing, claude-remote is cut off again and again, and
 * each new connection replays from the last seq given to the host. What the
 * host (the Agent SDK) reads on stdout must be exactly the CLI's lines in
 * history order: none missing at a replay's end, none printed twice. Run
 * against both stores (a memory replay and a Redis one).
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { test } from 'node:test'
import { TOKEN_A, gateway, type GatewayOptions, type TestGateway } from '../support/gateway.js'
import { REDIS_URL, deleteKeys } from '../support/redis-server.js'
import { onlySession, sdkInitialize, spawnRemote, userLine } from '../support/remote.js'

/** The CLI's lines as the host must read them: history without gateway frames, seq cut off. */
async function cliLinesInHistory (gw: TestGateway, sessionId: string): Promise<string[]> {
  const res = await fetch(`${gw.url}/v1/sessions/${sessionId}/events?limit=1000`, { headers: { authorization: `Bearer ${TOKEN_A}` } })
  const body = await res.json() as { events: Array<Record<string, unknown>> }
  return body.events
    .filter((e) => e.type !== 'gateway')
    .filter((e) => !(e.type === 'control_response' && String((e.response as any)?.request_id).startsWith('gw_init_')))
    .map((e) => JSON.stringify(e).replace(/^\{"seq":\d+,/, '{'))
}

const CUTS = 6

async function cutRepeatedly (t: { after: (fn: () => unknown) => void }, options: GatewayOptions): Promise<void> {
  const gw = await gateway(t, options)
  const remote = spawnRemote(gw)
  t.after(() => remote.child.kill('SIGKILL'))
  remote.write(sdkInitialize())
  // 80 lines 10 ms apart: lines keep coming while each replay is served.
  remote.write(userLine('slow 80 10'))
  const assistants = (): number => remote.lines.filter((l) => JSON.parse(l).type === 'assistant').length
  for (let cut = 0; cut < CUTS; cut++) {
    const before = assistants()
    // Cut as soon as a line arrived on the current connection (the first after its replay began).
    await remote.until(() => assistants() > before, `an assistant line before cut ${cut + 1}`)
    for (const ws of gw.app.websocketServer.clients) ws.terminate()
  }
  await remote.until(() => remote.lines.some((l) => JSON.parse(l).type === 'result'), 'the result')
  const session = await onlySession(gw)
  remote.child.stdin.end()
  assert.equal(await remote.exited, 0, remote.stderr())
  const texts = remote.lines.map((l) => JSON.parse(l)).filter((f) => f.type === 'assistant').map((f) => f.message.content[0].text)
  assert.deepEqual(texts, Array.from({ length: 80 }, (_, i) => `slow #${i}`), 'every assistant line once, in order')
  assert.deepEqual(remote.lines, await cliLinesInHistory(gw, session.id))
}

test('cut off repeatedly while the CLI prints (memory store): stdout is the CLI\'s lines, in order, none lost or doubled', async (t) => {
  await cutRepeatedly(t, {})
})

test('cut off repeatedly while the CLI prints (Redis store): stdout is the CLI\'s lines, in order, none lost or doubled', async (t) => {
  const prefix = `cgw-test:${randomUUID()}:`
  t.after(() => deleteKeys(REDIS_URL, prefix))
  await cutRepeatedly(t, { env: { REDIS_URL, REDIS_PREFIX: prefix } })
})
