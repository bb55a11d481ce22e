/**
 * The webhook event types, once: the settings schema (WEBHOOK_EVENTS) and
 * the notifier both read them, and docs/WEBHOOKS.md documents each.
 */

export const WEBHOOK_EVENT_TYPES = ['permission.requested', 'permission.resolved', 'turn.finished', 'session.ended'] as const

export type WebhookEventType = typeof WEBHOOK_EVENT_TYPES[number]
