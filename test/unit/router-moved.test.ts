/**
 * ClusterRouter (src/cluster/router.ts) when the node a client's frames were
 * routed to turns out not to own the session: every frame comes back to the
 * client's node to be handled again, whichever `moved` reply (the attach's or
 * the frame's) arrives first. Two routers on an in-process bus.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { pino } from 'pino'
import { ClusterRouter, type RoutedSession } from '../../src/cluster/router.js'
import type { ClientFrame } from '../../src/protocol/client-frames.js'
import type { NodeBus } from '../../src/store/store.js'

/** Node inboxes delivered asynchronously and in order, as the Redis bus does. */
function memoryBus (inboxes: Map<string, (message: string) => void>): NodeBus {
  return {
    start: async (node, on) => { inboxes.set(node, on) },
    send: async (node, message) => { queueMicrotask(() => inboxes.get(node)?.(message)) },
    close: async () => {}
  }
}

/** A session object that records what the router hands back. */
function recordingSession (owned: boolean): RoutedSession & { movedBack: ClientFrame[][], handled: ClientFrame[] } {
  const movedBack: ClientFrame[][] = []
  const handled: ClientFrame[] = []
  return {
    owned,
    movedBack,
    handled,
    attachRemote () {},
    detach () {},
    handleFrame (_port, frame) { handled.push(frame) },
    remoteHolder () {},
    ownerMoved (_port, frames) { movedBack.push(frames) },
    call: async () => null
  }
}

/** Lets every queued bus message be delivered and answered. */
async function settle (): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve))
}

describe('ClusterRouter: frames sent to a node that does not own the session', () => {
  it('hands every frame back, though the attach\'s moved reply comes before the frames\'', async () => {
    const inboxes = new Map<string, (message: string) => void>()
    const onB = recordingSession(false)
    const onC = recordingSession(false) // C released the session before the client's frames came
    const logger = pino({ level: 'silent' })
    const b = new ClusterRouter({ bus: memoryBus(inboxes), node: 'b', logger, find: () => onB, heartbeatMs: 60_000 })
    const c = new ClusterRouter({ bus: memoryBus(inboxes), node: 'c', logger, find: () => onC, heartbeatMs: 60_000 })
    await b.start()
    await c.start()
    try {
      const port = { id: 'client-1', send () {} }
      const first = { type: 'user', uuid: 'u1', message: { role: 'user', content: 'one' } } as unknown as ClientFrame
      const second = { type: 'user', uuid: 'u2', message: { role: 'user', content: 'two' } } as unknown as ClientFrame
      b.attach('c', 's1', port, 'controller')
      assert.equal(b.frame(port, first), true)
      assert.equal(b.frame(port, second), true)
      await settle()
      assert.deepEqual(onC.handled, [], 'C, not the owner, ran nothing')
      assert.deepEqual(onB.movedBack.flat(), [first, second], 'both frames are handled on B again, in order, once each')
    } finally {
      await b.close()
      await c.close()
    }
  })
})
