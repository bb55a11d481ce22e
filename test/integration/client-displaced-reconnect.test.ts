/**
 * The typed client (src/client) against a real gateway with the fake CLI:
 * a controller displaced by a newer one (the user moved from laptop to
 * phone) whose socket is cut (a Wi-Fi blip, not a close) must not take the
 * session back when it reconnects; it waits as the next in line. One that
 * held the session when its link dropped takes it back, as before. The
 * client's sockets are reached through the WebSocket constructor it is
 * given (a subclass that records what it builds). With two nodes the
 * reconnecting client's node does not run the CLI: the rule must reach the
 * node that does.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it, type TestContext } from 'node:test'
import WebSocket from 'ws'
import { GatewayClient, type SessionConnection, type WebSocketCtor } from '../../src/client/index.js'
import { ClientRecorder } from '../support/client-recorder.js'
import { TOKEN_A, type TestGateway, gateway } from '../support/gateway.js'
import { type GatewayNode, type GatewayNodes, startNodes } from '../support/gateway-nodes.js'
import { REDIS_URL } from '../support/redis-server.js'
import { LIMITS } from '../support/sessions.js'
import { trackedWebSocket } from '../support/tracked-websocket.js'

type Frame = Record<string, any>

/** One device: its connection, what it saw, and a way to cut its network. */
class Device extends ClientRecorder {
  constructor (conn: SessionConnection, readonly built: WebSocket[], name: string) {
    super(conn, name)
  }

  get holds (): boolean { return this.conn.role === 'controller' && this.conn.holder === this.conn.clientId }

  /** The network drops the socket: no close frame, the client reconnects by itself; resolves with the new hello. */
  async cut (what = 'reconnected'): Promise<Frame> {
    const hellos = this.hellos.length
    const socket = this.built.at(-1)
    assert.equal(socket?.readyState, WebSocket.OPEN, `${this.name}'s socket is open`)
    socket.terminate()
    await this.until(() => this.hellos.length > hellos && this.conn.state === 'open', what)
    return this.hellos.at(-1) as Frame
  }

  /** Sends a message and waits for its turn's result (it reached the CLI) or a not_holder refusal. */
  async say (text: string): Promise<'echoed' | 'not_holder'> {
    const from = this.messages.length
    this.conn.send(text)
    return await this.until(() => {
      if (this.frames.some((f) => (f as Frame).type === 'result' && (f as Frame).result === `Echo: ${text}`)) return 'echoed' as const
      if (this.messages.slice(from).some((m) => m.type === 'gateway' && m.subtype === 'error' && m.code === 'not_holder')) return 'not_holder' as const
      return undefined
    }, `the answer to ${JSON.stringify(text)}`)
  }
}

async function setup (t: TestContext): Promise<{ gw: TestGateway, id: string }> {
  const gw = await gateway(t, { env: LIMITS })
  const client = new GatewayClient({ url: gw.url, token: TOKEN_A, WebSocket: WebSocket as unknown as WebSocketCtor })
  const { id } = await client.createSession()
  t.after(() => client.stopSession(id).catch(() => {}))
  return { gw, id }
}

const stdinTexts = (gw: TestGateway, id: string): string[] =>
  gw.stdinLines(id).filter((l) => l.type === 'user').map((l) => String(l.message?.content))

/** Laptop holds, phone takes over; returns both once each knows it. */
async function laptopThenPhone (t: TestContext, gw: TestGateway, id: string): Promise<{ laptop: Device, phone: Device }> {
  return await devices(t, gw.url, gw.url, id)
}

/** A device connecting to `url`, closed when the test ends. */
function device (t: TestContext, url: string, id: string, name: string): Device {
  const { ctor, built } = trackedWebSocket()
  const client = new GatewayClient({ url, token: TOKEN_A, WebSocket: ctor })
  const conn = client.connect(id, { reconnect: { initialMs: 5, maxMs: 20 } })
  t.after(() => conn.close())
  return new Device(conn, built, name)
}

async function devices (t: TestContext, laptopUrl: string, phoneUrl: string, id: string): Promise<{ laptop: Device, phone: Device }> {
  const laptop = device(t, laptopUrl, id, 'laptop')
  await laptop.until(() => laptop.conn.state === 'open' && laptop.holds, 'holds')
  const phone = device(t, phoneUrl, id, 'phone')
  await phone.until(() => phone.conn.state === 'open' && phone.holds, 'holds')
  await laptop.until(() => laptop.conn.role === 'observer' && laptop.conn.holder === phone.conn.clientId, 'displaced by the phone')
  return { laptop, phone }
}

describe('client: a displaced controller reconnecting', () => {
  it('a laptop displaced by the phone whose socket is cut comes back as observer and next in line; the phone keeps the session; the laptop holds once the phone leaves', async (t) => {
    const { gw, id } = await setup(t)
    const { laptop, phone } = await laptopThenPhone(t, gw, id)

    const hello = await laptop.cut()
    assert.deepEqual({ role: hello.role, holder: hello.holder }, { role: 'observer', holder: phone.conn.clientId }, 'the reconnected laptop does not take the session')

    // The phone still holds: its message reaches the CLI, the laptop's is refused.
    assert.equal(await phone.say('from the phone'), 'echoed')
    assert.equal(await laptop.say('from the laptop'), 'not_holder')
    assert.ok(phone.holds, 'the phone was never told it lost the session')
    assert.deepEqual(stdinTexts(gw, id), ['from the phone'])

    // Next in line: the phone leaving hands the session to the laptop.
    phone.conn.close()
    await laptop.until(() => laptop.holds, 'holds after the phone left')
    assert.equal(await laptop.say('laptop again'), 'echoed')
    assert.deepEqual(stdinTexts(gw, id), ['from the phone', 'laptop again'])
  })

  it('an observer-by-displacement that reconnects twice stays an observer; takeOver() still takes the session', async (t) => {
    const { gw, id } = await setup(t)
    const { laptop, phone } = await laptopThenPhone(t, gw, id)
    for (let i = 0; i < 2; i++) {
      assert.equal((await laptop.cut(`reconnected (${i + 1})`)).role, 'observer')
    }
    laptop.conn.takeOver()
    await laptop.until(() => laptop.holds, 'holds after takeOver')
    await phone.until(() => phone.conn.role === 'observer' && phone.conn.holder === laptop.conn.clientId, 'displaced by the take-over')
    assert.equal(await laptop.say('taken over'), 'echoed')
  })

  it('the holder whose socket is cut takes the session back (it was the newest controller), from a client displaced earlier that held it meanwhile', async (t) => {
    const { gw, id } = await setup(t)
    const { laptop, phone } = await laptopThenPhone(t, gw, id)
    // While the phone is away the laptop is next in line and holds; the phone, back, takes it again.
    const hello = await phone.cut()
    assert.deepEqual({ role: hello.role, holder: hello.holder }, { role: 'controller', holder: phone.conn.clientId })
    await laptop.until(() => laptop.conn.role === 'observer' && laptop.conn.holder === phone.conn.clientId, 'displaced again')
    assert.equal(await phone.say('phone back'), 'echoed')
  })
})

describe('client: a displaced controller reconnecting to a node that does not run the CLI', { timeout: 60_000 }, () => {
  let cluster: GatewayNodes
  before(async () => { cluster = await startNodes({ count: 2, redisUrl: REDIS_URL, concurrent: true }) })
  after(async () => { await cluster.close() })

  it('the node running the CLI keeps the phone as holder and the laptop next in line', async (t) => {
    const [a, b] = cluster.nodes as [GatewayNode, GatewayNode]
    const { id } = await a.create()
    // The laptop on node B (it follows the log), the phone on node A (it runs the CLI).
    const { laptop, phone } = await devices(t, b.url, a.url, id)

    const hello = await laptop.cut()
    // B's hello cannot know the holder; A's word on it follows.
    const helloAt = laptop.messages.lastIndexOf(hello)
    const word = await laptop.until(() => laptop.messages.slice(helloAt).find((m) => m.type === 'gateway' && m.subtype === 'holder'), 'node A\'s holder frame')
    assert.deepEqual({ role: word.role, holder: word.holder }, { role: 'observer', holder: phone.conn.clientId }, 'the reconnected laptop does not take the session')
    assert.equal((await a.session(id)).body.holder, phone.conn.clientId)

    assert.equal(await phone.say('from the phone'), 'echoed')
    assert.equal(await laptop.say('from the laptop'), 'not_holder')
    assert.ok(phone.holds, 'the phone was never told it lost the session')

    phone.conn.close()
    await laptop.until(() => laptop.holds, 'holds after the phone left')
    assert.equal(await laptop.say('laptop again'), 'echoed')
  })
})
