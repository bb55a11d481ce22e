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
import type { ClientPort } from '../../src/session/audience.js'
import { routerPair, settle } from '../support/router-pair.js'

it('an owner waking from a pause keeps the clients whose heartbeats wait in its inbox', async (t) => {
  t.mock.timers.enable({ apis: ['setInterval', 'Date'], now: 1_000_000 })
  const attached: string[] = []
  const detached: string[] = []
  const { b, hold, release, close } = await routerPair({
    attachRemote (port: ClientPort) { attached.push(port.id) },
    detach (port: ClientPort) { detached.push(port.id) }
  })
  try {
    b.attach('a', 's1', { id: 'client-1', send () {} }, 'controller')
    await settle()
    assert.deepEqual(attached, ['client-1'])
    // A is paused for five heartbeats; B goes on repeating the attachment, into A's inbox.
    hold('a')
    t.mock.timers.setTime(1_000_000 + 5000)
    b.attach('a', 's1', { id: 'client-1', send () {} }, 'controller')
    // A wakes: its timers first, then its inbox.
    t.mock.timers.tick(1)
    release('a')
    await settle()
    assert.deepEqual(detached, [], 'the client of a live node was not forgotten')
    assert.deepEqual(attached, ['client-1'], 'nor attached anew (a controller attaching takes the session)')
  } finally {
    await close()
  }
})
