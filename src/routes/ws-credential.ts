/**
 * The `credential` frame of a WebSocket client: a newer bearer credential
 * for the connection it is on (a JWT about to expire, a token rotated), so
 * the connection lives by it from then on (live-credentials.ts `present`):
 * its expiry with JWT_EXPIRY_ENDS_CONNECTIONS, and the next reload's check.
 * The answer is a `credential` gateway frame with the new expiry, or a
 * `credential_refused` error; the connection keeps its credential then.
 */
import type { FastifyBaseLogger } from 'fastify'
import type { Listed } from '../auth/live-credentials.js'
import { errorTable } from '../errors.js'
import { credentialFrame as credentialSchema } from '../protocol/client-frames.js'
import { errorFrame, gatewayFrame } from '../session/frames.js'
import type { WsClient } from '../ws/ws-client.js'

/** `{"type":"gateway","subtype":"credential","expires_at":…}`: when the connection's credential ends it (ISO 8601), or null. */
export function credentialFrame (expiresAt: number | null): string {
  return gatewayFrame('credential', { expires_at: expiresAt === null ? null : new Date(expiresAt).toISOString() })
}

/** Checks `value` (a frame of type `credential`) and answers it once the credential is checked. */
export function presentCredential (client: WsClient, listed: Listed | undefined, value: Record<string, unknown>, log: FastifyBaseLogger, reqId: string): void {
  const frame = credentialSchema.safeParse(value)
  if (!frame.success) {
    client.send(errorFrame('invalid_frame', 'A credential frame is {"type":"credential","token":"<token or JWT>"}'))
    return
  }
  if (listed === undefined) {
    // Opened without a credential of its own (a ticket of an older node): nothing to replace.
    client.send(errorFrame('credential_refused', 'This connection was not opened with a credential it could replace'))
    return
  }
  listed.present(frame.data.token).then((taken) => {
    client.send(taken === false ? errorFrame('credential_refused', errorTable.credential_refused.message) : credentialFrame(taken.expiresAt))
  }, (err: unknown) => {
    log.error({ reqId, err }, 'credential check failed')
    client.send(errorFrame('credential_refused', errorTable.credential_refused.message))
  })
}
