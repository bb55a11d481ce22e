/**
 * ClusterRouter (src/cluster/router.ts) on an owner that was paused (SIGSTOP,
 * a VM freeze, a blocked event loop) for longer than three heartbeats: on
 * waking its timers run before it reads its inbox, where the clients of
 * other nodes' repeated attachments wait. It must not take those clients
 * for gone: forgotten, the holder among them lost the session (another
 * client was made holder, and given the pending prompts) until its next
 * heartbeat, read a moment later, made it holder again. Routers on an
 * in-process bus, on the test's clock.
 */
import assert from 'node:assert/strict'
import { it } from 'node:test'
import { pino } from 'pino'
import { ClusterRouter, type RoutedSession } from '../../src/cluster/router.js'
import type { ClientPort } from '../../src/session/audience.js'
import type { NodeBus } from '../../src/store/store.js'

/** Lets every queued bus message be delivered. */
async function settle (): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve))
}

it('an owner waking from a pause keeps the clients whose heartbeats wait in its inbox', async (t) => {
  t.mock.timers.enable({ apis: ['setInterval', 'Date'], now: 1_000_000 })
  const inboxes = new Map<string, (message: string) => void>()
  /** Messages to the paused node, delivered once it reads its inbox again. */
  let held: string[] | null = null
  const bus: NodeBus = {
    start: async (node, on) => { inboxes.set(node, on) },
    send: async (node, message) => {
      if (node === 'a' && held !== null) held.push(message)
      else queueMicrotask(() => inboxes.get(node)?.(message))
    },
    close: async () => {}
  }
  const attached: string[] = []
  const detached: string[] = []
  const owned: RoutedSession = {
    owned: true,
    attachRemote (port: ClientPort) { attached.push(port.id) },
    detach (port: ClientPort) { detached.push(port.id) },
    handleFrame () {},
    remoteHolder () {},
    ownerMoved () {},
    call: async () => null
  }
  const following: RoutedSession = { ...owned, owned: false }
  const logger = pino({ level: 'silent' })
  const a = new ClusterRouter({ bus, node: 'a', logger, find: () => owned, heartbeatMs: 1000 })
  const b = new ClusterRouter({ bus, node: 'b', logger, find: () => following, heartbeatMs: 1000 })
  await a.start()
  await b.start()
  try {
    b.attach('a', 's1', { id: 'client-1', send () {} }, 'controller')
    await settle()
    assert.deepEqual(attached, ['client-1'])
    // A is paused for five heartbeats; B goes on repeating the attachment, into A's inbox.
    held = []
    t.mock.timers.setTime(1_000_000 + 5000)
    b.attach('a', 's1', { id: 'client-1', send () {} }, 'controller')
    // A wakes: its timers first, then its inbox.
    t.mock.timers.tick(1)
    const inbox = held
    held = null
    for (const message of inbox) inboxes.get('a')?.(message)
    await settle()
    assert.deepEqual(detached, [], 'the client of a live node was not forgotten')
    assert.deepEqual(attached, ['client-1'], 'nor attached anew (a controller attaching takes the session)')
  } finally {
    await a.close()
    await b.close()
  }
})
