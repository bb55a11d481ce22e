/**
 * Settings of the operator's webhooks, and the webhook part of the Config
 * they make (a URL without a secret is refused here). One group of
 * settings.ts's schema, kept apart to keep each file small.
 */
import { z } from 'zod'
import { type WebhookEventType, WEBHOOK_EVENT_TYPES } from '../webhooks/webhook-event-types.js'
import { defaulted, optional } from './setting-docs.js'
import { int, listOf, secret } from './setting-rules.js'

/** Environment variable → rule, default and meaning. */
export const webhookSettings = {
  WEBHOOK_URL: optional(z.string().refine(isWebhookUrl, 'must be an http:// or https:// URL'), '(unset: no webhooks)',
    'an `http(s)://` URL that gets a signed POST for each session event (docs/WEBHOOKS.md); needs `WEBHOOK_SECRET`', true),
  WEBHOOK_SECRET: optional(secret(), '(none; required with `WEBHOOK_URL`)',
    'key (≥ 32 characters) of the HMAC-SHA256 in each webhook\'s `Webhook-Signature` header', true),
  WEBHOOK_EVENTS: defaulted(listOf(new RegExp(`^(${WEBHOOK_EVENT_TYPES.join('|').replaceAll('.', '\\.')})$`), `event types among ${WEBHOOK_EVENT_TYPES.join(', ')}`),
    WEBHOOK_EVENT_TYPES.join(','), 'event types sent to `WEBHOOK_URL`'),
  WEBHOOK_TIMEOUT_MS: defaulted(int(100, 600_000), 10_000, 'one webhook attempt (connect, send, answer headers) is abandoned after this and retried'),
  WEBHOOK_MAX_ATTEMPTS: defaulted(int(1, 100), 8, 'attempts per webhook (the first included) on network errors, timeouts, 408, 429 and 5xx; other answers are never retried'),
  WEBHOOK_RETRY_BASE_MS: defaulted(int(1, 3_600_000), 1_000, 'delay before the first retry, doubled for each further one (with jitter: each delay is between half and all of it)'),
  WEBHOOK_RETRY_MAX_MS: defaulted(int(1, 86_400_000), 60_000, 'longest delay between attempts, a receiver\'s `Retry-After` included'),
  WEBHOOK_CONCURRENCY: defaulted(int(1, 256), 4, 'webhook requests in flight at once (one at a time per session, in order)'),
  WEBHOOK_QUEUE_MAX: defaulted(int(1), 10_000, 'webhooks waiting to be sent or retried; past it the oldest is dropped (logged and counted)')
}

/**
 * The webhook settings, or null without WEBHOOK_URL. A URL without a secret
 * is refused here rather than among loadConfig's start-up rules: the
 * receiver could not tell our POSTs from anyone's, so it never starts.
 */
export function webhookConfig (e: z.output<z.ZodObject<typeof webhookSettings>>, ctx: z.core.$RefinementCtx) {
  if (e.WEBHOOK_URL === undefined) return null
  if (e.WEBHOOK_SECRET === undefined) {
    ctx.addIssue({ code: 'custom', path: ['WEBHOOK_SECRET'], message: 'required when WEBHOOK_URL is set (or WEBHOOK_SECRET_FILE)' })
    return null
  }
  return {
    url: e.WEBHOOK_URL,
    secret: e.WEBHOOK_SECRET,
    events: e.WEBHOOK_EVENTS as WebhookEventType[],
    timeoutMs: e.WEBHOOK_TIMEOUT_MS,
    maxAttempts: e.WEBHOOK_MAX_ATTEMPTS,
    retryBaseMs: e.WEBHOOK_RETRY_BASE_MS,
    retryMaxMs: e.WEBHOOK_RETRY_MAX_MS,
    concurrency: e.WEBHOOK_CONCURRENCY,
    queueMax: e.WEBHOOK_QUEUE_MAX
  }
}

/** An absolute http: or https: URL (it may hold credentials: it is never logged whole). */
function isWebhookUrl (text: string): boolean {
  try {
    const url = new URL(text)
    return url.protocol === 'http:' || url.protocol === 'https:'
  } catch {
    return false
  }
}
