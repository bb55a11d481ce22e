/**
 * JWT_EXPIRY_ENDS_CONNECTIONS on a real gateway with real WebSocket and
 * event-stream clients, JWTs a few seconds from expiry: the client is told
 * its deadline after hello; at it, the WebSocket closes 4401 and the event
 * stream ends `credential_expired`, while a WebSocket that presented a newer
 * JWT (a `credential` frame) lives on and still runs turns. A credential of
 * another tenant, or no valid one, is refused and changes nothing. Off (the
 * default), a connection outlives its JWT, and a presented one is taken with
 * no deadline. Every wait is on a frame, a close or an event; none is a sleep.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { SignJWT } from 'jose'
import { isHello, isResult } from '../support/frames.js'
import { type TestClient, type TestGateway, gateway } from '../support/gateway.js'
import { SseReader } from '../support/sse-reader.js'

const JWT_SECRET = 'jwt-secret-for-tests-0123456789-abcdefghijklmnop'

/** A JWT of `tenant` expiring at `exp` (Unix seconds). */
async function jwt (tenant: string, exp: number, secret = JWT_SECRET): Promise<string> {
  return await new SignJWT({ tenant }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime(exp).sign(new TextEncoder().encode(secret))
}

const inSeconds = (s: number): number => Math.floor(Date.now() / 1000) + s

async function open (gw: TestGateway, sessionId: string, token: string, role = 'controller'): Promise<TestClient> {
  const c = await gw.connect(sessionId, `role=${role}`, token)
  await c.waitFor(isHello)
  return c
}

/** Sends a credential frame and waits for its answer: the `credential` frame or an error. */
async function present (c: TestClient, token: string): Promise<any> {
  const from = c.frames.length
  c.send({ type: 'credential', token })
  return await c.waitFor((f) => c.frames.indexOf(f) >= from && f.type === 'gateway' && (f.subtype === 'credential' || f.subtype === 'error'))
}

describe('JWT_EXPIRY_ENDS_CONNECTIONS', () => {
  it('ends a WebSocket (4401) and an event stream (credential_expired) at their JWT\'s expiry; one that presented a newer JWT lives on', async (t) => {
    const gw = await gateway(t, { env: { JWT_SECRET, JWT_EXPIRY_ENDS_CONNECTIONS: 'true' } })
    const long = await jwt('tenant-a', inSeconds(600))
    const exp = inSeconds(3)
    const short = await jwt('tenant-a', exp)
    const { id } = await gw.createSession({}, long)

    const renewed = await open(gw, id, short)
    const expiring = await open(gw, id, short, 'observer')
    const told = await expiring.waitFor((f) => f.type === 'gateway' && f.subtype === 'credential')
    assert.equal(told.expires_at, new Date(exp * 1000).toISOString(), 'told its deadline after hello')
    assert.ok(expiring.frames.indexOf(told) > expiring.frames.findIndex(isHello))
    const stream = await SseReader.open(`${gw.url}/v1/sessions/${id}/events/stream`, { authorization: `Bearer ${short}` })
    assert.equal(stream.status, 200)

    // Refused: another tenant's JWT, one signed with another key, an expired one. Nothing changes.
    for (const bad of [await jwt('tenant-b', inSeconds(600)), await jwt('tenant-a', inSeconds(600), 'another-secret-0123456789-abcdefghijklmnopq'), await jwt('tenant-a', inSeconds(-10))]) {
      const answer = await present(renewed, bad)
      assert.deepEqual([answer.subtype, answer.code], ['error', 'credential_refused'])
    }
    const newer = inSeconds(600)
    const answer = await present(renewed, await jwt('tenant-a', newer))
    assert.deepEqual(answer, { type: 'gateway', subtype: 'credential', expires_at: new Date(newer * 1000).toISOString() })

    assert.equal(await expiring.waitClose(10_000), 4401)
    assert.ok(Date.now() >= exp * 1000 - 5, 'not before its expiry')
    assert.match(expiring.closeReason ?? '', /expired/)
    const end = await stream.until(() => stream.events.find((e) => e.event === 'end'), 10_000, 'the stream\'s end')
    assert.equal(JSON.parse(end.data).reason, 'credential_expired')

    // The renewed socket outlived the old deadline: it still holds the session and runs a turn.
    renewed.sendUser('after the old expiry')
    assert.equal((await renewed.waitFor(isResult)).result, 'Echo: after the old expiry')
    assert.equal(renewed.closeCode, null)
  })

  it('off (the default): a connection outlives its JWT, and a credential presented is taken with no deadline', async (t) => {
    const gw = await gateway(t, { env: { JWT_SECRET, KEEPALIVE_INTERVAL_MS: '200' } })
    const exp = inSeconds(2)
    const short = await jwt('tenant-a', exp)
    const { id } = await gw.createSession({}, await jwt('tenant-a', inSeconds(600)))
    const c = await open(gw, id, short)
    // A keep_alive sent after the expiry is the fence: the socket was open past it.
    await c.waitFor((f) => f.type === 'keep_alive' && Date.now() > exp * 1000 + 200, 10_000)
    assert.equal(c.frames.filter((f) => f.subtype === 'credential').length, 0, 'no deadline announced')
    c.sendUser('past its expiry')
    assert.equal((await c.waitFor(isResult)).result, 'Echo: past its expiry')
    assert.deepEqual(await present(c, await jwt('tenant-a', inSeconds(600))), { type: 'gateway', subtype: 'credential', expires_at: null })
    assert.equal(c.closeCode, null)
  })
})
