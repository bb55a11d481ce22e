/**
 * The boundary between routes and the store for session lookups and creates:
 * a store call that fails becomes `store_unavailable` (503), logged once here
 * without a stack, while a GatewayError the call raised itself passes as is.
 */
import type { Logger } from 'pino'
import { GatewayError } from '../errors.js'

/** Runs `call`; `what` completes "could not …" in the log line of a failure. */
export async function storeCall<T> (logger: Logger, what: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call()
  } catch (err) {
    if (err instanceof GatewayError) throw err
    logger.warn({ error: err instanceof Error ? err.message : String(err) }, `event store unavailable: could not ${what}`)
    throw new GatewayError('store_unavailable')
  }
}
