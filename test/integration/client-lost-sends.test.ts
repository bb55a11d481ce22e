/**
 * The typed client's outbox against a real gateway behind a TCP forwarder
 * that loses what the client sent as the connection dies (or delivers it and
 * cuts the answer off): a control request, a permission answer and a user
 * message each reach the CLI exactly once after the reconnect.
 */
import assert from 'node:assert/strict'
import { describe, it, type TestContext } from 'node:test'
import WebSocket from 'ws'
import { GatewayClient, type SessionConnection, type WebSocketCtor } from '../../src/client/index.js'
import { ClientRecorder } from '../support/client-recorder.js'
import { startForwarder, type Forwarder } from '../support/forwarder.js'
import { TOKEN_A, type TestGateway, eventually, gateway } from '../support/gateway.js'
import { LIMITS } from '../support/sessions.js'
import { within } from '../support/waiters.js'

type Frame = Record<string, any>

async function setup (t: TestContext): Promise<{ gw: TestGateway, fwd: Forwarder, id: string, conn: SessionConnection, rec: ClientRecorder }> {
  const gw = await gateway(t, { env: LIMITS })
  const fwd = await startForwarder(gw.url)
  t.after(() => fwd.close())
  const client = new GatewayClient({ url: fwd.url, token: TOKEN_A, WebSocket: WebSocket as unknown as WebSocketCtor })
  const { id } = await client.createSession()
  t.after(() => client.stopSession(id).catch(() => {}))
  const conn = client.connect(id, { reconnect: { initialMs: 5, maxMs: 20 } })
  t.after(() => conn.close())
  const rec = new ClientRecorder(conn)
  await rec.until(() => conn.state === 'open', 'open')
  return { gw, fwd, id, conn, rec }
}

const isPrompt = (f: Frame): boolean => f.type === 'control_request' && f.request?.subtype === 'can_use_tool'

describe('client: sends lost with their connection', () => {
  for (const how of ['drop', 'deliver'] as const) {
    it(`a control request (${how}): resolves after the reconnect, the CLI reads it once`, async (t) => {
      const { gw, fwd, id, conn, rec } = await setup(t)
      fwd.cutNext(how)
      await within(conn.setModel('opus'), 15_000, 'set_model to resolve')
      assert.ok(rec.hellos.length >= 2, 'reconnected')
      const lines = (): Frame[] => gw.stdinLines(id).filter((l) => l.type === 'control_request' && l.request?.subtype === 'set_model')
      await eventually(() => lines().length >= 1)
      conn.send('after')
      await rec.until(() => rec.frames.some((f) => f.type === 'result' && (f as Frame).result === 'Echo: after'), 'the echo')
      assert.equal(lines().length, 1)
      assert.deepEqual(rec.errors, [])
    })

    it(`a user message (${how}): reaches the CLI once after the reconnect`, async (t) => {
      const { gw, fwd, id, conn, rec } = await setup(t)
      fwd.cutNext(how)
      const uuid = conn.send('lost or not')
      await rec.until(() => rec.frames.some((f) => f.type === 'result' && (f as Frame).result === 'Echo: lost or not'), 'the echo')
      conn.send('after')
      await rec.until(() => rec.frames.some((f) => f.type === 'result' && (f as Frame).result === 'Echo: after'), 'the second echo')
      assert.equal(gw.stdinLines(id).filter((l) => l.type === 'user' && l.uuid === uuid).length, 1)
      assert.equal(rec.frames.filter((f) => f.type === 'gateway' && (f as Frame).subtype === 'user_message' && (f as Frame).uuid === uuid).length, 1)
      assert.deepEqual(rec.errors, [])
    })

    it(`a permission answer (${how}): reaches the CLI once after the reconnect, no error`, async (t) => {
      const { gw, fwd, id, conn, rec } = await setup(t)
      conn.send('ask Bash touch lost-answer.txt')
      const prompt = await rec.until(() => (rec.frames as Frame[]).find(isPrompt), 'the prompt')
      await rec.until(() => conn.pending.has(prompt.request_id), 'pending')
      fwd.cutNext(how)
      conn.allow(prompt.request_id)
      await rec.until(() => rec.frames.some((f) => f.type === 'result'), 'the result')
      await rec.until(() => conn.pending.size === 0, 'no prompt open')
      conn.send('after')
      await rec.until(() => rec.frames.some((f) => f.type === 'result' && (f as Frame).result === 'Echo: after'), 'the echo')
      assert.equal(gw.stdinLines(id).filter((l) => l.type === 'control_response' && l.response?.request_id === prompt.request_id).length, 1)
      assert.deepEqual(rec.errors, [])
    })
  }
})
