/**
 * ClusterRouter (src/cluster/router.ts) when the node a client's frames were
 * routed to turns out not to own the session: every frame comes back to the
 * client's node to be handled again, whichever `moved` reply (the attach's or
 * the frame's) arrives first, and once only: the later replies of that node
 * do not hand back the frames sent to the real owner since. A user message
 * leaves with a uuid, so the copy handed back after an owner died is known
 * by it. Routers on an in-process bus.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { pino } from 'pino'
import { ClusterRouter, type RoutedSession } from '../../src/cluster/router.js'
import type { ClientFrame } from '../../src/protocol/client-frames.js'
import type { NodeBus } from '../../src/store/store.js'
import { within } from '../support/waiters.js'

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

/** A session not owned here, and a promise settled when the router first hands frames back to it. */
function awaitingMovedBack (): { session: ReturnType<typeof recordingSession>, movedBack: Promise<void> } {
  const recorded = recordingSession(false)
  let cameBack: () => void = () => {}
  const movedBack = new Promise<void>((resolve) => { cameBack = resolve })
  return { session: { ...recorded, ownerMoved (port, frames) { recorded.ownerMoved(port, frames); cameBack() } }, movedBack }
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

  it('hands each frame back once: later moved replies leave the frames re-sent to the owner alone', async () => {
    const inboxes = new Map<string, (message: string) => void>()
    const logger = pino({ level: 'silent' })
    const onC = recordingSession(false) // C lost the session
    const onD = recordingSession(true) // D owns it now
    let b: ClusterRouter | null = null
    // B's session, told the owner moved, learns that D owns it and sends the frames there at once.
    const onB: RoutedSession & { movedBack: ClientFrame[][] } = {
      ...recordingSession(false),
      ownerMoved (port, frames) {
        onB.movedBack.push(frames)
        b?.attach('d', 's1', port, 'controller')
        for (const frame of frames) b?.frame(port, frame)
      }
    }
    b = new ClusterRouter({ bus: memoryBus(inboxes), node: 'b', logger, find: () => onB, heartbeatMs: 60_000 })
    const c = new ClusterRouter({ bus: memoryBus(inboxes), node: 'c', logger, find: () => onC, heartbeatMs: 60_000 })
    const d = new ClusterRouter({ bus: memoryBus(inboxes), node: 'd', logger, find: () => onD, heartbeatMs: 60_000 })
    await Promise.all([b.start(), c.start(), d.start()])
    try {
      const port = { id: 'client-1', send () {} }
      const frames = ['one', 'two', 'three'].map((text, i) => ({ type: 'user', uuid: `u${i}`, message: { role: 'user', content: text } }) as unknown as ClientFrame)
      b.attach('c', 's1', port, 'controller')
      for (const frame of frames) assert.equal(b.frame(port, frame), true)
      await settle()
      assert.deepEqual(onC.handled, [], 'C, not the owner, ran nothing')
      assert.deepEqual(onD.handled, frames, 'D ran each frame once, in order')
      assert.deepEqual(onB.movedBack.flat(), frames, 'each frame came back to B once')
      // D confirmed them all: nothing is left to hand back, however late C's replies come.
      assert.deepEqual(b.unroute(port), [])
    } finally {
      await Promise.all([b.close(), c.close(), d.close()])
    }
  })

  it('an ack from the node a client was re-routed to does not confirm a frame sent to the node before it', async () => {
    const inboxes = new Map<string, (message: string) => void>()
    const logger = pino({ level: 'silent' })
    const { session: onB, movedBack } = awaitingMovedBack()
    const onD = recordingSession(true)
    // C died: it never answers. B learns (as its follower does from the store) that D owns the session now.
    const b = new ClusterRouter({ bus: memoryBus(inboxes), node: 'b', logger, find: () => onB, heartbeatMs: 20 })
    const d = new ClusterRouter({ bus: memoryBus(inboxes), node: 'd', logger, find: () => onD, heartbeatMs: 60_000 })
    await Promise.all([b.start(), d.start()])
    try {
      const port = { id: 'client-1', send () {} }
      const [first, second] = ['one', 'two'].map((text, i) => ({ type: 'user', uuid: `u${i}`, message: { role: 'user', content: text } }) as unknown as ClientFrame)
      b.attach('c', 's1', port, 'controller')
      b.frame(port, first as ClientFrame)
      b.attach('d', 's1', port, 'controller')
      b.frame(port, second as ClientFrame)
      await settle()
      assert.deepEqual(onD.handled, [second], 'D ran the frame sent to it')
      // D's ack confirmed its own frame only: the one C never answered comes back after three heartbeats.
      // (The router's heartbeat timer does not hold the event loop open; within's deadline does.)
      await within(movedBack, 5000, 'the unconfirmed frame to come back')
      assert.deepEqual(onB.movedBack, [[first]])
    } finally {
      await Promise.all([b.close(), d.close()])
    }
  })

  it('gives a user message without a uuid one before it leaves: the copy handed back after an owner died unconfirmed is the message the owner ran', async () => {
    const inboxes = new Map<string, (message: string) => void>()
    const logger = pino({ level: 'silent' })
    const { session: onB, movedBack } = awaitingMovedBack()
    const onC = recordingSession(true)
    // C runs the message and dies before its ack leaves: B never hears from it again.
    const bus = memoryBus(inboxes)
    const toB = (m: string): boolean => !m.includes('"k":"ack"')
    const lossy: NodeBus = { ...bus, send: async (node, message) => { if (node !== 'b' || toB(message)) await bus.send(node, message) } }
    const b = new ClusterRouter({ bus: lossy, node: 'b', logger, find: () => onB, heartbeatMs: 20 })
    const c = new ClusterRouter({ bus: lossy, node: 'c', logger, find: () => onC, heartbeatMs: 60_000 })
    await Promise.all([b.start(), c.start()])
    try {
      const port = { id: 'client-1', send () {} }
      const withUuid = { type: 'user', uuid: 'client-chosen', message: { role: 'user', content: 'one' } } as unknown as ClientFrame
      const without = { type: 'user', message: { role: 'user', content: 'two' } } as unknown as ClientFrame
      const answer = { type: 'control_response', response: { subtype: 'success', request_id: 'r1', response: { behavior: 'allow' } } } as unknown as ClientFrame
      b.attach('c', 's1', port, 'controller')
      for (const frame of [withUuid, without, answer]) b.frame(port, frame)
      await settle()
      await within(movedBack, 5000, 'the unconfirmed frames to come back')
      const [one, two, three] = onC.handled as unknown as [Record<string, unknown>, Record<string, unknown>, Record<string, unknown>]
      assert.equal(one.uuid, 'client-chosen', 'a uuid the client chose is kept')
      assert.match(String(two.uuid), /^[0-9a-f-]{36}$/, 'the message without one got one')
      assert.deepEqual({ ...two, uuid: undefined }, { ...without, uuid: undefined }, 'and nothing else changed')
      assert.deepEqual(three, answer, 'other frames go as they are')
      assert.deepEqual(onB.movedBack, [[one, two, three]], 'handed back as the owner ran them, uuids and all')
    } finally {
      await Promise.all([b.close(), c.close()])
    }
  })
})
