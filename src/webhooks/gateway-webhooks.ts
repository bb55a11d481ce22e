/**
 * The gateway's webhooks from the config, for app.ts: the notifier that
 * POSTs session events to WEBHOOK_URL and, when the store is Redis, the
 * outbox that keeps them there until sent and the sweep that takes over
 * what a node that stopped or died left unsent.
 */
import type { Logger } from 'pino'
import { isDeadLocalNode } from '../cluster/dead-node.js'
import type { Config } from '../config.js'
import type { EventStore } from '../store/store.js'
import { OutboxSweep } from './outbox-sweep.js'
import { WebhookNotifier } from './webhook-notifier.js'

export interface GatewayWebhooksOptions {
  /** The store as the app uses it (records signed and checked). */
  store: EventStore
  /** Whether the store outlives this node (Redis): only then are unsent webhooks kept in it. */
  durable: boolean
  logger: Logger
}

export interface GatewayWebhooks {
  /** Null without WEBHOOK_URL. */
  notifier: WebhookNotifier | null
  /** Null unless webhooks are kept in the store. */
  sweep: OutboxSweep | null
}

export function gatewayWebhooks (config: Config, { store, durable, logger }: GatewayWebhooksOptions): GatewayWebhooks {
  // Queued off the relay's path; with Redis, kept there until sent, so a node that stops or dies leaves them to another node.
  const outbox = config.webhook !== null && durable ? { store: store.outbox, node: config.nodeId } : undefined
  const webhooks = config.webhook === null ? null : new WebhookNotifier({ ...config.webhook, logger, ...(outbox === undefined ? {} : { outbox }) })
  // A Redis that answers again may have lost what it held (no persistence): what is still to send is kept again.
  if (webhooks !== null && outbox !== undefined) store.onReconnect?.(() => { webhooks.keepAgain() })
  const sweep = webhooks === null || outbox === undefined
    ? null
    : new OutboxSweep({
      outbox: outbox.store,
      node: config.nodeId,
      liveNodes: async () => (await store.listNodes()).map((n) => n.node),
      isDead: isDeadLocalNode,
      everyMs: config.sessionLeaseMs,
      onTaken: (entries, from) => { webhooks.adopt(entries, from) },
      logger
    })
  return { notifier: webhooks, sweep }
}
