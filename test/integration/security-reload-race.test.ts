/**
 * A WebSocket or event stream whose upgrade was authenticated just before a
 * credential reload, and listed (LiveCredentials.add) just after it, is
 * checked again against the new credentials and ended (4401, or the
 * stream's `end`): it never lives on with a revoked token. The window is
 * the route's store read (findSession on a node that does not run the
 * session); here that read waits on a gate so the reload lands inside it.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { loadConfig } from '../../src/config.js'
import { MemoryStore } from '../../src/store/memory.js'
import type { EventStore } from '../../src/store/store.js'
import { FAKE_CLI, TestClient, gateway } from '../support/gateway.js'
import { SseReader } from '../support/sse-reader.js'

const OLD = 'tenant-a-old-token-0000000001'
const NEW = 'tenant-a-new-token-0000000002'
const STORE_SECRET = 'store-secret-for-reload-race-0123456789ab'

/** A MemoryStore whose getSession waits on a gate while one is set; `held` resolves when a read is waiting. */
function gatedStore (): { store: EventStore, hold: () => Promise<void>, open: () => void } {
  const inner = new MemoryStore({ retention: { maxEventsPerSession: 10_000, ttlSecondsAfterEnd: 3600 } })
  let gate: Promise<void> | null = null
  let openGate: () => void = () => {}
  let onHeld: (() => void) | null = null
  const store = new Proxy(inner, {
    get (target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver)
      if (prop === 'getSession') {
        return async (id: string) => {
          if (gate !== null) { onHeld?.(); await gate }
          return await (value as (id: string) => Promise<unknown>).call(target, id)
        }
      }
      return typeof value === 'function' ? value.bind(target) : value
    }
  }) as unknown as EventStore
  return {
    store,
    hold: () => {
      gate = new Promise((resolve) => { openGate = () => { gate = null; resolve() } })
      return new Promise((resolve) => { onHeld = () => { onHeld = null; resolve() } })
    },
    open: () => { openGate() }
  }
}

function env (dataDir: string, tokens: string, node = 'node-b'): Record<string, string> {
  return {
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'silent',
    DATA_DIR: dataDir,
    CLAUDE_BIN: FAKE_CLI,
    GATEWAY_TOKENS: tokens,
    STORE_SECRET,
    NODE_ID: node,
    SANDBOX: 'none',
    ALLOW_UNSANDBOXED: 'true',
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? ''
  }
}

describe('a credential reload during an upgrade', { timeout: 60_000 }, () => {
  it('a WebSocket authenticated with a token just before a reload that revokes it is still ended', async (t) => {
    const gated = gatedStore()
    // Two nodes on one store: the session runs on node a; node b has it unloaded, so the upgrade's
    // findSession reads the store (as on any node other than the one running it).
    const first = await gateway(t, { env: { GATEWAY_TOKENS: `${OLD}=tenant-a`, STORE_SECRET, NODE_ID: 'node-a' }, parts: { store: gated.store } })
    const { id } = await first.createSession({}, OLD)
    const gw = await gateway(t, { env: { GATEWAY_TOKENS: `${OLD}=tenant-a`, STORE_SECRET, NODE_ID: 'node-b' }, parts: { store: gated.store } })

    const held = gated.hold()
    const opening = TestClient.open(`${gw.wsUrl}/v1/sessions/${id}/ws?role=observer`, { authorization: `Bearer ${OLD}` })
    await held // authenticated with OLD (onRequest), now in the preHandler's store read
    const reloaded = await gw.app.gateway.reloadCredentials(loadConfig(env(gw.dataDir, `${NEW}=tenant-a`)))
    assert.equal(reloaded.ended, 0)
    gated.open()
    const client = await opening
    t.after(() => { client.terminate() })

    // The old token is refused for everything from now on ...
    assert.equal((await gw.request('GET', '/v1/sessions', undefined, OLD)).status, 401)
    // ... so the socket it opened does not live on (ended before or after its hello: on a node that does not
    // run the session, the hello waits for a read of which prompts are open, and the check may come first).
    assert.equal(await client.waitClose(10_000), 4401, 'the WebSocket opened with the revoked token is closed though listed after the reload\'s pass')
  })

  it('an event stream authenticated with a token just before a reload that revokes it is still ended', async (t) => {
    const gated = gatedStore()
    const first = await gateway(t, { env: { GATEWAY_TOKENS: `${OLD}=tenant-a`, STORE_SECRET, NODE_ID: 'node-a' }, parts: { store: gated.store } })
    const { id } = await first.createSession({}, OLD)
    const gw = await gateway(t, { env: { GATEWAY_TOKENS: `${OLD}=tenant-a`, STORE_SECRET, NODE_ID: 'node-b' }, parts: { store: gated.store } })

    const held = gated.hold()
    const opening = SseReader.open(`${gw.url}/v1/sessions/${id}/events/stream`, { authorization: `Bearer ${OLD}` })
    await held
    await gw.app.gateway.reloadCredentials(loadConfig(env(gw.dataDir, `${NEW}=tenant-a`)))
    gated.open()
    const stream = await opening
    t.after(() => { stream.close() })
    assert.equal(stream.status, 200)
    const end = await stream.until(() => stream.events.find((e) => e.event === 'end'), 10_000, 'the end event of the stream opened with the revoked token')
    assert.equal(JSON.parse(end.data).reason, 'credential_revoked')
  })
})
