/**
 * Answers claude-remote writes on the host's behalf (a prompt refused at
 * stdin EOF, as the CLI refuses it) are as exposed to a dying connection as
 * the host's own: lost in flight, the prompt stays pending on the gateway
 * and the turn never ends. They must be sent again after the reconnect.
 */
import assert from 'node:assert/strict'
import { createServer, connect, type Socket } from 'node:net'
import { test } from 'node:test'
import { gateway, type TestGateway } from '../support/gateway.js'
import { SDK_ARGS, WAIT_MS, onlySession, sdkInitialize, spawnRemote, userLine } from '../support/remote.js'
import { within } from '../support/waiters.js'

/** A TCP forwarder that, when told, drops the next client→gateway bytes and cuts that connection. */
async function startForwarder (gw: TestGateway): Promise<{ url: string, dropNext: () => void, dropped: () => number, close: () => Promise<void> }> {
  const target = Number(new URL(gw.url).port)
  let drop = false
  let dropped = 0
  const sockets = new Set<Socket>()
  const server = createServer((client) => {
    const upstream = connect(target, '127.0.0.1')
    for (const s of [client, upstream]) {
      sockets.add(s)
      s.on('close', () => sockets.delete(s))
      s.on('error', () => {})
    }
    client.on('data', (chunk: Buffer) => {
      if (!drop) { upstream.write(chunk); return }
      drop = false
      dropped += chunk.length
      upstream.destroy()
      client.destroy()
    })
    upstream.on('data', (chunk: Buffer) => { if (!client.destroyed) client.write(chunk) })
    client.on('end', () => upstream.end())
    upstream.on('end', () => client.end())
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('no address')
  return {
    url: `http://127.0.0.1:${address.port}`,
    dropNext: () => { drop = true },
    dropped: () => dropped,
    close: async () => {
      for (const s of sockets) s.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
}

// No keep_alive or ping from the gateway: the only bytes the forwarder sees are the ones the test makes.
const QUIET = { KEEPALIVE_INTERVAL_MS: '3600000' }

test('stdin EOF while a prompt waits, the refusal lost with the connection: sent again after the reconnect, the turn ends, exit 0', async (t) => {
  const gw = await gateway(t, { env: QUIET })
  const fwd = await startForwarder(gw)
  t.after(() => fwd.close())
  const remote = spawnRemote(gw, SDK_ARGS, { CLAUDE_REMOTE_URL: fwd.url })
  t.after(() => remote.child.kill('SIGKILL'))
  remote.write(sdkInitialize())
  remote.write(userLine('ask Bash touch lost-refusal.txt'))
  const prompt = await remote.waitLine((f) => f.type === 'control_request' && f.request.subtype === 'can_use_tool')
  const session = await onlySession(gw)

  // EOF: claude-remote refuses the prompt for the host; that line never reaches the gateway.
  fwd.dropNext()
  remote.child.stdin.end()
  assert.equal(await within(remote.exited, WAIT_MS, 'claude-remote to exit'), 0, remote.stderr())
  assert.ok(fwd.dropped() > 0)
  const answers = gw.stdinLines(session.id).filter((l) => l.type === 'control_response' && l.response.request_id === prompt.request_id)
  assert.equal(answers.length, 1)
  assert.match(answers[0].response.error, /stream closed/)
  assert.ok(remote.lines.some((l) => JSON.parse(l).type === 'result'))
})
