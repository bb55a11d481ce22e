/**
 * When to renew a credential the gateway will end a connection at: a fifth
 * of the time left (at most a minute) before its deadline, so a slow token
 * source still has most of that margin, and a long-lived JWT is not renewed
 * hours early. Shared by the typed client and claude-remote.
 */

/**
 * The longest delay setTimeout honours (2^31−1 ms, 24.8 days): a longer one
 * fires at once (TimeoutOverflowWarning), which would renew at once, and
 * again for the renewed credential, in a loop.
 */
export const MAX_TIMER_MS = 2_147_483_647

/**
 * Milliseconds from `now` until a credential expiring at `expiresAt` should
 * be renewed (0: now), at most MAX_TIMER_MS: a caller whose timer fires
 * while the deadline is still far off should ask again rather than renew.
 */
export function refreshDelay (expiresAt: number, now: number): number {
  const left = expiresAt - now
  return Math.min(MAX_TIMER_MS, Math.max(0, left - Math.min(60_000, left / 5)))
}
