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
import type { ClientPort, Role } from '../../src/session/audience.js'
import { routerPair, settle } from '../support/router-pair.js'

it('a rejoining client is attached to the owner as rejoining, also when the owner meets it first in a heartbeat', async (t) => {
  t.mock.timers.enable({ apis: ['setInterval', 'Date'], now: 1_000_000 })
  const attached: Array<[string, Role, boolean]> = []
  const { a, b, close } = await routerPair({
    attachRemote (port: ClientPort, role: Role, options?: { rejoin?: boolean }) { attached.push([port.id, role, options?.rejoin === true]) }
  })
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
    await close()
  }
})
