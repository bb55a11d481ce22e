/**
 * Two ClusterRouters (src/cluster/router.ts) on an in-process bus, for the
 * router's unit tests: node `a` owns the session, node `b` follows it. The
 * bus delivers as the Redis bus does (asynchronously, in order), and can
 * hold a node's inbox, as a paused node leaves its messages unread.
 */
import { pino } from 'pino'
import { ClusterRouter, type RoutedSession } from '../../src/cluster/router.js'
import type { NodeBus } from '../../src/store/store.js'

/** Lets every queued bus message be delivered. */
export async function settle (): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve))
}

export interface RouterPair {
  /** The owner's router: `find` gives it the session as owned. */
  a: ClusterRouter
  /** Another node's router: `find` gives it the same session, not owned. */
  b: ClusterRouter
  /** From now on, messages to `node` wait unread. */
  hold: (node: string) => void
  /** Hands `node` what waited, in order, at once (as a woken node reads its inbox), and delivers as before. */
  release: (node: string) => void
  close: () => Promise<void>
}

/** What the owner's session does with remote clients; the rest of it does nothing. */
export type SessionHooks = Partial<Pick<RoutedSession, 'attachRemote' | 'detach'>>

/** Both routers started, with a heartbeat of 1 s (on the test's clock where it mocks timers). */
export async function routerPair (hooks: SessionHooks): Promise<RouterPair> {
  const inboxes = new Map<string, (message: string) => void>()
  const held = new Map<string, string[]>()
  const bus: NodeBus = {
    start: async (node, on) => { inboxes.set(node, on) },
    send: async (node, message) => {
      const waiting = held.get(node)
      if (waiting !== undefined) waiting.push(message)
      else queueMicrotask(() => inboxes.get(node)?.(message))
    },
    close: async () => {}
  }
  const owned: RoutedSession = {
    owned: true,
    attachRemote: hooks.attachRemote ?? (() => {}),
    detach: hooks.detach ?? (() => {}),
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
  return {
    a,
    b,
    hold: (node) => { held.set(node, []) },
    release: (node) => {
      const inbox = held.get(node) ?? []
      held.delete(node)
      for (const message of inbox) inboxes.get(node)?.(message)
    },
    close: async () => {
      await a.close()
      await b.close()
    }
  }
}
