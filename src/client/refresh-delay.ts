/**
 * When to renew a credential the gateway will end a connection at: a fifth
 * of the time left (at most a minute) before its deadline, so a slow token
 * source still has most of that margin, and a long-lived JWT is not renewed
 * hours early. Shared by the typed client and claude-remote.
 */

/** Milliseconds from `now` until a credential expiring at `expiresAt` should be renewed (0: now). */
export function refreshDelay (expiresAt: number, now: number): number {
  const left = expiresAt - now
  return Math.max(0, left - Math.min(60_000, left / 5))
}
