/**
 * A WebhookNotifier for the outbox tests: sending to a test Receiver, fast
 * retries, kept in `outbox` under `node`, closed when the test ends; and
 * the few calls those tests make of it.
 */
import type { TestContext } from 'node:test'
import pino from 'pino'
import type { OutboxEntry, WebhookOutbox } from '../../src/store/store.js'
import { WEBHOOK_EVENT_TYPES } from '../../src/webhooks/webhook-event-types.js'
import { type WebhookNotifierOptions, WebhookNotifier } from '../../src/webhooks/webhook-notifier.js'
import type { Receiver } from './webhook-receiver.js'

export const WEBHOOK_TEST_SECRET = 'whsec-unit-0123456789abcdef0123456789'

export function testNotifier (t: TestContext, receiver: Receiver, outbox: WebhookOutbox, node: string, options: Partial<WebhookNotifierOptions> = {}): WebhookNotifier {
  const n = new WebhookNotifier({
    url: `http://127.0.0.1:${receiver.port}/hook`,
    secret: WEBHOOK_TEST_SECRET,
    events: WEBHOOK_EVENT_TYPES,
    timeoutMs: 5_000,
    maxAttempts: 5,
    retryBaseMs: 20,
    retryMaxMs: 100,
    concurrency: 4,
    queueMax: 100,
    logger: pino({ level: 'silent' }),
    outbox: { store: outbox, node },
    ...options
  })
  t.after(() => n.close(100))
  return n
}

/** A turn.finished whose seq tells deliveries apart. */
export function turnFinished (n: WebhookNotifier, seq: number, session = 'sess-a'): void {
  n.turnFinished({ sessionId: session, tenant: 'tenant-a' }, { subtype: 'success', isError: false, durationMs: 5, totalCostUsd: 0.01, result: `turn ${seq}`, seq })
}

/** What `node` has kept (a takeover of itself moves nothing). */
export async function keptBy (outbox: WebhookOutbox, node: string): Promise<OutboxEntry[]> {
  return await outbox.takeOver(node, node)
}
