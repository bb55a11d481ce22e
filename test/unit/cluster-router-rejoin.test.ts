/**
 * ClusterRouter (src/cluster/router.ts) carries a client's rejoin to the
 * owner: a client routed to a new owner after its session moved did not just
 * attach, so as a controller it must not take the session from the client
 * holding it there (Session.attachRemote's `rejoin`). Every message of such a
 * client says so, because the owner may first meet it in a heartbeat (its
 * attach lost, or the client forgotten). Routers on an in-process bus, on the
 * test's clock.
 */
import assert from 'node:assert/strict'
import { it } from 'node:test'
import { pino } from 'pino'
import { ClusterRouter, type RoutedSession } from '../../src/cluster/router.js'
import type { ClientPort, Role } from '../../src/session/audience.js'
import type { NodeBus } from '../../src/store/store.js'

/** Lets every queued bus message be delivered. */
async function settle (): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve))
}

it('a rejoining client is attached to the owner as rejoining, also when the owner meets it first in a heartbeat', async (t) => {
  t.mock.timers.enable({ apis: ['setInterval', 'Date'], now: 1_000_000 })
  const inboxes = new Map<string, (message: string) => void>()
  const bus: NodeBus = {
    start: async (node, on) => { inboxes.set(node, on) },
    send: async (node, message) => { queueMicrotask(() => inboxes.get(node)?.(message)) },
    close: async () => {}
  }
  const attached: Array<[string, Role, boolean]> = []
  const owned: RoutedSession = {
    owned: true,
    attachRemote (port: ClientPort, role: Role, options?: { rejoin?: boolean }) { attached.push([port.id, role, options?.rejoin === true]) },
    detach () {},
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
    b.attach('a', 's1', { id: 'moved-client', send () {} }, 'controller', { rejoin: true })
    b.attach('a', 's1', { id: 'new-client', send () {} }, 'controller')
    await settle()
    assert.deepEqual(attached, [['moved-client', 'controller', true], ['new-client', 'controller', false]])
    // The owner forgets its remote clients (as when it stops owning); the next heartbeat attaches them again.
    a.dropRemote('s1')
    t.mock.timers.tick(1000)
    await settle()
    assert.deepEqual(attached.slice(2).sort(), [['moved-client', 'controller', true], ['new-client', 'controller', false]])
  } finally {
    await a.close()
    await b.close()
  }
})
