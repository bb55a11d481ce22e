/**
 * How a webhook is signed, and how a receiver checks it: HMAC-SHA256 with
 * WEBHOOK_SECRET over `<timestamp>.<raw body>`, hex, sent as
 * `Webhook-Signature: v1=<hex>` beside `Webhook-Timestamp` (Unix seconds).
 * The timestamp is signed with the body so a captured request cannot be
 * replayed later than the receiver's window. docs/WEBHOOKS.md documents the
 * same algorithm for receivers; `verifyWebhook` is that check, used by the
 * tests (and usable by a Node receiver as is).
 */
import { createHmac, timingSafeEqual } from 'node:crypto'

/** The headers of every webhook request (lower case, as Node's http delivers them). */
export const WEBHOOK_HEADERS = {
  id: 'webhook-id',
  timestamp: 'webhook-timestamp',
  signature: 'webhook-signature',
  attempt: 'webhook-attempt'
} as const

/** `v1=<hex HMAC-SHA256 of "<timestamp>.<body>">`. */
export function signWebhook (secret: string, timestamp: number, body: string | Buffer): string {
  return `v1=${createHmac('sha256', secret).update(`${timestamp}.`).update(body).digest('hex')}`
}

export interface VerifyInput {
  secret: string
  /** The `Webhook-Timestamp` header as received. */
  timestamp: string | undefined
  /** The `Webhook-Signature` header as received. */
  signature: string | undefined
  /** The request body exactly as received (before any JSON parsing). */
  body: string | Buffer
  /** How far the timestamp may be from now, in seconds (default 300). */
  toleranceSeconds?: number
  /** Now, in Unix seconds (default: the clock). */
  now?: number
}

/**
 * Why a webhook does not verify, or null when it does: the timestamp must be
 * within the tolerance of now, and one of the header's space-separated
 * `v1=` entries must equal the expected signature (compared in constant
 * time; several entries let a sender sign with an old and a new secret).
 */
export function verifyWebhook (input: VerifyInput): string | null {
  const { secret, timestamp, signature } = input
  if (timestamp === undefined || !/^\d{1,15}$/.test(timestamp)) return 'missing or malformed timestamp'
  if (signature === undefined) return 'missing signature'
  const now = input.now ?? Math.floor(Date.now() / 1000)
  if (Math.abs(now - Number(timestamp)) > (input.toleranceSeconds ?? 300)) return 'timestamp outside the tolerance'
  const expected = Buffer.from(signWebhook(secret, Number(timestamp), input.body))
  const match = signature.split(' ').some((entry) => {
    const given = Buffer.from(entry)
    return given.length === expected.length && timingSafeEqual(given, expected)
  })
  return match ? null : 'no signature matches'
}
