/**
 * Reconnect delays: exponential growth with jitter, so many clients dropped
 * at once (a gateway restart) do not come back in lockstep.
 */
import type { ReconnectOptions } from './connection-types.js'

export const BACKOFF_DEFAULTS = { initialMs: 250, maxMs: 15_000, factor: 2, jitter: 0.5, maxAttempts: Infinity } as const

export type BackoffSettings = { [K in keyof typeof BACKOFF_DEFAULTS]: number }

/** The options with defaults filled and out-of-range values clamped (jitter to 0–1, delays ≥ 0, factor ≥ 1). */
export function backoffSettings (options: ReconnectOptions = {}): BackoffSettings {
  const initialMs = Math.max(0, options.initialMs ?? BACKOFF_DEFAULTS.initialMs)
  return {
    initialMs,
    maxMs: Math.max(initialMs, options.maxMs ?? BACKOFF_DEFAULTS.maxMs),
    factor: Math.max(1, options.factor ?? BACKOFF_DEFAULTS.factor),
    jitter: Math.min(1, Math.max(0, options.jitter ?? BACKOFF_DEFAULTS.jitter)),
    maxAttempts: Math.max(1, options.maxAttempts ?? BACKOFF_DEFAULTS.maxAttempts)
  }
}

/**
 * The delay before retry number `attempt` (0 = the first retry): a value in
 * [base·(1−jitter), base] where base = min(maxMs, initialMs·factor^attempt).
 * `random` returns [0, 1) like Math.random (a parameter so tests can pin it).
 */
export function backoffDelay (attempt: number, settings: BackoffSettings, random: () => number = Math.random): number {
  const base = Math.min(settings.maxMs, settings.initialMs * Math.pow(settings.factor, Math.max(0, attempt)))
  return base * (1 - settings.jitter * random())
}
