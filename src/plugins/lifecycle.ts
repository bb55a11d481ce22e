/**
 * The order the gateway's parts start in once the app is ready and stop in
 * when it closes, each step beside the reason for its place. Apart from
 * app.ts, which builds the parts: the order is a concern of its own and
 * easy to break when it is read among the construction.
 */
import type { Server } from 'node:http'
import type { FastifyInstance } from 'fastify'
import type { Logger } from 'pino'
import { reapOrphans } from '../cli/reaper.js'
import type { Spawner } from '../cli/spawner.js'
import type { Placement } from '../cluster/placement.js'
import type { ClusterRouter } from '../cluster/router.js'
import type { Config } from '../config.js'
import type { GatewayLimits } from '../limits/gateway-limits.js'
import type { Metrics } from '../metrics/metrics.js'
import { listenMetrics } from '../metrics/metrics-server.js'
import type { GatewaySandbox } from '../sandbox/gateway-sandbox.js'
import type { SessionManager } from '../session/session-manager.js'
import type { EventStore } from '../store/store.js'
import type { OutboxSweep } from '../webhooks/outbox-sweep.js'
import type { WebhookNotifier } from '../webhooks/webhook-notifier.js'

export interface LifecycleParts {
  limits: GatewayLimits
  spawner: Spawner | undefined
  sandbox: GatewaySandbox
  metrics: Metrics
  router: ClusterRouter
  placement: Placement
  webhooks: WebhookNotifier | null
  outboxSweep: OutboxSweep | null
  manager: SessionManager
  store: EventStore
  /** Whether the app chose the store (else a caller passed it in and closes it). */
  ownsStore: boolean
  /** Where CLIs' pid files are: those a previous gateway process left are ended at start. */
  pidDir: string
  logger: Logger
}

/** Adds the onReady and onClose hooks that start and stop `parts`. */
export function lifecycleHooks (app: FastifyInstance, config: Config, parts: LifecycleParts): void {
  const { limits, spawner, sandbox, metrics, router, placement, webhooks, outboxSweep, manager, store, logger } = parts
  const { metricsPort, metricsToken } = config
  let metricsServer: Server | null = null

  app.addHook('onReady', async () => {
    await limits.start() // before the spawn helper: with cgroup v2 the gateway may move into a leaf first
    spawner?.start()
    await sandbox.start() // refuses to start when SANDBOX=bwrap cannot run here
    if (metricsPort !== 0) {
      // Beyond loopback loadConfig requires METRICS_TOKEN for this listener.
      metricsServer = await listenMetrics({ host: config.host, port: metricsPort, token: metricsToken, scrape: () => metrics.scrape(), metrics })
    }
    await router.start()
    await placement.start()
    await outboxSweep?.start() // after placement's first report: listed itself before it judges which nodes are gone
    const reaped = await reapOrphans(parts.pidDir, config.cliStopTimeoutMs)
    if (reaped.length > 0) logger.warn({ pids: reaped }, 'ended CLIs left running by a previous gateway process')
    try {
      const recovered = await manager.recover()
      if (recovered > 0) logger.warn({ recovered }, 'sessions left running by a gateway node that is gone marked stopped')
    } catch (err) {
      logger.error({ err }, 'could not recover sessions from the store')
    }
    // Nodes die at any time, not only before a start: each node looks for lapsed leases.
    manager.startSweeping(config.sessionLeaseMs)
  })

  app.addHook('onClose', async () => {
    metricsServer?.closeAllConnections()
    metricsServer?.close()
    await outboxSweep?.close()
    await placement.drain() // no creates placed here any more; still listed, so its webhook outbox is not taken over while it sends
    await manager.shutdown(config.shutdownGraceMs)
    await webhooks?.close() // after the sessions' stops, so their session.ended get their chance; what is left stays kept
    await placement.close() // gone for the other nodes: they take over what its webhooks left
    await router.close()
    await spawner?.close() // after the sessions' stops: it reports their CLIs' exits
    await limits.close() // their cgroups emptied and removed
    sandbox.close()
    if (parts.ownsStore) await store.close()
  })
}
