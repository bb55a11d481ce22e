/**
 * The typed client against a real gateway with the fake CLI: a permission
 * answer the gateway refused (its outcome said `refused`) or found already
 * resolved is over. When the prompt is handed out again after a reconnect,
 * the client must not send that answer again by itself (a second refusal
 * the user did not cause, or an answer taking effect after it was reported
 * refused), and the prompt must stay answerable.
 */
import assert from 'node:assert/strict'
import { describe, it, type TestContext } from 'node:test'
import type WebSocket from 'ws'
import { GatewayClient, type SessionConnection } from '../../src/client/index.js'
import { ClientRecorder } from '../support/client-recorder.js'
import { TOKEN_A, type TestGateway, eventually, gateway } from '../support/gateway.js'
import { LIMITS } from '../support/sessions.js'
import { trackedWebSocket } from '../support/tracked-websocket.js'

type Frame = Record<string, any>

const isPrompt = (f: Frame): boolean => f.type === 'control_request' && f.request?.subtype === 'can_use_tool'
const answersOnStdin = (gw: TestGateway, id: string, requestId: string): Frame[] =>
  gw.stdinLines(id).filter((l) => l.type === 'control_response' && l.response?.request_id === requestId)

/** A session with one open prompt, held by a connection (left pending by onPermission). */
async function openPrompt (t: TestContext): Promise<{ gw: TestGateway, client: GatewayClient, id: string, conn: SessionConnection, rec: ClientRecorder, built: WebSocket[], prompt: Frame }> {
  const gw = await gateway(t, { env: LIMITS })
  const { ctor, built } = trackedWebSocket()
  const client = new GatewayClient({ url: gw.url, token: TOKEN_A, WebSocket: ctor })
  const { id } = await client.createSession()
  t.after(() => client.stopSession(id).catch(() => {}))
  const conn = client.connect(id, { onPermission: () => undefined, reconnect: { initialMs: 5, maxMs: 20 } })
  t.after(() => conn.close())
  const rec = new ClientRecorder(conn)
  conn.send('ask Bash touch refused-answer.txt')
  const prompt = await rec.until(() => (rec.frames as Frame[]).find(isPrompt), 'the prompt')
  await rec.until(() => conn.pending.get(prompt.request_id)?.canAnswer, 'the prompt answerable')
  return { gw, client, id, conn, rec, built, prompt }
}

/** Cuts the current socket and waits until the gateway handed the open prompt out again on the next one. */
async function reconnectAndRedeliver (rec: ClientRecorder, built: WebSocket[], requestId: string): Promise<void> {
  const hellos = rec.hellos.length
  const redelivered = rec.messages.filter((m) => m.type === 'control_request' && m.request_id === requestId).length
  built.at(-1)?.terminate()
  await rec.until(() => rec.hellos.length > hellos, 'the reconnect')
  await rec.until(() => rec.messages.filter((m) => m.type === 'control_request' && m.request_id === requestId).length > redelivered, 'the prompt handed out again')
}

describe('client: an answer the gateway refused is not sent again', () => {
  it('a refused allow is not resent when the prompt is handed out again; a later deny is taken', async (t) => {
    const { gw, id, conn, rec, built, prompt } = await openPrompt(t)
    const refused = await conn.allow(prompt.request_id, { updatedPermissions: [{ type: 'setMode', mode: 'bypassPermissions', destination: 'session' }] })
    assert.equal(refused.outcome, 'refused')
    assert.equal(rec.errors.length, 1, 'the refusal reported once')

    await reconnectAndRedeliver(rec, built, prompt.request_id)
    // A round trip on the new socket: a refusal of a resent answer would have come before its reply.
    await conn.setModel('opus')
    assert.deepEqual(rec.errors.slice(1), [], 'no second refusal for an answer the user did not send again')
    assert.equal(conn.pending.get(prompt.request_id)?.canAnswer, true)

    assert.deepEqual(await conn.deny(prompt.request_id, 'after the refusal'), { requestId: prompt.request_id, outcome: 'answered' })
    const lines = await eventually(() => { const l = answersOnStdin(gw, id, prompt.request_id); return l.length > 0 && l })
    assert.deepEqual(lines.map((l) => l.response.response.behavior), ['deny'])
  })
})
